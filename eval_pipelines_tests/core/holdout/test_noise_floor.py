"""The A/A summary of a report: what a failed check may and may not claim."""

from __future__ import annotations

import numpy as np
import polars as pl

from eval_pipelines.core.holdout.noise_floor import aa_noise_floor
from eval_pipelines.core.holdout.spec import (
    AA_TWIN,
    ClassifyConfig,
    Grouping,
    HoldoutSpec,
    Variant,
)


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
    # difference and the check fails. A calibrated instrument also fails the rule in about
    # 7.5% of checks, so the summary must not say the instrument is noisier than its
    # intervals (the old wording); it says how often that happens and what to look at.
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
    assert "about 7.5% of checks" in summary and "a prompt to look, not proof" in summary


def test_an_approximate_retrieval_earns_typed_warnings_and_an_exact_one_none() -> None:
    from eval_pipelines.core.holdout.noise_floor import approximate_retrieval_warnings
    from eval_pipelines.core.holdout.warnings import ReportWarning

    approximate = {
        "backend": "pynndescent",
        "retrieval": "evidence",
        "purpose": ["evidence", "grouping"],
        "recallAtK": 0.9,
        "recallK": 10,
        "recallProbeQueries": 200,
    }
    warnings = approximate_retrieval_warnings([approximate, {**approximate, "backend": "exact"}])
    assert [type(w) for w in warnings] == [ReportWarning, ReportWarning]
    assert [w.code for w in warnings] == ["approximate_recall_low", "approximate_grouping"]
    assert "found 0.900 of the exact top-10 on 200 probe queries" in warnings[0].message
