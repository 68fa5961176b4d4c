"""The A/A summary of a report: what a failed check may and may not claim."""

from __future__ import annotations

import numpy as np
import polars as pl

from eval_pipelines.core.holdout.classify_config import ClassifyConfig
from eval_pipelines.core.holdout.grouping_settings import Grouping
from eval_pipelines.core.holdout.noise_floor import aa_noise_floor
from eval_pipelines.core.holdout.spec import HoldoutSpec
from eval_pipelines.core.holdout.variants import AA_TWIN, Variant
from eval_pipelines.core.stats.aa import CALIBRATED_FAILURE_RATES, MEASURED_FAILURE_RATES
from eval_pipelines_tests.helpers.paths import REPO


def _spec() -> HoldoutSpec:
    config = ClassifyConfig(target_depth=(3,))
    return HoldoutSpec(
        eval_id="c-e0001-s7",
        case_id="c",
        seed=7,
        sample_size=400,
        grouping=Grouping(),
        config=config,
        target_depth=(3,),
        variants=(
            Variant("baseline", (), config, "baseline"),
            Variant(AA_TWIN, (), config, "aa_twin"),
        ),
        records_version="r",
        tree_version="t",
        memo_version="empty",
        aa=True,
    )


def test_a_failed_aa_check_is_a_prompt_to_look_not_proof() -> None:
    # A twin that loses a fifth of the baseline's right records: every split reads a
    # difference and the check fails. A calibrated instrument also fails the rule in 7.5% of
    # checks by design and up to the measured figure on strongly clustered records
    # (CALIBRATED_FAILURE_RATES), so the summary must not say the instrument is noisier than
    # its intervals (the old wording); it says how often that happens and what to look at.
    keys = [f"r{i:03d}" for i in range(400)]
    right = np.arange(400) % 4 != 0
    twin = right.copy()
    twin[np.flatnonzero(right)[::5]] = False
    outcomes = {
        "baseline": pl.DataFrame({"record_key": keys, "right_3": right}),
        AA_TWIN: pl.DataFrame({"record_key": keys, "right_3": twin}),
    }
    report = aa_noise_floor(_spec(), outcomes, {k: i // 2 for i, k in enumerate(keys)})
    assert report["passed"] is False
    summary = report["summary"]
    assert summary.startswith("A/A check failed: the baseline against itself read a difference")
    assert "noisier than its intervals say" not in summary
    assert "in 7.5% of checks by design and in 7.1% to 8.5% measured" in summary
    assert "(up to 10% within their 95% intervals)" in summary
    assert "a prompt to look, not proof" in summary


def test_the_docs_quote_the_failure_rates_the_summary_quotes() -> None:
    # Issue 28 item 6: the docs said 7.5% to 9% (8.9% measured on one design of 1,000 checks)
    # while a trial's clustered records failed 9.6% [8.4, 11.0] of 2,000 checks.
    # docs/figures.md and the failed check's summary now quote the same figures, from
    # CALIBRATED_FAILURE_RATES and MEASURED_FAILURE_RATES, which the slow simulation in
    # test_stats_aa.py holds to what six designs measure.
    by_design, upper = CALIBRATED_FAILURE_RATES
    lowest, highest = MEASURED_FAILURE_RATES
    figures = " ".join((REPO / "docs" / "figures.md").read_text(encoding="utf-8").split())
    assert (
        f"fails this rule in {by_design:.1%} of reports by design and in {lowest:.1%} to "
        f"{highest:.1%} measured" in figures
    )
    assert f"(up to {upper:.0%} within their 95% intervals)" in figures
