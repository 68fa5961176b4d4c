"""The holdout asset checks, run by Dagster on real materialisations: they pass on a sound
evaluation, and each one fails when what it guards is broken."""

from __future__ import annotations

from dataclasses import replace

import dagster as dg
import polars as pl
import pytest

from eval_pipelines import api
from eval_pipelines.core.holdout import grouping
from eval_pipelines.defs.holdout import holdout_assets, holdout_eval_job
from eval_pipelines.defs.holdout_checks import holdout_checks
from eval_pipelines.defs.io_managers import TransientPickleIOManager
from eval_pipelines.defs.resources import WarehouseResource

RESOURCES = {"warehouse": WarehouseResource(), "io_manager": TransientPickleIOManager()}


def _run(eval_id: str) -> dg.ExecuteInProcessResult:
    defs = dg.Definitions(
        assets=holdout_assets,
        asset_checks=holdout_checks,
        jobs=[holdout_eval_job],
        resources=RESOURCES,
    )
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions("holdout_evaluations", [eval_id])
    return defs.resolve_job_def("holdout_eval").execute_in_process(
        instance=instance, partition_key=eval_id, raise_on_error=False
    )


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {
        e.asset_check_evaluation_data.check_name: e.asset_check_evaluation_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }


def test_every_check_runs_and_passes_on_a_sound_grouped_evaluation(small_case: str) -> None:
    eval_id = api.start_holdout_eval(
        small_case,
        [{"name": "baseline"}],
        api.HoldoutOptions(sample_size=60, seed=3, group_field="group_key"),
        register_only=True,
    ).eval_id
    result = _run(eval_id)
    assert result.success
    checks = _checks(result)
    assert set(checks) == {
        "no_leakage",
        "grouped",
        "candidates_supplied",
        "no_failed_rows",
        "sufficient_evidence",
        "leakage_gap",
        "aa_noise_floor",
    }
    assert all(check.passed for check in checks.values())
    # Neither was requested: the checks say so rather than pretending to have measured.
    assert checks["leakage_gap"].metadata["requested"].value is False
    assert checks["aa_noise_floor"].metadata["requested"].value is False
    leakage = checks["no_leakage"].metadata
    assert leakage["on_leave_out_list"].value == 0
    assert leakage["sharing_group_field"].value == 0  # recomputed from the records


def test_a_leak_fails_the_blocking_check_and_stops_the_run(
    small_case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Simulate a retrieval bug: every sampled record retrieves itself as evidence."""
    real = grouping.leave_out_frames

    def leaky(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = real(*args, **kwargs)
        own = result.excluded.filter(pl.col("reason") == "self").select(
            "sample_key",
            pl.lit(0, dtype=pl.Int32).alias("rank"),
            pl.col("sample_key").alias("evidence_key"),
            pl.lit(1.0, dtype=pl.Float32).alias("similarity"),
            pl.lit("tfidf:exact").alias("retrieval"),
        )
        return replace(result, candidates=pl.concat([own, result.candidates]))

    monkeypatch.setattr(grouping, "leave_out_frames", leaky)
    eval_id = api.start_holdout_eval(
        small_case,
        [{"name": "baseline"}],
        api.HoldoutOptions(sample_size=30, seed=4),
        register_only=True,
    ).eval_id
    result = _run(eval_id)
    assert not result.success
    check = _checks(result)["no_leakage"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    assert check.metadata["on_leave_out_list"].value == 30
    assert check.metadata["near_duplicates_retrieved"].value == 30  # similarity 1.0 >= 0.98
    materialized = {e.asset_key.path[-1] for e in result.get_asset_materialization_events()}
    assert "leave_out" in materialized
    assert not materialized & {"variant_predictions", "variant_scores", "eval_report"}
    assert api.get_holdout_eval(small_case, eval_id).status == "failed"


def test_warning_checks_fail_without_failing_the_run(small_case: str) -> None:
    """Ungrouped, with a target level too few records reach: two warnings, a complete run."""
    eval_id = api.start_holdout_eval(
        small_case,
        [{"name": "baseline"}],
        api.HoldoutOptions(
            sample_size=10, seed=2, grouping={"mode": "none"}, config={"targetDepth": [3, 6]}
        ),
        register_only=True,
    ).eval_id
    result = _run(eval_id)
    assert result.success
    checks = _checks(result)
    assert not checks["grouped"].passed
    assert checks["grouped"].severity == dg.AssetCheckSeverity.WARN
    assert not checks["sufficient_evidence"].passed
    assert checks["no_leakage"].passed and checks["no_failed_rows"].passed
    report = api.get_holdout_eval(small_case, eval_id).report
    assert {"ungrouped", "insufficient_evidence"} <= {w["code"] for w in report["warnings"]}


def test_the_leakage_warning_says_which_way_grouping_moved_the_score() -> None:
    from eval_pipelines.defs.holdout_checks import _moved

    # Ungrouped minus grouped: positive means grouping lowered the score.
    assert _moved("4", {"difference": 0.1256, "interval": [0.0842, 0.1733]}) == (
        "grouping lowered L4 by 0.126 [0.084, 0.173] (an ungrouped holdout would overstate it)"
    )
    assert _moved("3", {"difference": -0.05, "interval": [-0.08, -0.02]}) == (
        "grouping raised L3 by 0.050 [0.020, 0.080] (an ungrouped holdout would understate it)"
    )
