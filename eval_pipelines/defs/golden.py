"""Golden-set assets, partitioned by workflow revision.

``workflow_revision -> golden_run -> golden_report`` (+ the ``activation_gate`` check, which
fails with severity ERROR when the gate blocks, without failing the run). A partition is one
revision: the sensor adds it when a revision lands (saved with the CLI, or a changed file
under ``data/workflows/``) and requests the gating run once.
"""

from collections.abc import Callable
from typing import Any

import dagster as dg

from eval_pipelines.core.golden.gate import Gate, gate_summary
from eval_pipelines.core.golden.report import report_markdown, report_metadata
from eval_pipelines.core.stats import is_sufficient
from eval_pipelines.defs.families import REFUSALS, AssetFamily, refusal
from eval_pipelines.defs.golden_tables import GOLDEN_RUNS_SCHEMA, WORKFLOW_REVISIONS_SCHEMA
from eval_pipelines.defs.holdout_tables import table_metadata
from eval_pipelines.defs.partitions import partitioned_asset_check, workflow_revisions
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines.defs.run_tags import KIND_TAG
from eval_pipelines.defs.step_success import stored_by_a_succeeded_step
from eval_pipelines.stages import golden
from eval_pipelines.storage.workflows import revision_row

SETS_TAG = "eval_pipelines/golden_sets"
GATE_DECISION_KEY = "gate_decision"  # golden_report's metadata: the decision, for the check
GATE_SUMMARY_KEY = "gate_summary"
FILE_TAG = "eval_pipelines/workflow_file"
WORKFLOW_TAG = "eval_pipelines/workflow"
HOW_TO_CREATE = (
    "Partitions are workflow revisions (content hashes). `eval-pipelines workflow save NAME "
    "--file FILE`, or a changed file under `data/workflows/`, creates one; the "
    "`workflow_revision_sensor` adds its partition and requests the gating run once."
)


FAMILY = AssetFamily(workflow_revisions, "golden", "golden", HOW_TO_CREATE)


@dg.asset(
    **FAMILY.options("The workflow revision: its nodes, field schemas and where it came from."),
    metadata=table_metadata("workflow_revisions", WORKFLOW_REVISIONS_SCHEMA),
)
def workflow_revision(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    try:
        workflow, saved = golden.ensure_revision(
            warehouse.connect, context.partition_key, context.run.tags.get(FILE_TAG)
        )
        with warehouse.connect(read_only=True) as conn:
            row = revision_row(conn, workflow.revision)
    except REFUSALS as error:
        raise refusal(error) from None
    return dg.MaterializeResult(
        metadata={
            "workflow": workflow.name,
            "kind": workflow.kind,
            "source": row.source,
            "saved_by": row.saved_by or "",
            "saved_at": row.saved_at.isoformat(timespec="seconds"),
            "nodes": dg.MetadataValue.json(
                [
                    {"id": n.id, "type": n.type, "fields": len(n.schema.fields)}
                    for n in workflow.nodes
                ]
            ),
            "saved_by_this_run": saved,
        }
    )


@dg.asset(
    **FAMILY.options(
        "Every enabled case of the workflow's golden sets run as a test run against this "
        "revision (four at a time; unchanged steps served from the cache), one golden run "
        "per set. Rows in `golden_runs` and `golden_results`."
    ),
    deps=[workflow_revision],
    metadata=table_metadata("golden_runs", GOLDEN_RUNS_SCHEMA),
)
def golden_run(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    chosen = context.run.tags.get(SETS_TAG)
    outcomes = golden.run_golden_sets(
        warehouse.connect,
        context.partition_key,
        set_names=chosen.split(",") if chosen else None,
        dagster_run_id=context.run_id,
        log=context.log.info,
        index_dir=warehouse.index_dir_path(),
        threads=warehouse.thread_count(),
        warehouse_path=warehouse.warehouse_location(),
    )
    # What this Dagster run charged: a document two sets share ran once (each set's own
    # golden run reports the steps of its own documents).
    documents, charged = golden.total_charge(outcomes)
    return dg.MaterializeResult(
        metadata={
            "golden_runs": dg.MetadataValue.json({o.set_name: o.golden_run_id for o in outcomes}),
            "cases": sum(o.cases for o in outcomes),
            "documents": documents,
            "executed_steps": charged.executed_steps,
            "cached_steps": charged.cached_steps,
            "cost_units": charged.cost_units,
            **usage_metadata(charged.usage),
            "skipped_cases": sum(o.skipped for o in outcomes),
        }
    )


def golden_run_step_succeeded(instance: dg.DagsterInstance) -> Callable[[str | None], bool]:
    """Whether the ``golden_run`` step of a Dagster run (given its id) succeeded: a golden run
    counts only then (``gate_decision``'s ``step_succeeded``). The step stores its golden runs
    as completed before it ends, so an interrupt in between (Terminate, Ctrl-C) leaves
    completed runs of a canceled step."""
    step = golden_run.op.name
    return lambda run_id: stored_by_a_succeeded_step(instance, run_id, step)


def usage_metadata(usage: Any) -> dict[str, Any]:
    """The model calls of a run's metered steps (``chat`` nodes), when it had any."""
    if usage is None:
        return {}
    return {
        "model_calls": usage.calls,
        "model_calls_from_cache": usage.from_cache,
        "model_calls_failed": usage.failed,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        # No number when the price table has no price for the model: the note says so.
        **(
            {"model_cost": usage.cost}
            if usage.cost is not None
            else {"model_cost_note": usage.cost_note or "cost unknown"}
        ),
    }


@dg.asset(
    **FAMILY.options(
        "Field accuracy, document pass rate, per-field breakdown and stale labels of each "
        "golden run this Dagster run made, and the activation gate's decision for the "
        "revision (taken here, once per run; the `activation_gate` check shows it)."
    ),
    deps=[golden_run],
)
def golden_report(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    with warehouse.connect(read_only=True) as conn:
        scored = [
            golden.score_run(conn, run.golden_run_id)
            for run in golden.runs_for_dagster_run(conn, context.run_id, context.partition_key)
        ]
        gate = golden.gate_decision(
            conn,
            context.partition_key,
            step_succeeded=golden_run_step_succeeded(context.instance),
        )
    summary = gate_summary(gate)
    # The run page says why: a blocked revision is a successful run whose check failed.
    (context.log.info if gate.passed else context.log.warning)(f"{summary} ({gate.reason})")
    return dg.MaterializeResult(
        metadata={
            "report": dg.MetadataValue.md(report_markdown(scored, gate)),
            "gate": "passed" if gate.passed else "blocked",
            GATE_SUMMARY_KEY: summary,
            GATE_DECISION_KEY: dg.MetadataValue.json(gate.to_json()),
            **report_metadata(scored),
        }
    )


def stored_gate_decision(
    instance: dg.DagsterInstance, run_id: str, revision: str
) -> tuple[Gate, str] | None:
    """The gate decision (and its one-line summary) the ``golden_report`` of Dagster run
    ``run_id`` took for ``revision``; None when that run did not materialise it."""
    found = None
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
        materialization = entry.asset_materialization
        if (
            materialization is not None
            and materialization.asset_key == golden_report.key
            and materialization.partition == revision
            and GATE_DECISION_KEY in materialization.metadata
        ):
            metadata = materialization.metadata
            summary = metadata.get(GATE_SUMMARY_KEY)
            gate = Gate.from_json(metadata[GATE_DECISION_KEY].value)  # type: ignore[arg-type]
            found = (gate, str(summary.value) if summary is not None else gate_summary(gate))
    return found


# Partitioned, so the UI shows each revision's own verdict (a preview feature in Dagster
# 1.13, pinned exactly; the rule itself lives in `core.golden.gate.decide_gate`). Not
# blocking: a revision the gate correctly blocks is a successful run whose ERROR check
# failed and says why (a blocking check failed the whole run with a raw
# DagsterAssetCheckFailedError). Activation reads the gate itself, never the run's state.
@partitioned_asset_check(
    asset=golden_report,
    name="activation_gate",
    blocking=False,
    partitions_def=workflow_revisions,
)
def activation_gate(
    context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
) -> dg.AssetCheckResult:
    """Every set marked as a gate has a completed run against exactly this revision that
    reached its threshold and did not mix revisions (the rule `workflow activate` applies).
    Reads the decision this run's `golden_report` took; decides only when the check runs
    without it."""
    revision = context.op_execution_context.partition_key
    stored = stored_gate_decision(context.instance, context.op_execution_context.run_id, revision)
    if stored is None:
        with warehouse.connect(read_only=True) as conn:
            gate = golden.gate_decision(
                conn, revision, step_succeeded=golden_run_step_succeeded(context.instance)
            )
        summary = gate_summary(gate)
    else:
        gate, summary = stored
    metadata: dict[str, Any] = {
        "summary": summary,
        "reason": gate.reason,
        "workflow": gate.workflow,
        "revision": gate.revision,
        "sets": dg.MetadataValue.json([s.to_json() for s in gate.sets]),
    }
    # Plotted across revisions; no point where a set was not run, nor an estimate from fewer
    # than 20 values (the counts are in `sets`).
    for verdict in gate.sets:
        metadata[f"{verdict.set_name}/threshold"] = verdict.threshold
        if (
            verdict.field_accuracy is not None
            and verdict.field_scored is not None
            and is_sufficient(verdict.field_scored)
        ):
            metadata[f"{verdict.set_name}/field_accuracy"] = round(verdict.field_accuracy, 4)
    return dg.AssetCheckResult(
        passed=gate.passed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{summary} — {gate.reason}",
        metadata=metadata,
    )


golden_assets = [workflow_revision, golden_run, golden_report]
golden_checks = [activation_gate]

golden_gate_job = dg.define_asset_job(
    "golden_gate",
    selection=dg.AssetSelection.assets(*golden_assets),
    tags={KIND_TAG: "golden"},
    description="Run the workflow's golden sets against one revision, report, and decide the "
    "activation gate (check `activation_gate`: fails, severity ERROR, when the gate blocks).",
)
