"""`--leakage-check`: the baseline scored ungrouped on the same sample, compared level by
level with the grouped baseline; checked against a separate ungrouped evaluation."""

from __future__ import annotations

from eval_pipelines import api


def test_the_leakage_gap_equals_an_ungrouped_evaluation_of_the_same_sample(
    small_case: str,
) -> None:
    grouped = api.start_holdout_eval(
        small_case,
        [{"name": "baseline"}],
        sample_size=120,
        seed=5,
        grouping={"mode": "nearDuplicate", "threshold": 0.8},
        leakage_check=True,
        wait=True,
    )
    report = api.get_holdout_eval(small_case, grouped.eval_id).report
    gap = report["leakageGap"]
    assert gap["baseline"] == "baseline" and gap["comparedWith"] == {"mode": "none"}
    ungrouped = api.start_holdout_eval(
        small_case,
        [{"name": "baseline"}],
        sample_size=120,
        seed=5,
        grouping={"mode": "none"},
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
