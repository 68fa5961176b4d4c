"""Holdout diagnostics (error severity, risk-coverage, label review) on hand-checked rows."""

import json

import polars as pl
import pytest
from statsmodels.stats.proportion import proportion_confint

from eval_pipelines.core.holdout.classify import route_for
from eval_pipelines.core.holdout.diagnostics import (
    DEFAULT_THRESHOLDS,
    agreement_depth,
    error_rows,
    error_severity,
    label_review,
    risk_coverage,
)
from eval_pipelines.core.holdout.report_json import proportion_to_json
from eval_pipelines.core.holdout.scoring import row_outcomes
from eval_pipelines.core.stats import INSUFFICIENT
from eval_pipelines.core.tree import tree_from_parent_links

# Wilson bounds are the same closed form evaluated in double precision by both
# implementations; 1e-12 absorbs the different order of floating-point operations.
TOL = 1e-12

#   A ── A1 ── A1.1          B ── B1 ── B1.1
#    │     └── A1.2
#    └── A2 ── A2.1
TREE = tree_from_parent_links(
    pl.DataFrame(
        {
            "code": ["A", "A1", "A1.1", "A1.2", "A2", "A2.1", "B", "B1", "B1.1"],
            "parent": [None, "A", "A1", "A1", "A", "A2", None, "B", "B1"],
        }
    )
)


def _outcomes(rows, *, target=2, auto_above=0.8, keys=None):
    """Outcome rows from ``(label_node, code, confidence)`` triples, routed as knn-vote
    routes (:func:`route_for` at the shallowest target depth)."""
    keys = keys or [f"r{i:02d}" for i in range(len(rows))]
    labels = pl.DataFrame(
        {
            "record_key": keys,
            "label": [label for label, _, _ in rows],
            "label_node": [label for label, _, _ in rows],
        }
    )
    predictions = pl.DataFrame(
        {
            "record_key": keys,
            "code": [code for _, code, _ in rows],
            "confidence": [float(conf) for _, _, conf in rows],
            "route": [
                route_for(code, conf, target=target, auto_above=auto_above, tree=TREE)
                for _, code, conf in rows
            ],
            "candidates": ["[]"] * len(rows),
            "error": [None] * len(rows),
        },
        schema_overrides={"code": pl.String, "error": pl.String},
    )
    return row_outcomes(predictions, labels, TREE)


def _check_wilson(proportion, k, n):
    # expected from statsmodels proportion_confint(method="wilson")
    low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
    assert (proportion.k, proportion.n) == (k, n)
    assert proportion.estimate == pytest.approx(k / n, abs=TOL)
    assert proportion.interval.low == pytest.approx(low, abs=TOL)
    assert proportion.interval.high == pytest.approx(high, abs=TOL)


# ------------------------------------------------------------------------------ severity


def test_agreement_depth_is_the_deepest_common_ancestor():
    assert agreement_depth(TREE, "A1.2", "A1.1") == 2  # common ancestor A1
    assert agreement_depth(TREE, "A2.1", "A1.1") == 1  # common ancestor A
    assert agreement_depth(TREE, "B1.1", "A1.1") == 0  # different top level
    assert agreement_depth(TREE, "A1", "A1.1") == 2  # A1 is itself the ancestor
    assert agreement_depth(TREE, "A1.1", "A1.1") == 3
    assert agreement_depth(TREE, None, "A1.1") == 0
    assert agreement_depth(TREE, "Z9", "A1.1") == 0  # unknown to the tree


SEVERITY_ROWS = [
    ("A1.1", "A1.1", 0.9),  # r00 right at 3: not listed
    ("A1.1", "A1.2", 0.9),  # r01 error, agree at 2 (A1); distance (3-2)+(3-2) = 2
    ("A1.1", "A2.1", 0.9),  # r02 error, agree at 1 (A);  distance (3-1)+(3-1) = 4
    ("A1.1", "B1.1", 0.9),  # r03 error, agree at 0;      distance (3-0)+(3-0) = 6
    ("A1.1", "A1", 0.9),  # r04 decline (code stops at 2), partial code agrees at 2
    ("A2", "B1.1", 0.9),  # r05 label A2 is at depth 2: not scored at 3
    ("A1.2", None, 0.0),  # r06 decline, no code: agreement 0
    ("A1.2", "Z9", 0.9),  # r07 code unknown to the tree: scored as a decline, agreement 0
]


def test_error_rows_at_the_leaf():
    rows = error_rows(_outcomes(SEVERITY_ROWS, target=3), TREE, target_depth=3)
    assert rows.get_column("record_key").to_list() == ["r01", "r02", "r03", "r04", "r06", "r07"]
    assert rows.get_column("kind").to_list() == [
        "error",
        "error",
        "error",
        "declined",
        "declined",
        "declined",
    ]
    assert rows.get_column("agreement_depth").to_list() == [2, 1, 0, 2, 0, 0]
    assert rows.get_column("label_depth").to_list() == [3, 3, 3, 3, 3, 3]
    assert rows.get_column("code_depth").to_list() == [3, 3, 3, 2, None, None]
    assert rows.get_column("distance").to_list() == [2, 4, 6, None, None, None]


def test_error_severity_small_sample():
    severity = error_severity(_outcomes(SEVERITY_ROWS, target=3), TREE, target_depth=3)
    # 8 rows, r05's label does not reach depth 3: 7 scored; wrong: 3 errors + 3 declines.
    assert (severity.scored, severity.errors, severity.declined) == (7, 3, 3)
    assert [(a.depth, a.name, a.count) for a in severity.by_agreement] == [
        (0, "none", 1),  # r03
        (1, "level 1", 1),  # r02
        (2, "level 2", 1),  # r01
    ]
    # declines: r06, r07 agree nowhere; r04 (A1) agrees at 2.
    assert [a.count for a in severity.declined_by_agreement] == [2, 0, 1]
    assert severity.distance_counts == ((2, 1), (4, 1), (6, 1))
    # 3 errors < 20: the mean distance and the shares are derived statistics, so withheld.
    assert severity.mean_distance is None
    payload = severity.to_json()
    assert payload["distance"] == {"n": 3, "counts": {"2": 1, "4": 1, "6": 1}, "mean": INSUFFICIENT}
    assert payload["byAgreement"][0] == {
        "depth": 0,
        "name": "none",
        "count": 1,
        "share": {"k": 1, "n": 3, "value": INSUFFICIENT, "interval": None},
    }
    json.dumps(payload)


def test_distance_uses_the_full_nodes_below_the_target_depth():
    rows = [
        ("A1.1", "A2.1", 0.9),  # agree at 1; distance (3-1)+(3-1) = 4
        ("A2", "A1.1", 0.9),  # agree at 1; distance (3-1)+(2-1) = 3 (prediction deeper)
        ("A2", "B1", 0.9),  # agree at 0; distance (2-0)+(2-0) = 4
        ("A1.1", "A1.2", 0.9),  # right at 2 (wrong only at 3): not an error at depth 2
        ("A", "B1.1", 0.9),  # label at depth 1: not scored at 2
    ]
    severity = error_severity(_outcomes(rows), TREE, target_depth=2)
    assert (severity.scored, severity.errors, severity.declined) == (4, 3, 0)
    assert [a.count for a in severity.by_agreement] == [1, 2]  # depths 0, 1
    assert severity.distance_counts == ((3, 1), (4, 2))


def test_mean_distance_and_shares_from_twenty_errors():
    rows = (
        [("A1.1", "A1.2", 0.9)] * 10  # agree at 2, distance 2
        + [("A1.1", "A2.1", 0.9)] * 6  # agree at 1, distance 4
        + [("A1.1", "B1.1", 0.9)] * 4  # agree at 0, distance 6
        + [("A1.1", "A1.1", 0.9)] * 5  # right
    )
    severity = error_severity(_outcomes(rows, target=3), TREE, target_depth=3)
    assert (severity.scored, severity.errors, severity.declined) == (25, 20, 0)
    # (10*2 + 6*4 + 4*6) / 20 = 68 / 20 = 3.4
    assert severity.mean_distance == pytest.approx(3.4, abs=TOL)
    assert [a.count for a in severity.by_agreement] == [4, 6, 10]
    _check_wilson(severity.by_agreement[0].share, 4, 20)
    _check_wilson(severity.by_agreement[2].share, 10, 20)
    assert severity.to_json()["distance"]["mean"] == 3.4


def test_severity_rejects_a_depth_outside_the_tree():
    with pytest.raises(ValueError):
        error_severity(_outcomes(SEVERITY_ROWS, target=3), TREE, target_depth=4)


# ------------------------------------------------------------------------- risk-coverage

RISK_ROWS = (
    [("A1.1", None, 0.0)] * 5  # declined: never covered, even at t = 0
    + [("B", "B1", 0.95)]  # label at depth 1: covered, but not in the risk's n
    + [("A1.1", "A1.2", 0.95)] * 9  # right at the target depth 2 (wrong only at 3)
    + [("A1.1", "A2.1", 0.95)]  # wrong at 2
    + [("A1.1", "A1.1", 0.85)] * 4  # right
    + [("A1.1", "B1.1", 0.85)]  # wrong
    + [("A1.1", "A1.1", 0.45)] * 2  # right
    + [("A1.1", "A2", 0.45)] * 3  # wrong
)  # 26 rows


def test_risk_coverage_over_the_grid():
    outcomes = _outcomes(RISK_ROWS, auto_above=0.85)
    table = risk_coverage(outcomes, target_depth=2, auto_above=0.85)
    assert (table.n, table.declined, table.auto_above) == (26, 5, 0.85)
    # 0.0 .. 1.0 plus autoAbove 0.85 between 0.8 and 0.9.
    assert [p.threshold for p in table.points] == [
        0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 1.0,
    ]  # fmt: skip
    assert [p.is_auto_above for p in table.points] == [False] * 9 + [True, False, False]
    counts = [(p.coverage.k, p.risk.k, p.risk.n) for p in table.points]
    # t <= 0.45: covered 1 + 10 + 5 + 5 = 21; scored 20; wrong 1 + 1 + 3 = 5
    # 0.45 < t <= 0.85: covered 1 + 10 + 5 = 16; scored 15; wrong 1 + 1 = 2
    # 0.85 < t <= 0.95: covered 1 + 10 = 11; scored 10; wrong 1
    # t = 1.0: nothing covered
    assert counts == [(21, 5, 20)] * 5 + [(16, 2, 15)] * 5 + [(11, 1, 10), (0, 0, 0)]
    assert all(p.coverage.n == 26 for p in table.points)
    start = table.points[0]
    _check_wilson(start.coverage, 21, 26)
    _check_wilson(start.risk, 5, 20)  # 5 / 20 = 0.25
    # Below 20 covered-and-scored rows the risk reads insufficient_evidence (policy, not 20
    # hard-coded here: estimate_proportion decides).
    assert table.points[5].risk.estimate is None and table.points[5].risk.interval is None
    _check_wilson(table.points[-1].coverage, 0, 26)
    assert table.points[-1].coverage.interval.low == 0.0
    # At t = autoAbove the covered rows are exactly the rows routed auto.
    assert table.points[9].coverage.k == int((outcomes.get_column("route") == "auto").sum())


def test_risk_coverage_json_uses_the_report_format():
    table = risk_coverage(_outcomes(RISK_ROWS), target_depth=2, auto_above=0.8)
    payload = table.to_json()
    json.dumps(payload)
    assert len(payload["points"]) == 11  # 0.8 is already on the grid
    point = table.points[0]
    assert payload["points"][0] == {
        "threshold": 0.0,
        "autoAbove": False,
        "coverage": proportion_to_json(point.coverage),
        "risk": proportion_to_json(point.risk),
    }
    assert payload["points"][8]["autoAbove"] is True
    assert payload["points"][5]["risk"] == {
        "k": 2,
        "n": 15,
        "value": INSUFFICIENT,
        "interval": None,
    }


def test_risk_coverage_custom_thresholds():
    table = risk_coverage(_outcomes(RISK_ROWS), target_depth=2, thresholds=[0.9, 0.5, 0.5])
    assert [p.threshold for p in table.points] == [0.5, 0.9]
    assert not any(p.is_auto_above for p in table.points)
    assert DEFAULT_THRESHOLDS == (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    with pytest.raises(ValueError):
        risk_coverage(_outcomes(RISK_ROWS), target_depth=2, thresholds=[1.5])
    with pytest.raises(ValueError):
        risk_coverage(_outcomes(RISK_ROWS), target_depth=5)  # no right_5 column


# -------------------------------------------------------------------------- label review

#        label   variant one       variant two
REVIEW = {
    "k0": ("A1.1", ("B1.1", 0.95), ("B1.1", 0.90)),  # listed, agreeing on B1, min .90
    "k1": ("A1.1", ("A2.1", 0.99), ("B1.1", 0.85)),  # listed, A2 vs B1, min .85
    "k2": ("A1.1", ("B1.1", 0.95), ("B1.1", 0.70)),  # not: two is below .8
    "k3": ("A1.1", ("B1.1", 0.95), ("A1.2", 0.95)),  # not: two is right at depth 2
    "k4": ("A2", ("B1", 0.90), ("B1.1", 0.90)),  # listed, both under B1, min .90
    "k5": ("A1.1", (None, 0.0), ("B1.1", 0.90)),  # not: one declined
    "k6": ("A", ("B1.1", 0.90), ("B1.1", 0.90)),  # not considered: label at depth 1
    "k7": ("A1.1", ("A2.1", 0.80), ("A2", 0.80)),  # listed (>= is inclusive), agreeing on A2
    "k8": ("A1.1", ("B1.1", 0.90), ("A2.1", 0.88)),  # listed, not agreeing, min .88
    "k9": ("A1.1", ("B1.1", 0.90), ("A2.1", 0.90)),  # listed, not agreeing, min .90
    "k10": ("A1.1", ("B", 0.90), ("B", 0.90)),  # not: codes stop above depth 2 (declines)
}


def _variant(position, reverse=False):
    keys = sorted(REVIEW, reverse=reverse)
    rows = [(REVIEW[k][0], *REVIEW[k][position]) for k in keys]
    return _outcomes(rows, keys=keys)


def test_label_review_lists_confident_errors_of_every_variant():
    review = label_review(
        {"one": _variant(1), "two": _variant(2, reverse=True)}, TREE, target_depth=2
    )
    assert review.variants == ("one", "two")
    assert review.considered == 10  # all but k6
    # min confidence descending; at .90 the agreeing records first, then by key.
    assert [(r.record_key, r.min_confidence, r.agreeing) for r in review.records] == [
        ("k0", 0.90, True),
        ("k4", 0.90, True),
        ("k9", 0.90, False),
        ("k8", 0.88, False),
        ("k1", 0.85, False),
        ("k7", 0.80, True),
    ]
    assert review.agreeing == 3
    assert review.to_json()["records"][1] == {
        "recordKey": "k4",
        "label": "A2",
        "labelNode": "A2",
        "labelAncestor": "A2",
        "minConfidence": 0.9,
        "agreeing": True,
        "predictions": [
            {"variant": "one", "code": "B1", "ancestor": "B1", "confidence": 0.9, "route": "auto"},
            {
                "variant": "two",
                "code": "B1.1",
                "ancestor": "B1",
                "confidence": 0.9,
                "route": "auto",
            },
        ],
    }
    payload = review.to_json()
    json.dumps(payload)
    assert (payload["listed"], payload["agreeing"], payload["considered"]) == (6, 3, 10)


def test_label_review_threshold_and_single_variant():
    stricter = label_review(
        {"one": _variant(1), "two": _variant(2)}, TREE, target_depth=2, min_confidence=0.9
    )
    assert [r.record_key for r in stricter.records] == ["k0", "k4", "k9"]
    # One variant: its confident errors at depth 2 (k0, k1, k2, k3, k4, k7, k8, k9), agreeing
    # trivially; sorted .99, .95 (k0, k2, k3 by key), .90 (k4, k8, k9), .80.
    alone = label_review({"one": _variant(1)}, TREE, target_depth=2)
    assert [r.record_key for r in alone.records] == [
        "k1", "k0", "k2", "k3", "k4", "k8", "k9", "k7",
    ]  # fmt: skip
    assert all(r.agreeing for r in alone.records)


def test_label_review_rejects_mismatched_variants():
    with pytest.raises(ValueError):
        label_review({}, TREE, target_depth=2)
    with pytest.raises(ValueError):
        label_review({"one": _variant(1), "two": _variant(2).head(3)}, TREE, target_depth=2)
    with pytest.raises(ValueError):
        label_review({"one": _variant(1)}, TREE, target_depth=2, min_confidence=1.2)
