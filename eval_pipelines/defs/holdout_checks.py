"""Asset checks of the holdout evaluation, recomputed from the stored rows.

``no_leakage`` blocks: a run whose retrieved evidence contains a sampled record, a record on
its leave-out list or a member of its group stops before classification. The others warn:
an ungrouped evaluation, rows short of candidates, failed rows, target levels with too few
records for an estimate.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import dagster as dg
import duckdb

from eval_pipelines.core.stats import MIN_N
from eval_pipelines.defs.holdout import eval_report, leave_out, variant_predictions, variant_scores
from eval_pipelines.defs.partitions import (
    holdout_evaluations,
    partitioned_asset_check,
    partitioned_checks,
)
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines.stages.holdout_checks import candidate_shortfall, leakage
from eval_pipelines.stages.holdout_spec import load_spec
from eval_pipelines.storage import holdout as holdout_store
from eval_pipelines.storage import holdout_evaluations as holdout_evaluations_store

NO_LEAKAGE = "no_leakage"
GROUPED = "grouped"
CANDIDATES_SUPPLIED = "candidates_supplied"
NO_FAILED_ROWS = "no_failed_rows"
SUFFICIENT_EVIDENCE = "sufficient_evidence"
LEAKAGE_GAP = "leakage_gap"
AA_NOISE_FLOOR = "aa_noise_floor"


# Checks are partitioned like their assets, so the UI shows each evaluation's own result
# (partitioned checks are a preview feature in Dagster 1.13, which is pinned exactly).
def _partition(context: dg.AssetCheckExecutionContext) -> str:
    return context.op_execution_context.partition_key


@partitioned_asset_check(
    asset=leave_out, name=NO_LEAKAGE, blocking=True, partitions_def=holdout_evaluations
)
def no_leakage(
    context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
) -> dg.AssetCheckResult:
    """No sampled record, nothing on its leave-out list and none of its group members is in its
    own retrieved evidence (group membership recomputed from the records)."""
    with warehouse.connect(read_only=True) as conn:
        counts = leakage(conn, _partition(context))
    metadata = {"on_leave_out_list": counts.on_leave_out_list}
    if counts.sharing_group_field is not None:
        metadata["sharing_group_field"] = counts.sharing_group_field
    if counts.near_duplicates is not None:
        metadata["near_duplicates_retrieved"] = counts.near_duplicates
    return dg.AssetCheckResult(
        passed=counts.total == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata=metadata,
        description=None
        if counts.total == 0
        else f"{counts.total} retrieved neighbours break the leave-out rule",
    )


@dataclass(frozen=True)
class _Verdict:
    """What a warning check found; the step adds which check and asset it belongs to."""

    passed: bool
    severity: dg.AssetCheckSeverity
    metadata: dict[str, Any]
    description: str | None = None


def _grouped(conn: duckdb.DuckDBPyConnection, eval_id: str) -> _Verdict:
    spec = load_spec(conn, eval_id)
    return _Verdict(
        passed=spec.grouping.mode != "none",
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"grouping": spec.grouping.mode},
        description=None
        if spec.grouping.mode != "none"
        else "ungrouped: read paired differences only, not absolute accuracy",
    )


def _candidates_supplied(conn: duckdb.DuckDBPyConnection, eval_id: str) -> _Verdict:
    short, requested = candidate_shortfall(conn, eval_id)
    return _Verdict(
        passed=short == 0,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"rows_short": short, "requested_candidates": requested},
    )


def _no_failed_rows(conn: duckdb.DuckDBPyConnection, eval_id: str) -> _Verdict:
    failed = holdout_store.failed_rows_by_variant(conn, eval_id)
    return _Verdict(
        passed=sum(failed.values()) == 0,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"failed_rows": dg.MetadataValue.json(failed)},
    )


def _sufficient_evidence(conn: duckdb.DuckDBPyConnection, eval_id: str) -> _Verdict:
    short = holdout_store.insufficient_target_levels(conn, eval_id)
    return _Verdict(
        passed=not short,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "minimum_n": MIN_N,
            "insufficient": dg.MetadataValue.json(
                [{"variant": v, "depth": d, "n": n} for v, d, n in short]
            ),
        },
    )


def _stored_report(conn: duckdb.DuckDBPyConnection, eval_id: str) -> dict[str, Any]:
    stored = holdout_evaluations_store.load_report(conn, eval_id)
    return stored.report if stored is not None else {}


def _not_requested(command: str, parameter: str) -> _Verdict:
    """A check whose measurement the evaluation did not ask for says so, with how to ask for
    it (the command, and the API's parameter); it never pretends to have measured."""
    return _Verdict(
        passed=True,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"not requested ({command}, or `{parameter}=True` in the Python API)",
        metadata={"requested": False},
    )


def _moved(depth: str, level: dict[str, Any]) -> str:
    """``grouping lowered L4 by 0.126 [0.084, 0.173] (...)`` from an ungrouped-minus-grouped
    gap."""
    gap, (low, high) = level["difference"], level["interval"]
    if gap > 0:
        return (
            f"grouping lowered L{depth} by {gap:.3f} [{low:.3f}, {high:.3f}] (an ungrouped "
            "holdout would overstate it)"
        )
    return (
        f"grouping raised L{depth} by {-gap:.3f} [{-high:.3f}, {-low:.3f}] (an ungrouped "
        "holdout would understate it)"
    )


def _leakage_gap(conn: duckdb.DuckDBPyConnection, eval_id: str) -> _Verdict:
    report = _stored_report(conn, eval_id)
    gap = report.get("leakageGap")
    if gap is None:
        return _not_requested("eval-pipelines eval holdout --leakage-check", "leakage_check")
    targets = [str(d) for d in report["targetDepth"]]
    moved = {
        d: gap["levels"][d] for d in targets if gap["levels"][d]["verdict"] in ("better", "worse")
    }
    metadata: dict[str, Any] = {"requested": True, "moved_levels": sorted(map(int, moved))}
    for depth in targets:
        level = gap["levels"][depth]
        if level["difference"] is not None:
            metadata[f"gap_L{depth}"] = round(level["difference"], 4)
    # A finding about an ungrouped holdout of this case, not a fault of this evaluation, which
    # is grouped (a leakage check needs one): it passes and says what grouping moved.
    return _Verdict(
        passed=True,
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(_moved(depth, level) for depth, level in moved.items())
        if moved
        else "grouping moved no target level beyond its interval",
        metadata=metadata,
    )


def _aa_noise_floor(conn: duckdb.DuckDBPyConnection, eval_id: str) -> _Verdict:
    aa = _stored_report(conn, eval_id).get("aaCheck")
    if aa is None:
        return _not_requested("eval-pipelines eval holdout --aa", "aa")
    metadata: dict[str, Any] = {"requested": True}
    for depth, level in aa["levels"].items():
        metadata[f"false_positive_rate_L{depth}"] = level["falsePositiveRate"]
        metadata[f"flip_rate_L{depth}"] = level["flipRate"]
    return _Verdict(
        passed=aa["passed"],
        severity=dg.AssetCheckSeverity.WARN,
        description=aa["summary"],
        metadata=metadata,
    )


@dataclass(frozen=True)
class _Warning:
    spec: dg.AssetCheckSpec
    evaluate: Callable[[duckdb.DuckDBPyConnection, str], _Verdict]


def _warning(
    name: str,
    asset: dg.AssetsDefinition,
    description: str,
    evaluate: Callable[[duckdb.DuckDBPyConnection, str], _Verdict],
) -> _Warning:
    with partitioned_checks():
        spec = dg.AssetCheckSpec(
            name, asset=asset, description=description, partitions_def=holdout_evaluations
        )
    return _Warning(spec, evaluate)


_WARNINGS = (
    _warning(
        GROUPED,
        leave_out,
        "The evaluation holds out near-duplicates or a group field, not only the record itself.",
        _grouped,
    ),
    _warning(
        CANDIDATES_SUPPLIED,
        leave_out,
        "Every sampled record got as many neighbours as the variants asked for.",
        _candidates_supplied,
    ),
    _warning(
        NO_FAILED_ROWS,
        variant_predictions,
        "No record failed to classify under any variant (failed rows count as wrong).",
        _no_failed_rows,
    ),
    _warning(
        SUFFICIENT_EVIDENCE,
        variant_scores,
        "Every target level of every variant was scored on enough records for an estimate.",
        _sufficient_evidence,
    ),
    _warning(
        LEAKAGE_GAP,
        eval_report,
        "With `--leakage-check`: how far grouping moved each target level's accuracy (the "
        "description names a level moved beyond its interval: an ungrouped holdout of this "
        "case would mislead). A finding, not a fault: this evaluation is grouped, so it passes.",
        _leakage_gap,
    ),
    _warning(
        AA_NOISE_FLOOR,
        eval_report,
        "With `--aa`: the baseline against its own twin on 20 seeded random halves reads a "
        "difference in at most 10% of the splits at every target level (the instrument's "
        "noise floor); a warning otherwise.",
        _aa_noise_floor,
    ),
)


# The warnings only read stored rows: one step evaluates them all after the report (a step
# each cost far more in Dagster's per-step work than the reading; docs/benchmarks.md).
@dg.multi_asset_check(name="holdout_warnings", specs=[w.spec for w in _WARNINGS], can_subset=True)
def holdout_warnings(
    context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
) -> Iterator[dg.AssetCheckResult]:
    """The warning checks of one evaluation, each one a verdict of its own in the UI."""
    selected = context.selected_asset_check_keys
    with warehouse.connect(read_only=True) as conn:
        for warning in _WARNINGS:
            if warning.spec.key in selected:
                verdict = warning.evaluate(conn, _partition(context))
                yield dg.AssetCheckResult(
                    asset_key=warning.spec.asset_key,
                    check_name=warning.spec.name,
                    passed=verdict.passed,
                    severity=verdict.severity,
                    metadata=verdict.metadata,
                    description=verdict.description,
                )


holdout_checks = [no_leakage, holdout_warnings]
