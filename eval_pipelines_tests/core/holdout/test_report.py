"""The report: candidate supply and votes, memo rules fired, warnings, and the markdown (every
level, target levels marked; versions, memo version and config per variant), on hand-made
rows."""

import json
from dataclasses import replace

import polars as pl
import pytest

from eval_pipelines.core.holdout.classify_config import ClassifyConfig
from eval_pipelines.core.holdout.compare import compare_outcomes
from eval_pipelines.core.holdout.grouping_settings import Grouping
from eval_pipelines.core.holdout.report import Comparison, VariantResult, build_report
from eval_pipelines.core.holdout.report_json import report_to_json
from eval_pipelines.core.holdout.report_markdown import format_difference, report_markdown
from eval_pipelines.core.holdout.scoring import (
    candidate_supply,
    memo_rule_rows,
    row_outcomes,
    score_variant,
)
from eval_pipelines.core.holdout.spec import HoldoutSpec
from eval_pipelines.core.holdout.variants import Variant
from eval_pipelines.core.tree import tree_from_parent_links

TREE = tree_from_parent_links(
    pl.DataFrame(
        {
            "code": ["A", "A1", "A1.1", "A1.2", "A2", "B", "B1"],
            "parent": [None, "A", "A1", "A1", "A", None, "B"],
            "kind": ["chapter", "block", "category", "category", "block", "chapter", "block"],
        }
    )
)
N = 12
# Labels: r0-r5 A1.1, r6-r8 A2, r9-r11 B1 (levels 1 and 2 score 12 rows, level 3 six).
LABELS = pl.DataFrame(
    {
        "record_key": [f"r{i:02d}" for i in range(N)],
        "label": ["A1.1"] * 6 + ["A2"] * 3 + ["B1"] * 3,
        "label_node": ["A1.1"] * 6 + ["A2"] * 3 + ["B1"] * 3,
    }
)
WEIGHTED = ClassifyConfig(candidates=3, target_depth=(2,))
NEAREST = ClassifyConfig(strategy="nearest", candidates=3, target_depth=(2,))


def _rows(codes, routes, votes, effective, memo_applied):
    return pl.DataFrame(
        {
            "record_key": [f"r{i:02d}" for i in range(N)],
            "code": codes,
            "confidence": [0.9] * N,
            "route": routes,
            "candidates": [
                json.dumps([{"code": c or "A", "score": 1.0, "votes": v}] if v else [])
                for c, v in zip(codes, votes, strict=True)
            ],
            "requested_candidates": [3] * N,
            "effective_candidates": effective,
            "memo_applied": [json.dumps(m) for m in memo_applied],
            "error": [None] * N,
            "tokens": [0] * N,
        },
        schema_overrides={"code": pl.String, "error": pl.String},
    )


BASELINE = _rows(
    codes=["A1.1"] * 6 + ["A2"] * 3 + ["B1", "B1", None],
    routes=["auto"] * 9 + ["review", "review", "declined"],
    votes=[3] * 11 + [0],
    effective=[3] * 11 + [2],  # r11: retrieval found only 2 records
    memo_applied=[[]] * N,
)
CANDIDATE = _rows(
    codes=["A1.2"] + ["A1.1"] * 5 + ["A2"] * 3 + ["B1"] * 3,
    routes=["review"] + ["auto"] * 11,
    votes=[1] * N,  # nearest: one vote, three records returned
    effective=[3] * N,
    memo_applied=[["m_b"], ["m_a", "m_b"]] + [[]] * (N - 2),
)


def _variant(name, config, frame, memo_ids):
    outcomes = row_outcomes(frame, LABELS, TREE)
    return outcomes, VariantResult(
        name=name,
        memo_include=(),
        memo_version="memo-" + name,
        config=config,
        score=score_variant(outcomes, TREE, (2,)),
        failed_rows=0,
        usage={},
        supply=candidate_supply(outcomes),
        memo_rules=memo_rule_rows(outcomes, memo_ids),
    )


def _report(candidate=("near|est", NEAREST, CANDIDATE, ("m_a", "m_b", "m_c")), levels=None):
    base_outcomes, base = _variant("baseline", WEIGHTED, BASELINE, ())
    cand_outcomes, cand = _variant(*candidate)
    spec = HoldoutSpec(
        eval_id="demo-e1-s7",
        case_id="demo",
        seed=7,
        sample_size=N,
        grouping=Grouping(),
        config=WEIGHTED,
        target_depth=(2,),
        variants=(
            Variant("baseline", (), WEIGHTED, "baseline"),
            Variant(cand.name, (), cand.config, "near_est"),
        ),
        records_version="rv1",
        tree_version="tv1",
        memo_version="mv1",
    )
    report = build_report(
        spec,
        TREE.levels if levels is None else levels,
        sample_hash="abc",
        sample_size=N,
        group_members_excluded=0,
        excluded_records=N,
        variants=(base, cand),
        comparisons=(
            Comparison(
                "baseline", cand.name, compare_outcomes(base_outcomes, cand_outcomes, TREE, seed=0)
            ),
        ),
    )
    return report_to_json(report)


def test_supply_counts_what_retrieval_returned_and_votes_apart():
    nearest = candidate_supply(CANDIDATE)
    # Three records returned for every row although one voted: no row is short.
    assert (nearest.requested, nearest.effective_mean, nearest.effective_min) == (3, 3.0, 3)
    assert (nearest.rows_short, nearest.votes_mean, nearest.votes_min) == (0, 1.0, 1)
    weighted = candidate_supply(BASELINE)
    assert (weighted.rows_short, weighted.rows_short_keys) == (1, ("r11",))
    assert (weighted.votes_mean, weighted.votes_min) == (33 / 12, 0)


def test_votes_are_unknown_when_candidates_do_not_count_them():
    frame = BASELINE.with_columns(
        pl.lit(json.dumps([{"code": "A", "score": 1.0}])).alias("candidates")
    )
    supply = candidate_supply(frame)
    assert (supply.votes_mean, supply.votes_min) == (None, None)


def test_memo_rule_rows_counts_each_rule_per_row_and_lists_rules_that_never_fired():
    assert memo_rule_rows(CANDIDATE, ("m_a", "m_b", "m_c")) == {"m_a": 1, "m_b": 2, "m_c": 0}
    assert memo_rule_rows(BASELINE) == {}


def test_report_json_carries_versions_config_memo_rules_and_votes():
    report = _report()
    assert report["versions"] == {"records": "rv1", "tree": "tv1", "memo": "mv1"}
    baseline, nearest = report["variants"]
    assert (baseline["memoVersion"], nearest["memoVersion"]) == ("memo-baseline", "memo-near|est")
    assert nearest["config"] == NEAREST.to_json()
    assert nearest["memoRules"] == {"m_a": 1, "m_b": 2, "m_c": 0}
    assert nearest["leaveOut"] == {
        "requestedCandidates": 3,
        "effectiveCandidatesMean": 3.0,
        "effectiveCandidatesMin": 3,
        "rowsShort": 0,
        "rowsShortKeys": [],
        "votesMean": 1.0,
        "votesMin": 1,
    }
    # Only the baseline's row r11 fell short of retrieval; nearest's single vote warns nothing.
    short = [w for w in report["warnings"] if w["code"] == "candidates_short"]
    assert short == [
        {
            "code": "candidates_short",
            "message": "variant baseline: retrieval returned fewer than the 3 evidence records "
            "requested for 1 rows (too few records share any text feature with them)",
        }
    ]


def _compact(config):
    return json.dumps(config.to_json(), separators=(", ", ": "), sort_keys=True)


def test_markdown_shows_every_level_versions_memo_and_config():
    report = _report()
    lines = report_markdown(report).splitlines()
    assert (
        "Versions: records `rv1`, tree `tv1`, memo `mv1`; "
        f"comparable as `{report['comparableAs']}`." in lines
    )
    # Per variant: memo version, rows each memo rule fired on, evidence returned and voting
    # (baseline: (11 * 3 + 2) / 12 = 2.917 returned, 33 / 12 = 2.75 voted), and the config.
    assert (
        "| baseline | `memo-baseline` | none | 3 requested, 2.917 returned on average (min 2), "
        f"2.75 voted on average (min 0) | `{_compact(WEIGHTED)}` |" in lines
    )
    assert (
        "| near\\|est | `memo-near\\|est` | `m_a` 1, `m_b` 2, `m_c` 0 | 3 requested, 3 returned "
        f"on average (min 3), 1 voted on average (min 1) | `{_compact(NEAREST)}` |" in lines
    )
    # Every level, the target (2) marked. Twelve rows are below the minimum of 20: the counts
    # show, the estimates read insufficient_evidence (intervals are checked against
    # statsmodels in api/test_holdout.py).
    assert "| level | baseline | near\\|est |" in lines
    assert (
        "| L1 chapter | insufficient_evidence (k=11, n=12) | insufficient_evidence (k=12, n=12) |"
        in lines
    )
    assert (
        "| **L2 block** (target) | insufficient_evidence (k=11, n=12) | "
        "insufficient_evidence (k=12, n=12) |" in lines
    )
    assert (
        "| L3 category | insufficient_evidence (k=6, n=6) | insufficient_evidence (k=5, n=6) |"
        in lines
    )
    assert "| routed auto / review / declined | 9 / 2 / 1 | 11 / 1 / 0 |" in lines
    # Paired comparisons at every level, the target marked.
    assert (
        "| baseline | near\\|est | L1 chapter | 12 | 1 | 0 | +0.083 | insufficient_evidence "
        "| insufficient_evidence | — | 1 |"
    ) in lines
    assert (
        "| baseline | near\\|est | **L2 block** (target) | 12 | 1 | 0 | +0.083 | "
        "insufficient_evidence | insufficient_evidence | — | 1 |"
    ) in lines
    assert (
        "| baseline | near\\|est | L3 category | 6 | 0 | 1 | -0.167 | insufficient_evidence "
        "| insufficient_evidence | — | 1 |"
    ) in lines


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (-1 / 3000, "0.000"),  # issue 7: printed -0.000
        (1 / 3000, "0.000"),
        (0.0, "0.000"),
        (-0.0, "0.000"),
        (-0.012, "-0.012"),
        (0.06, "+0.060"),
        (None, "n/a"),
    ],
)
def test_format_difference_signs_only_nonzero_rounded_values(value, text):
    assert format_difference(value) == text


def test_a_verdict_needs_the_interval_and_the_exact_test() -> None:
    from eval_pipelines.core.holdout.report_json import confirmed_verdict

    # The demo's chapter level: interval [+0.010, +0.055] (better) but Holm p 0.0625.
    assert confirmed_verdict("better", 0.0625) == "no detectable difference"
    assert confirmed_verdict("better", 0.0037) == "better"
    assert confirmed_verdict("worse", 0.01) == "worse"
    assert confirmed_verdict("insufficient_evidence", 0.01) == "insufficient_evidence"


# Codes that stop at level 1 (chapters A, B) under a level-2 target: right at L1 for all 12,
# none reaching L2, where all 12 rows count as declined.
CHAPTERS_ONLY = _rows(
    codes=["A"] * 9 + ["B"] * 3,
    routes=["declined"] * N,
    votes=[3] * N,
    effective=[3] * N,
    memo_applied=[[]] * N,
)


def test_a_variant_whose_codes_stop_above_a_target_level_is_warned_about():
    report = _report(("chapters", WEIGHTED, CHAPTERS_ONLY, ()))
    chapters = report["variants"][1]["score"]
    assert chapters["targetDepth"]["2"]["k"] == 0 and chapters["targetDepth"]["2"]["n"] == 12
    shallow = [w for w in report["warnings"] if w["code"] == "no_codes_at_target"]
    assert shallow == [
        {
            "code": "no_codes_at_target",
            "message": "variant chapters: none of its 12 predictions reaches target level L2 "
            "block, though codes reach shallower levels: its accuracy there is 0 by "
            "construction (a code shallower than a level counts as declined at it), not a "
            "measure of wrong codes",
        }
    ]
    # A level named with its depth (several levels of one kind) reads once, as in the tables.
    named = tuple(replace(level, name=f"{level.name} L{level.depth}") for level in TREE.levels)
    again = _report(("chapters", WEIGHTED, CHAPTERS_ONLY, ()), levels=named)["warnings"]
    assert [w["message"] for w in again if w["code"] == "no_codes_at_target"] == [
        shallow[0]["message"]
    ]
    # Variants with codes at the target (one row declined is not every row) are not named.
    assert "no_codes_at_target" not in [w["code"] for w in _report()["warnings"]]
