"""What starts gating runs: a sensor for every new workflow revision, and a nightly schedule
that re-runs each workflow's gating sets against its active revision."""

from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from eval_pipelines import settings
from eval_pipelines.core.errors import InputError, NotFoundError
from eval_pipelines.core.workflows.files import scan_workflow_files
from eval_pipelines.defs.golden import FILE_TAG, SETS_TAG, WORKFLOW_TAG, golden_gate_job
from eval_pipelines.defs.partitions import WORKFLOW_REVISIONS, workflow_revisions
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines.stages.golden_classify import pin_workflow
from eval_pipelines.storage import golden, workflows
from eval_pipelines.storage.warehouse import WarehouseBusy, WarehouseUnavailable, connect

SENSOR_INTERVAL_SECONDS = 15
# Bounds on one tick: how many stored revisions and files are looked at, and how many
# gating runs are requested (the rest wait for the next tick).
REVISIONS_PER_TICK = 50
FILES_PER_TICK = 100
RUNS_PER_TICK = 10
SENSOR_LOCK_WAIT_SECONDS = 2.0
INITIALISED = "initialised"


@dataclass(frozen=True)
class _Candidate:
    revision: str
    workflow: str
    workflow_file: str | None
    order: int  # newest first within a workflow


def _candidates(warehouse: WarehouseResource) -> list[_Candidate]:
    """Stored revisions (newest first), then committed files whose revision is not stored."""
    path = warehouse.warehouse_path()
    files = [
        (f.workflow, f.path)
        for f in scan_workflow_files(settings.workflows_dir(), limit=FILES_PER_TICK)
        if f.workflow is not None
    ]
    found: list[_Candidate] = []
    file_revisions: list[tuple[str, str, Path]] = []
    if path.exists():
        with connect(path, read_only=True, wait_seconds=SENSOR_LOCK_WAIT_SECONDS) as conn:
            stored = workflows.newest_revisions(conn, REVISIONS_PER_TICK)
            for workflow, file in files:
                try:
                    pinned = pin_workflow(conn, workflow)
                except (InputError, NotFoundError):
                    continue  # a classify workflow over a case not loaded yet
                file_revisions.append((pinned.revision, pinned.name, file))
        found = [_Candidate(r.revision, r.workflow, None, 1 + i) for i, r in enumerate(stored)]
    else:
        file_revisions = [(w.revision, w.name, f) for w, f in files if w.kind == "extract"]
    known = {c.revision for c in found}
    for revision, name, file in file_revisions:
        if revision not in known:
            found.append(_Candidate(revision, name, str(file), 0))
    return found


@dg.sensor(
    job=golden_gate_job,
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Each new workflow revision (saved with the CLI, or a changed file under "
    "data/workflows/) gets its partition and exactly one gating run (run key gate:REVISION). "
    "On its first tick only each workflow's newest revision is gated.",
)
def workflow_revision_sensor(
    context: dg.SensorEvaluationContext, warehouse: WarehouseResource
) -> dg.SensorResult | dg.SkipReason:
    try:
        candidates = _candidates(warehouse)
    except WarehouseBusy:
        return dg.SkipReason("the warehouse is busy (another process holds its lock); next tick")
    except WarehouseUnavailable as error:
        return dg.SkipReason(str(error))
    new = [
        c
        for c in candidates
        if not context.instance.has_dynamic_partition(WORKFLOW_REVISIONS, c.revision)
    ]
    if not new:
        return dg.SkipReason("no new workflow revision")
    if context.cursor is None:
        # First tick on an instance: gate each workflow's newest revision, register the rest.
        newest: dict[str, _Candidate] = {}
        for c in sorted(new, key=lambda c: c.order):
            newest.setdefault(c.workflow, c)
        to_run = list(newest.values())
    else:
        to_run = new
    to_run = to_run[:RUNS_PER_TICK]
    for c in to_run:
        context.log.info(
            f"gating workflow {c.workflow} revision {c.revision} "
            f"({c.workflow_file or 'saved in the warehouse'})"
        )
    register = [c.revision for c in new if c in to_run or context.cursor is None]
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                partition_key=c.revision,
                run_key=f"gate:{c.revision}",
                tags={
                    WORKFLOW_TAG: c.workflow,
                    **({FILE_TAG: c.workflow_file} if c.workflow_file else {}),
                },
            )
            for c in to_run
        ],
        dynamic_partitions_requests=[workflow_revisions.build_add_request(register)],
        cursor=INITIALISED,
    )


@dg.schedule(
    job=golden_gate_job,
    cron_schedule="0 2 * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Nightly: each workflow's gating sets against its active revision.",
)
def nightly_gating_runs(
    context: dg.ScheduleEvaluationContext, warehouse: WarehouseResource
) -> list[dg.RunRequest] | dg.SkipReason:
    path = warehouse.warehouse_path()
    if not path.exists():
        return dg.SkipReason("no warehouse yet")
    try:
        with connect(path, read_only=True, wait_seconds=SENSOR_LOCK_WAIT_SECONDS) as conn:
            plans = []
            for name in workflows.workflow_names(conn):
                active = workflows.active_revision(conn, name)
                gating = [s.set_name for s in golden.list_sets(conn, name) if s.gate]
                if active is not None and gating:
                    plans.append((active.revision, name, gating))
    except WarehouseBusy:
        return dg.SkipReason("the warehouse is busy; tomorrow's run will cover it")
    day = (
        context.scheduled_execution_time.strftime("%Y-%m-%d")
        if context.scheduled_execution_time
        else "now"
    )
    requests = [
        dg.RunRequest(
            partition_key=revision,
            run_key=f"nightly:{revision}:{day}",
            tags={SETS_TAG: ",".join(sets), WORKFLOW_TAG: name},
        )
        for revision, name, sets in plans
        if context.instance.has_dynamic_partition(WORKFLOW_REVISIONS, revision)
    ]
    return requests or dg.SkipReason("no active revision has a gating set")
