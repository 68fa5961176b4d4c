"""Scoring definitions (DESIGN.md section 8) on hand-checked rows."""

import json

import polars as pl

from eval_pipelines.core.holdout.compare import compare_outcomes
from eval_pipelines.core.holdout.report_json import paired_levels_to_json, proportion_to_json
from eval_pipelines.core.holdout.scoring import row_outcomes, score_variant
from eval_pipelines.core.stats import INSUFFICIENT
from eval_pipelines.core.tree import tree_from_parent_links

TREE = tree_from_parent_links(
    pl.DataFrame(
        {
            "code": ["A", "A1", "A1.1", "A1.2", "A2", "B", "B1"],
            "parent": [None, "A", "A1", "A1", "A", None, "B"],
        }
    )
)


def _predictions(codes, routes=None, candidates=None):
    n = len(codes)
    return pl.DataFrame(
        {
            "record_key": [f"r{i}" for i in range(n)],
            "code": codes,
            "route": routes or ["auto"] * n,
            "candidates": [
                json.dumps([{"code": c, "score": 1.0} for c in cs])
                for cs in (candidates or [[]] * n)
            ],
            "error": [None] * n,
        },
        schema_overrides={"code": pl.String, "error": pl.String},
    )


LABELS = pl.DataFrame(
    {
        "record_key": ["r0", "r1", "r2", "r3"],
        "label": ["A1.1", "A1.2", "A2", "B1"],
        "label_node": ["A1.1", "A1.2", "A2", "B1"],
    }
)


def test_partial_codes_and_shallow_labels():
    outcomes = row_outcomes(_predictions(["A1.1", "A1", None, "A2"]), LABELS, TREE)
    assert outcomes["right_1"].to_list() == [True, True, False, False]
    assert outcomes["right_2"].to_list() == [True, True, False, False]
    # Level 3: A2 and B1 labels do not reach it (not scored); A1 is too shallow (declined).
    assert outcomes["right_3"].to_list() == [True, False, None, None]
    assert outcomes["declined_3"].to_list() == [False, True, None, None]
    assert outcomes["declined_1"].to_list() == [False, False, True, False]


def test_candidate_ceiling():
    outcomes = row_outcomes(
        _predictions(["B1", "B1", "B1", "B1"], candidates=[["A1.2"], ["A1.2"], [], ["B1"]]),
        LABELS,
        TREE,
    )
    assert outcomes["ceiling_2"].to_list() == [True, True, False, True]
    assert outcomes["ceiling_3"].to_list() == [False, True, None, None]


def test_small_n_reads_insufficient_evidence():
    outcomes = row_outcomes(_predictions(["A1.1", "A1", None, "A2"]), LABELS, TREE)
    score = score_variant(outcomes, TREE, (3,))
    accuracy = score.level(3).accuracy
    assert (accuracy.k, accuracy.n, accuracy.estimate, accuracy.interval) == (1, 2, None, None)
    assert proportion_to_json(accuracy) == {
        "k": 1,
        "n": 2,
        "value": INSUFFICIENT,
        "interval": None,
    }
    assert score.level(3).declined == 1


def test_paired_counts():
    base = row_outcomes(_predictions(["A1.1", "A1", None, "A2"]), LABELS, TREE)
    cand = row_outcomes(_predictions(["A1.2", "A1.2", "A2", "A2"]), LABELS, TREE)
    levels = {level.depth: level for level in compare_outcomes(base, cand, TREE, seed=0)}
    assert (levels[3].mcnemar.b, levels[3].mcnemar.c) == (1, 1)  # newly wrong, newly right
    assert paired_levels_to_json(tuple(levels.values()))["3"] == {
        "pairs": 2,
        "newlyRight": 1,
        "newlyWrong": 1,
        "bothRight": 0,
        "bothWrong": 0,
        "difference": 0.0,
        # Two pairs are far below the minimum of 20: no interval, verdict or MDE; the raw
        # counts and the exact p stay.
        "interval": "insufficient_evidence",
        "verdict": "insufficient_evidence",
        "minimumDetectableEffect": None,
        "clusters": 2,
        "resamples": 2000,
        "intervalMethod": "cluster bootstrap, percentile",
        "mcnemarP": 1.0,
    }
    assert levels[1].newly_right == 1 and levels[1].both_wrong == 1
