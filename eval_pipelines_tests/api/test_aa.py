"""`--aa`: the baseline's twin as an A/A arm; the report's noise floor and the comparison of
the baseline with itself."""

from __future__ import annotations

import pytest

from eval_pipelines import api
from eval_pipelines.core.errors import InputError


def test_the_baseline_against_its_twin_reads_no_detectable_difference(small_case: str) -> None:
    started = api.start_holdout_eval(
        small_case,
        [{"name": "baseline"}, {"name": "k5", "config": {"candidates": 5}}],
        api.HoldoutOptions(sample_size=200, seed=3, aa=True),
        wait=True,
    )
    status = api.get_holdout_eval(small_case, started.eval_id)
    report = status.report
    assert [v["name"] for v in report["variants"]] == ["baseline", "k5", "aa-twin"]
    usage = report["variants"][0]["usage"]
    # Cost per variant: one classify call per record; knn-vote spends no tokens.
    assert (usage["classifyCalls"], usage["tokens"], usage["inputTokens"]) == (200, 0, 0)
    assert usage["outputTokens"] == 0 and usage["seconds"] >= 0
    twin = next(c for c in report["comparisons"] if c["candidate"] == "aa-twin")
    for level in twin["levels"].values():
        # knn-vote is deterministic: the twin predicts exactly what the baseline did.
        assert (level["newlyRight"], level["newlyWrong"]) == (0, 0)
        if level["interval"] != "insufficient_evidence":
            assert level["verdict"] == "no detectable difference"
    aa = report["aaCheck"]
    for depth in map(str, report["targetDepth"]):
        level = aa["levels"][depth]
        assert level["flips"] == 0 and level["splits"] == 20
        assert level["falsePositiveRate"] == level["falsePositives"] / 20
    assert aa["passed"] == all(level["passed"] for level in aa["levels"].values())
    assert "The A/A arm `aa-twin`" in status.report_markdown
    # The twin measures the instrument and is not a candidate: k5 is the only one, so no
    # Holm adjustment (the twin must not make the real comparisons more conservative).
    assert all("mcnemarPHolm" not in c["levels"]["3"] for c in report["comparisons"])


def test_an_aa_check_without_enough_records_is_not_read_as_passed(small_case: str) -> None:
    started = api.start_holdout_eval(
        small_case,
        [{"name": "baseline"}],
        api.HoldoutOptions(sample_size=30, seed=3, aa=True),
        wait=True,
    )
    report = api.get_holdout_eval(small_case, started.eval_id).report
    assert report["aaCheck"]["passed"] is False
    assert report["aaCheck"]["summary"].startswith("A/A check could not be read")
    assert report["warnings"][0]["code"] == "aa_check_failed"


def test_a_leakage_check_needs_a_grouped_evaluation(small_case: str) -> None:
    with pytest.raises(InputError, match="nothing to compare") as refused:
        api.start_holdout_eval(
            small_case,
            [{"name": "baseline"}],
            api.HoldoutOptions(grouping={"mode": "none"}, leakage_check=True),
            register_only=True,
        )
    assert refused.value.field == "leakageCheck"


def test_the_twin_name_is_reserved(small_case: str) -> None:
    with pytest.raises(InputError, match="reserved for the A/A arm"):
        api.start_holdout_eval(small_case, [{"name": "aa-twin"}], register_only=True)
