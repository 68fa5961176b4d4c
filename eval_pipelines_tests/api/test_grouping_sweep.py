"""The nearDuplicate threshold sweep (issue 7 item 5): per threshold, the evidence held out and
the baseline's accuracy per level on one seeded sample; each row equals the baseline of a real
holdout evaluation with that grouping."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines import api
from eval_pipelines.api.grouping import grouping_sweep
from eval_pipelines.cli.grouping import sweep_table
from eval_pipelines.cli.main import main
from eval_pipelines.core.errors import InputError, NotFoundError


def _without_timing(sweep: dict[str, Any]) -> dict[str, Any]:
    rows = [{k: v for k, v in row.items() if k != "seconds"} for row in sweep["rows"]]
    return {**{k: v for k, v in sweep.items() if k not in ("seconds", "indexBuilt")}, "rows": rows}


def test_rows_match_real_holdout_evaluations(small_case: str, tmp_path: Path) -> None:
    # An active memo entry applies to the sweep's baseline as to an evaluation's; a proposed
    # one does not.
    for entry_id, word in (("m_active", "unspecified"), ("m_proposed", "other")):
        entry = tmp_path / f"{entry_id}.yaml"
        entry.write_text(
            f"id: {entry_id}\ninstruction: Decline {word}.\n"
            f"when: {{keywords: [{word}]}}\nthen: {{decline: true}}\n"
        )
        api.add_memo_entry(small_case, entry)
    api.approve_memo_entry(small_case, "m_active", by="lead")
    result = grouping_sweep(small_case, thresholds=[0.9, 0.75, 0.95], sample_size=120, seed=3)
    assert [row.threshold for row in result.rows] == ["none", 0.95, 0.9, 0.75]
    assert (result.sample.size, result.target_depth) == (120, (3, 4))
    # The document compared with the holdout reports below.
    sweep = result.to_json()
    rows = sweep["rows"]
    assert [row["threshold"] for row in rows] == ["none", 0.95, 0.9, 0.75]
    assert sweep["sample"]["size"] == 120
    assert sweep["targetDepth"] == [3, 4]
    assert sweep["activeMemoEntries"] == 1

    # (a) Without grouping nothing is held out besides each sampled record itself.
    assert rows[0]["grouping"] == {"mode": "none"}
    assert rows[0]["heldOut"] == {
        "groupMembers": 0,
        "groupMembersPerRecord": 0.0,
        "recordsWithGroup": 0,
        "sameLabel": 0,
    }
    # (b) A lower threshold holds out a superset: the counts never fall down the sweep.
    held = [row["heldOut"] for row in rows]
    for looser, stricter in zip(held[1:], held[:-1], strict=True):
        assert looser["groupMembers"] >= stricter["groupMembers"]
        assert looser["recordsWithGroup"] >= stricter["recordsWithGroup"]
        assert looser["sameLabel"] >= stricter["sameLabel"]
    assert held[-1]["groupMembers"] > 0  # the test would prove nothing otherwise
    for entry in held:
        assert entry["groupMembersPerRecord"] == round(entry["groupMembers"] / 120, 4)
        assert entry["sameLabel"] <= entry["groupMembers"]
        assert entry["recordsWithGroup"] <= min(120, entry["groupMembers"])

    # (c) Each compared row is exactly the baseline of a holdout evaluation with that grouping:
    # the same sample, the same leave-out list and retrieval, the same classifier and scoring.
    for row, grouping in (
        (rows[-1], {"mode": "nearDuplicate", "threshold": 0.75}),
        (rows[0], {"mode": "none"}),
    ):
        started = api.start_holdout_eval(
            small_case,
            [{"name": "baseline"}],
            api.HoldoutOptions(sample_size=120, seed=3, grouping=grouping),
            wait=True,
        )
        assert started.status == "complete"
        report = api.get_holdout_eval(small_case, started.eval_id).report
        assert report["sample"]["sampleHash"] == sweep["sample"]["sampleHash"]
        assert (
            report["sample"]["grouping"]["groupMembersExcluded"] == (row["heldOut"]["groupMembers"])
        )
        assert report["versions"]["memo"] == sweep["memoVersion"] != "empty"
        assert report["variants"][0]["memoRules"]["m_active"] > 0
        assert report["variants"][0]["config"] == sweep["baseline"]["config"]
        levels = report["variants"][0]["score"]["levels"]
        assert set(levels) == set(row["levels"])
        for depth, level in levels.items():
            assert row["levels"][depth]["accuracy"] == level["accuracy"], depth
            assert row["levels"][depth]["declined"] == level["declined"], depth
            assert row["levels"][depth]["isTarget"] == (int(depth) in report["targetDepth"])
    # Grouping at 0.75 changed what the baseline saw, so the match above is not a tautology.
    assert any(
        rows[0]["levels"][d]["accuracy"]["k"] != rows[-1]["levels"][d]["accuracy"]["k"]
        for d in rows[0]["levels"]
    )


@pytest.mark.parametrize(
    ("thresholds", "value"),
    [
        ([], []),
        ([0.0], 0.0),
        ([0.9, 1.5], 1.5),
        ([-0.2], -0.2),
        ([math.nan], math.nan),
        ([1e-6], 1e-6),
        (["0.9"], "0.9"),
        ([True], True),
        ([0.9, 0.95, 0.9], 0.9),
        ("0.9", "0.9"),
        (None, None),
    ],
)
def test_bad_thresholds_are_refused_naming_the_parameter(
    workdir: object, thresholds: Any, value: Any
) -> None:
    with pytest.raises(InputError) as refused:
        grouping_sweep("small", thresholds=thresholds)
    assert refused.value.field == "thresholds"
    if isinstance(value, float) and math.isnan(value):
        assert math.isnan(refused.value.value)
    else:
        assert refused.value.value == value


def test_bad_sample_size_seed_and_config_are_refused(small_case: str) -> None:
    for kwargs, field in (
        ({"sample_size": 9}, "sampleSize"),
        ({"sample_size": 5001}, "sampleSize"),
        ({"seed": -1}, "seed"),
        ({"config": {"candidates": 0}}, "config.candidates"),
        ({"config": {"targetDepth": 9}}, "config.targetDepth"),
        ({"config": {"classifier": "nope"}}, "config.classifier"),
        ({"config": {"candidate": 5}}, "config.candidate"),
    ):
        with pytest.raises(InputError) as refused:
            grouping_sweep(small_case, thresholds=[0.9], **kwargs)
        assert refused.value.field == field, kwargs
    with pytest.raises(NotFoundError, match="no such case"):
        grouping_sweep("absent", thresholds=[0.9])


def _threshold_rows(table: str) -> list[list[str]]:
    """The cells of every line of the table that starts with a threshold of the sweep."""
    return [
        line.split()
        for line in table.splitlines()
        if line.split()[:1] in (["none"], ["0.95"], ["0.8"])
    ]


def test_the_closing_timing_line_is_not_read_as_a_threshold_row(small_case: str) -> None:
    # Issue 19 item 26: a sweep taking 0.75-0.85 s closed the table with a line "0.8 s", read
    # as the 0.8 threshold's row. The time is fixed here, so the check does not depend on it.
    sweep = grouping_sweep(small_case, thresholds=[0.95, 0.8], sample_size=40, seed=5)
    table = sweep_table(dataclasses.replace(sweep, seconds=0.8))
    assert [cells[0] for cells in _threshold_rows(table)] == ["none", "0.95", "0.8"] * 2
    assert table.splitlines()[-1].startswith("Swept in 0.8 s")


def test_the_cli_prints_the_same_sweep_as_the_api(
    small_case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", "grouping-sweep", small_case, "--thresholds", "0.8,0.95", "--sample-size", "40"]
    assert main([*argv, "--seed", "5", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    expected = grouping_sweep(small_case, thresholds=[0.95, 0.8], sample_size=40, seed=5).to_json()
    assert _without_timing(printed) == _without_timing(expected)

    assert main([*argv, "--seed", "5"]) == 0
    table = capsys.readouterr().out
    found = _threshold_rows(table)
    assert [cells[0] for cells in found] == ["none", "0.95", "0.8"] * 2
    for cells, row in zip(found[:3], expected["rows"], strict=True):
        held = row["heldOut"]
        assert cells[1:] == [
            str(held["groupMembers"]),
            f"{held['groupMembersPerRecord']:.3f}",
            str(held["recordsWithGroup"]),
            str(held["sameLabel"]),
            str(row["rowsShort"]),
        ]
    for cells, row in zip(found[3:], expected["rows"], strict=True):
        counts = [
            f"{level['accuracy']['k']}/{level['accuracy']['n']}" for level in row["levels"].values()
        ]
        assert [c for c in cells if "/" in c] == counts
    assert "category *" in table and "subcategory L4 *" in table

    for bad, needle in (
        ("0.9,abc", "--thresholds='0.9,abc'"),
        ("0.9,0.9", "--thresholds=0.9: each threshold may be given only once"),
        ("0.9,1.2", "--thresholds=1.2: each threshold must be a number above 0 and at most 1"),
    ):
        assert main(["eval", "grouping-sweep", small_case, "--thresholds", bad]) == 2
        assert needle in capsys.readouterr().err
    assert main(["eval", "grouping-sweep", "absent", "--thresholds", "0.9"]) == 2
    assert "no such case" in capsys.readouterr().err
