"""Live lift in Dagster (spec 004): the ingested logs as a daily-partitioned asset, the lift
report with its A/A gate check, a job that ingests one log file, a sensor on the inbox folder
and a daily schedule for the report."""

from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipelines import settings
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.claim_cost import failing_cost_claims
from eval_pipelines.core.lift.cost_report import plotted_cost
from eval_pipelines.core.lift.logs import SUFFIXES
from eval_pipelines.core.lift.report import report_markdown
from eval_pipelines.defs.dagster_private import RUN_KEY_TAG
from eval_pipelines.defs.families import QUIET_CONSOLE, AssetFamily, refusal, shown
from eval_pipelines.defs.holdout_tables import table_metadata
from eval_pipelines.defs.lift_tables import LIFT_CLAIMS_SCHEMA, LIFT_DAY_CELLS_SCHEMA
from eval_pipelines.defs.partitions import LIFT_DAYS, lift_days
from eval_pipelines.defs.pools import DUCKDB_POOL
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines.defs.run_tags import KIND_TAG
from eval_pipelines.stages import lift_ingest
from eval_pipelines.stages.lift_report import build_report
from eval_pipelines.storage import lift as lift_store
from eval_pipelines.storage.warehouse import transaction

GROUP = "live_lift"
HOW_TO_CREATE = (
    "Partitions are days, each added when a log with rows of that day is ingested: "
    "`eval-pipelines lift ingest FILE` (or `api.lift.ingest`), or a file dropped into the inbox "
    "the `lift_log_sensor` watches. The report reads every day."
)
FAMILY = AssetFamily(lift_days, GROUP, "lift", HOW_TO_CREATE)
LIFT_LOGS = dg.AssetKey("lift_logs")
AA_GATE = "aa_gate"
COST_GATE = "cost_gate"
SENSOR_INTERVAL_SECONDS = 30
FILES_PER_TICK = 20


def _day_metadata(summary: dict[str, Any]) -> dict[str, Any]:
    return shown(
        {
            "rows": summary["rows"],
            **{f"rows/{arm}": count for arm, count in summary["rows_by_arm"].items()},
            "censored": summary["censored"],
            "censored_share": summary["censored_share"],
            "epochs": ", ".join(summary["epochs"]) or "—",
            "workspaces": ", ".join(summary["workspaces"]) or "—",
        }
    )


@dg.asset(
    **FAMILY.options(
        "One day of ingested exposure/outcome logs: rows per arm, epochs and the censored "
        "share; materialising a day recounts its cells (workspace x claim type x situation "
        "class x arm x source, per epoch) from the stored rows."
    ),
    pool=DUCKDB_POOL,
    metadata=table_metadata("lift_day_cells", LIFT_DAY_CELLS_SCHEMA),
)
def lift_logs(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    day = date.fromisoformat(context.partition_key)
    with warehouse.connect(create=True) as conn, transaction(conn):
        lift_ingest.refresh_days(conn, [day])
        summary = lift_ingest.day_summary(conn, day)
    return dg.MaterializeResult(metadata=_day_metadata(summary))


@dg.asset(
    **FAMILY.options(
        "Every scope's live lift (treated against lever_holdout, per workspace, claim type and "
        "exposure epoch; never pooled), read only after its A/A check; the lift ledger updated "
        "(a changed baseline invalidates an open confirmation by name), the offline screening "
        "of the same candidate beside each claim. Markdown report; numbers plotted per claim.",
        partitioned=False,
    ),
    pool=DUCKDB_POOL,
    deps=[LIFT_LOGS],
    metadata=table_metadata("lift_claims", LIFT_CLAIMS_SCHEMA),
)
def lift_report(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    # The daily report may run before any log or case made the warehouse: lift's schema will do.
    with warehouse.connect(create=True) as conn:
        with transaction(conn):
            report, claims = build_report(conn)
            markdown = report_markdown(report)
            lift_store.save_report(conn, context.run_id, context.run_id, report, markdown)
        # Assignment reads the settings from this copy (never waiting on a writer); a
        # warehouse whose settings predate it gets one here.
        lift_store.publish_settings(conn, warehouse.warehouse_location())
    plotted: dict[str, Any] = {}
    for claim in claims:
        # Keyed by claim (workspace/claim type/epoch/candidate): a plot never pools scopes.
        if claim.estimate is not None:
            plotted[f"lift @ {claim.claim_id}"] = claim.estimate
        if claim.low is not None:
            plotted[f"lift_low @ {claim.claim_id}"] = claim.low
        plotted[f"n_treated @ {claim.claim_id}"] = claim.n_treated
    # Only claims whose cost was read, keyed by claim and currency (never mixed).
    plotted.update(plotted_cost(report["claims"]))
    return dg.MaterializeResult(
        metadata={
            "report": dg.MetadataValue.md(markdown),
            "claims": len(claims),
            "confirmed": sum(c.status == "confirmed" for c in claims),
            "parked": sum(c.status == "parked" for c in claims),
            **shown(plotted),
        }
    )


@dg.asset_check(asset=lift_report, name=AA_GATE, blocking=False)
def aa_gate(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    """Before any lift is read, its A/A check (K = 20 seeded halves of the control arm) must
    pass with a false-positive rate of at most 0.10, and the checks of the logs (sample ratio,
    assignment re-derived from the logged keys, cluster size, outcome audit) must pass; a scope
    that fails is parked (a claim settled unaudited whose audit failed since is named too)."""
    with warehouse.connect(read_only=True) as conn:
        claims = lift_store.claims(conn)
    # A claim settled unaudited whose outcome audit failed since is flagged too.
    parked = [
        c.claim_id
        for c in claims
        if c.status == "parked" or (c.lift.get("auditSinceSettled") or {}).get("state") == "failed"
    ]
    return dg.AssetCheckResult(
        passed=not parked,
        severity=dg.AssetCheckSeverity.ERROR,
        description=(
            f"parked (A/A or a check before reading failed): {', '.join(parked)}"
            if parked
            else "every A/A check and check before reading passed"
        ),
        metadata={"scopes": len(claims), "parked": len(parked)},
    )


@dg.asset_check(asset=lift_report, name=COST_GATE, blocking=False)
def cost_gate(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    """A claim's cost verdict under its declared decision intent: a claim that reads or settled
    `over_budget` (the treated arm's cost per task above its budget) or `ineligible` (its arms
    are not the same retained invocation over the whole execution envelope, or a row lacks its
    cost or an element) fails; an invalidated claim is history and is not gated."""
    with warehouse.connect(read_only=True) as conn:
        claims = lift_store.claims(conn)
    failing = failing_cost_claims(claims)
    return dg.AssetCheckResult(
        passed=not failing,
        severity=dg.AssetCheckSeverity.ERROR,
        description=(
            "; ".join(f"{claim_id}: {words}" for claim_id, words in failing.items())
            if failing
            else "no claim reads over_budget or ineligible"
        ),
        metadata={"claims": len(claims), "failing": len(failing)},
    )


# The metadata key of a refused ingest (a bad file, or requests stored with other content).
REFUSED = "refused"
# The metadata key of the ingest step's output: what it stored (``lift ingest`` prints it).
INGESTED = "ingested"


class IngestConfig(dg.Config):
    path: str
    # Set by the inbox sensor: the file may still be growing, so an unterminated last line
    # that is not JSON yet is left for the next tick instead of refusing the file.
    partial_tail: bool = False
    # Set by ``api.lift.ingest``, which validated the file before launching the run: the
    # digest of the bytes it validated. The same bytes are not validated again.
    validated_digest: str | None = None


@dg.op(pool=DUCKDB_POOL)
def ingest_lift_log(
    context: dg.OpExecutionContext, config: IngestConfig, warehouse: WarehouseResource
) -> dg.Output[dict[str, Any]]:
    """Validate one log file and store it whole (or refuse it, naming each bad line); each day
    it touches is reported as a materialisation of `lift_logs`."""
    try:
        read = lift_ingest.read_events(
            config.path,
            partial_tail=config.partial_tail,
            validated_digest=config.validated_digest,
        )
        # A lift-only set-up has no case, so maybe no warehouse yet: lift needs its schema.
        with warehouse.connect(create=True) as conn:
            ingested = lift_ingest.ingest_file(conn, config.path, read)
            summaries = {day: lift_ingest.day_summary(conn, day) for day in ingested.days}
    except InputError as error:
        raise refusal(error, {REFUSED: type(error).__name__}) from None
    context.log.info(
        f"{ingested.path}: {ingested.stored} requests stored, {ingested.skipped} already "
        f"stored with the same content (skipped), {ingested.resolved} resolved"
        + (
            f"; line {ingested.pending_line} is still being written: left for the next tick"
            if ingested.pending_line is not None
            else ""
        )
    )
    if summaries:  # adding a day the instance has is a no-op (Dagster skips known keys)
        context.instance.add_dynamic_partitions(LIFT_DAYS, [day.isoformat() for day in summaries])
    for day, summary in summaries.items():
        context.log_event(
            dg.AssetMaterialization(
                asset_key=LIFT_LOGS,
                partition=day.isoformat(),
                metadata={**_day_metadata(summary), "file": ingested.path},
            )
        )
    summary = ingested.to_json()
    # In the event log too: whoever launched the run reads it there, in any process.
    return dg.Output(summary, metadata={INGESTED: dg.MetadataValue.json(summary)})


# The kind tag on the job, so the inbox sensor's and the schedule's runs carry it as the CLI's
# do: without it a dead run of theirs was never failed by the dispatcher (runs/reaping.py).
@dg.job(
    description="Ingest one exposure/outcome log file (`lift ingest`, or the inbox sensor).",
    tags={KIND_TAG: "lift_ingest"},
)
def lift_ingest_job() -> None:
    ingest_lift_log()


lift_report_job = dg.define_asset_job(
    "lift_report_job",
    selection=dg.AssetSelection.assets(lift_report),
    config=QUIET_CONSOLE,
    description="The live-lift report, its ledger and its A/A gate check.",
    tags={KIND_TAG: "lift_report"},
)


# A file whose run failed without refusing it (a crash, a warehouse held too long) is tried
# again under a new run key, at most this many times while it does not change.
RETRIES = 3


def _refused(instance: dg.DagsterInstance, run_id: str) -> bool:
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        event = record.dagster_event
        data = event.step_failure_data if event is not None else None
        failure = data.user_failure_data if data is not None else None
        if failure is not None and REFUSED in failure.metadata:
            return True
    return False


def _attempt_key(context: dg.SensorEvaluationContext, key: str) -> str:
    """The run key to request for a file version: ``key``, unless every run under it failed
    without refusing the file; then the next ``key:retry-N`` (a run key is requested once, so
    without this a transient failure would leave the file never ingested)."""
    for attempt in range(RETRIES + 1):
        candidate = key if attempt == 0 else f"{key}:retry-{attempt}"
        runs = context.instance.get_runs(
            filters=dg.RunsFilter(tags={RUN_KEY_TAG: candidate}), limit=1
        )
        if (
            not runs
            or runs[0].status != dg.DagsterRunStatus.FAILURE
            or _refused(context.instance, runs[0].run_id)
        ):
            return candidate
    return candidate  # retries spent: the last attempt's key again, so nothing is requested


def inbox_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)


@dg.sensor(
    job_name="lift_ingest_job",
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="A log file dropped into the inbox ($EVAL_PIPELINES_LIFT_INBOX, default "
    "data/lift/inbox) is ingested at each new size (run key: its name, size and modification "
    "time); a request already stored is skipped, so a growing file stores each row once.",
)
def lift_log_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    files = inbox_files(settings.lift_inbox())
    if not files:
        return dg.SkipReason(f"no log file in {settings.lift_inbox()}")
    requests = []
    for path in files[:FILES_PER_TICK]:
        stat = path.stat()
        requests.append(
            dg.RunRequest(
                run_key=_attempt_key(
                    context, f"lift-log:{path.name}:{stat.st_size}:{stat.st_mtime_ns}"
                ),
                run_config={
                    "ops": {
                        "ingest_lift_log": {"config": {"path": str(path), "partial_tail": True}}
                    }
                },
                tags={"eval_pipelines/lift_file": path.name},
            )
        )
    return dg.SensorResult(run_requests=requests)


@dg.schedule(
    job=lift_report_job,
    cron_schedule="0 6 * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Daily: the live-lift report over every ingested day.",
)
def daily_lift_report(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    day = (
        context.scheduled_execution_time.strftime("%Y-%m-%d")
        if context.scheduled_execution_time
        else "now"
    )
    return dg.RunRequest(run_key=f"lift-report:{day}")


lift_assets = [lift_logs, lift_report]
lift_checks = [aa_gate, cost_gate]
