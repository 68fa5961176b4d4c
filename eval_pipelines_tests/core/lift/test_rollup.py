"""Per-cell rollups against a plain-Python recount, and the Wilson interval against statsmodels.

Oracles: counting (a loop over the rows, grouped by the cell keys), statsmodels
proportion_confint(method="wilson") for the interval, and the pinned minimum-sample policy of
core.stats (n < 20 resolved outcomes reads insufficient_evidence; counts always shown).
"""

import json
from collections import defaultdict

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.proportion import proportion_confint

from eval_pipelines.core.lift.rollup import (
    CELL_KEYS,
    CellRollup,
    EpochMixError,
    require_one_epoch,
    rollup,
)
from eval_pipelines.core.stats import INSUFFICIENT, MIN_N

ARMS = ("treated", "pre_lever", "imported", "holdout", "lever_holdout")
SOURCES = ("declared", "inferred", "imported")


def events(rows):
    """Events from ``(workspace, claim, situation, arm, source, epoch, cluster, outcome)``."""
    columns = (*CELL_KEYS, "exposure_epoch", "cluster", "outcome")
    data = {name: [row[i] for row in rows] for i, name in enumerate(columns)}
    schema = {name: pl.String for name in columns[:-1]} | {"outcome": pl.Boolean}
    return pl.DataFrame(data, schema=schema)


def cell_rows(arm="treated", source="declared", *, right=0, wrong=0, censored=0, epoch="e1"):
    outcomes = [True] * right + [False] * wrong + [None] * censored
    return [
        ("w1", "fact", "routine", arm, source, epoch, f"{arm}-{source}-{i // 2}", outcome)
        for i, outcome in enumerate(outcomes)
    ]


def random_events(seed, n=3_000):
    rng = np.random.default_rng(seed)
    outcome = rng.choice(np.array([True, False, None], dtype=object), n, p=[0.5, 0.3, 0.2])
    return events(
        list(
            zip(
                rng.choice(["w1", "w2"], n).tolist(),
                rng.choice(["fact", "preference"], n).tolist(),
                rng.choice(["routine", "novel"], n).tolist(),
                rng.choice(ARMS, n).tolist(),
                rng.choice(SOURCES, n).tolist(),
                ["e1"] * n,
                [f"k{k}" for k in rng.integers(0, 800, n)],
                outcome.tolist(),
                strict=True,
            )
        )
    )


def test_cells_match_a_plain_recount():
    # Oracle: counting. Every row lands in exactly the cell of its own five keys, and every
    # count of that cell is the count over its rows.
    frame = random_events(0)
    expected = defaultdict(lambda: {"total": 0, "resolved": 0, "successes": 0, "clusters": set()})
    for row in frame.iter_rows(named=True):
        cell = expected[tuple(row[key] for key in CELL_KEYS)]
        cell["total"] += 1
        cell["resolved"] += row["outcome"] is not None
        cell["successes"] += row["outcome"] is True
        cell["clusters"].add(row["cluster"])
    cells = rollup(frame)
    assert all(isinstance(cell, CellRollup) for cell in cells)
    assert {tuple(getattr(c, k) for k in CELL_KEYS) for c in cells} == set(expected)
    assert len(cells) == len(expected)  # no cell twice
    for cell in cells:
        want = expected[tuple(getattr(cell, k) for k in CELL_KEYS)]
        assert (cell.total, cell.resolved, cell.successes) == (
            want["total"],
            want["resolved"],
            want["successes"],
        )
        assert cell.censored == want["total"] - want["resolved"]
        assert cell.censored_share == cell.censored / cell.total
        assert cell.clusters == len(want["clusters"])
        assert (cell.rate.k, cell.rate.n) == (cell.successes, cell.resolved)
        assert cell.epoch == "e1"
    assert sum(cell.total for cell in cells) == frame.height
    keys = [tuple(getattr(c, k) for k in CELL_KEYS) for c in cells]
    assert keys == sorted(keys)


def test_two_arms_never_share_a_cell():
    # Same workspace, claim type, situation class and source; five arms with different
    # outcomes. Pooling any two would give a cell whose counts are a sum: each cell instead
    # holds exactly its own arm's rows, and its arm is the arm of those rows.
    rows = []
    for position, arm in enumerate(ARMS):
        rows += cell_rows(arm, right=10 * position + 5, wrong=3, censored=position)
    cells = rollup(events(rows))
    assert sorted(cell.exposure_arm for cell in cells) == sorted(ARMS)
    for cell in cells:
        position = ARMS.index(cell.exposure_arm)
        assert (cell.successes, cell.resolved, cell.censored) == (
            10 * position + 5,
            10 * position + 8,
            position,
        )


def test_sources_are_rolled_separately():
    rows = cell_rows("treated", "declared", right=30, wrong=10)
    rows += cell_rows("treated", "inferred", right=5, wrong=25)
    rows += cell_rows("treated", "imported", right=1, wrong=1, censored=2)
    cells = {cell.source: cell for cell in rollup(events(rows))}
    assert set(cells) == set(SOURCES)
    assert (cells["declared"].successes, cells["declared"].resolved) == (30, 40)
    assert (cells["inferred"].successes, cells["inferred"].resolved) == (5, 30)
    assert (cells["imported"].successes, cells["imported"].censored) == (1, 2)


def test_censored_counted_and_share_reported_below_the_minimum_sample():
    # Pinned policy (spec 004): below n = 20 the rate reads insufficient_evidence, never a
    # computed-looking number, while the raw counts and the censored share are reported.
    (cell,) = rollup(events(cell_rows(right=2, wrong=1, censored=2)))
    assert (cell.total, cell.resolved, cell.successes, cell.censored) == (5, 3, 2, 2)
    assert cell.censored_share == 0.4
    assert cell.rate.estimate is None and cell.rate.interval is None
    payload = cell.to_json()
    assert payload["rate"] == {"k": 2, "n": 3, "value": INSUFFICIENT, "interval": None}
    assert payload["censored"] == 2 and payload["censoredShare"] == 0.4
    assert payload["total"] == 5 and payload["resolved"] == 3


def test_minimum_sample_counts_resolved_outcomes_only():
    # 25 rows of which 6 censored: 19 resolved, insufficient; censored rows never make up n.
    (short,) = rollup(events(cell_rows(right=12, wrong=7, censored=6)))
    assert (short.total, short.resolved) == (25, MIN_N - 1)
    assert not short.rate.sufficient
    (enough,) = rollup(events(cell_rows(right=12, wrong=8, censored=6)))
    assert enough.resolved == MIN_N and enough.rate.sufficient
    assert enough.rate.estimate == 12 / 20


@pytest.mark.parametrize(("right", "wrong"), [(57, 143), (3, 17), (20, 0), (4_321, 679)])
def test_wilson_interval_matches_statsmodels(right, wrong):
    # expected from statsmodels proportion_confint(method="wilson"); tolerance 1e-12: the
    # same closed form in double precision, operations in a different order.
    (cell,) = rollup(events(cell_rows(right=right, wrong=wrong, censored=7)))
    low, high = proportion_confint(right, right + wrong, alpha=0.05, method="wilson")
    assert cell.rate.interval.low == pytest.approx(low, abs=1e-12)
    assert cell.rate.interval.high == pytest.approx(high, abs=1e-12)
    assert cell.rate.estimate == right / (right + wrong)


def test_mixing_epochs_raises_and_epoch_selects_one():
    rows = cell_rows(right=30, wrong=10, epoch="e1") + cell_rows(right=1, wrong=29, epoch="e2")
    frame = events(rows)
    with pytest.raises(EpochMixError, match="combining epochs e1, e2 would pool two experiments"):
        rollup(frame)
    with pytest.raises(ValueError, match="e1, e2"):  # an EpochMixError is a ValueError
        require_one_epoch(frame)
    (first,) = rollup(frame, epoch="e1")
    (second,) = rollup(frame, epoch="e2")
    assert (first.epoch, first.successes, first.resolved) == ("e1", 30, 40)
    assert (second.epoch, second.successes, second.resolved) == ("e2", 1, 30)
    assert rollup(frame, epoch="e3") == ()
    assert require_one_epoch(frame.filter(pl.col("exposure_epoch") == "e2")) == "e2"
    with pytest.raises(EpochMixError) as error:
        rollup(frame)
    assert error.value.epochs == ("e1", "e2")
    assert str(EpochMixError("epochs e1 and e3 differ")) == "epochs e1 and e3 differ"


def test_an_arm_outside_the_closed_set_is_refused_by_name():
    rows = cell_rows(right=3) + [("w1", "fact", "routine", "shadow", "declared", "e1", "x", True)]
    with pytest.raises(ValueError, match="shadow"):
        rollup(events(rows))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f.drop("cluster"), "cluster"),
        (lambda f: f.with_columns(pl.lit(None, pl.String).alias("exposure_arm")), "exposure_arm"),
        (lambda f: f.with_columns(pl.lit(1).alias("outcome")), "outcome"),
    ],
)
def test_malformed_events_are_refused(change, message):
    with pytest.raises(ValueError, match=message):
        rollup(change(events(cell_rows(right=3, wrong=2))))


def test_no_events_and_all_censored():
    assert rollup(events([])) == ()
    with pytest.raises(ValueError, match="no rows"):
        require_one_epoch(events([]))
    # An outcome column of nulls only (every claim still unresolved) reads as all censored.
    frame = events(cell_rows(censored=4)).with_columns(pl.lit(None).alias("outcome"))
    (cell,) = rollup(frame)
    assert (cell.total, cell.resolved, cell.censored, cell.censored_share) == (4, 0, 4, 1.0)
    assert cell.rate.to_json()["value"] == INSUFFICIENT


def test_to_json_is_camel_case_and_serialisable():
    (cell,) = rollup(events(cell_rows(right=15, wrong=10, censored=3)))
    payload = cell.to_json()
    assert list(payload) == [
        "workspaceId",
        "claimType",
        "situationClass",
        "exposureArm",
        "source",
        "epoch",
        "total",
        "resolved",
        "successes",
        "censored",
        "censoredShare",
        "clusters",
        "rate",
    ]
    assert payload["rate"]["value"] == 0.6 and payload["clusters"] == 14
    json.dumps(payload)
