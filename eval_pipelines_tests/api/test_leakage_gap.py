"""`--leakage-check`: the baseline scored ungrouped on the same sample, compared level by
level with the grouped baseline; checked against a separate ungrouped evaluation. The run's
`leakage_gap` check reports the levels grouping moved as a finding that passes."""

from __future__ import annotations

from typing import Any

import dagster as dg

from eval_pipelines import api
from eval_pipelines.runs.instance import dagster_instance


def _leakage_gap_check(run_id: str) -> Any:
    (record,) = [
        r
        for r in dagster_instance().all_logs(
            run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
        )
        if r.dagster_event is not None
        and r.dagster_event.asset_check_evaluation_data.check_name == "leakage_gap"
    ]
    assert record.dagster_event is not None
    return record.dagster_event.asset_check_evaluation_data


def test_the_leakage_gap_equals_an_ungrouped_evaluation_of_the_same_sample(
    small_case: str,
) -> None:
    grouped = api.start_holdout_eval(
        small_case,
        [{"name": "baseline"}],
        api.HoldoutOptions(
            sample_size=120,
            seed=5,
            grouping={"mode": "nearDuplicate", "threshold": 0.8},
            leakage_check=True,
        ),
        wait=True,
    )
    report = api.get_holdout_eval(small_case, grouped.eval_id).report
    gap = report["leakageGap"]
    assert gap["baseline"] == "baseline" and gap["comparedWith"] == {"mode": "none"}
    ungrouped = api.start_holdout_eval(
        small_case,
        [{"name": "baseline"}],
        api.HoldoutOptions(sample_size=120, seed=5, grouping={"mode": "none"}),
        wait=True,
    )
    plain = api.get_holdout_eval(small_case, ungrouped.eval_id).report
    assert plain["sample"]["sampleHash"] == report["sample"]["sampleHash"]
    grouped_levels = report["variants"][0]["score"]["levels"]
    plain_levels = plain["variants"][0]["score"]["levels"]
    for depth, level in gap["levels"].items():
        right_grouped = grouped_levels[depth]["accuracy"]["k"]
        right_plain = plain_levels[depth]["accuracy"]["k"]
        n = grouped_levels[depth]["accuracy"]["n"]
        # Same records, same classifier: the ungrouped evaluation is exactly the check's
        # second scoring, so the gap is the difference of the two accuracies.
        assert level["pairs"] == n
        assert level["newlyRight"] - level["newlyWrong"] == right_plain - right_grouped
    status = api.get_holdout_eval(small_case, grouped.eval_id)
    assert "Leakage gap of `baseline`" in status.report_markdown

    # The demo's happy path showed a failed leakage_gap check: grouping lowering a level is
    # what the check exists to report, not a fault of this (grouped) evaluation.
    assert grouped.run_id is not None
    check = _leakage_gap_check(grouped.run_id)
    assert check.passed and check.metadata["requested"].value is True
    moved = [
        int(depth)
        for depth, level in gap["levels"].items()
        if int(depth) in report["targetDepth"] and level["verdict"] in ("better", "worse")
    ]
    assert moved, "this sample must show a moved level (else the test proves nothing)"
    assert check.metadata["moved_levels"].value == sorted(moved)
    description = check.description or ""
    assert all(f"lowered L{d}" in description or f"raised L{d}" in description for d in moved)
