"""What starts gating runs: a sensor for every new workflow revision, and a nightly schedule
that re-runs each workflow's gating sets against its active revision."""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipelines import settings
from eval_pipelines.core.errors import InputError, NotFoundError
from eval_pipelines.core.workflows.files import scan_workflow_files
from eval_pipelines.defs.dagster_private import RUN_KEY_TAG, SENSOR_NAME_TAG
from eval_pipelines.defs.golden import FILE_TAG, SETS_TAG, WORKFLOW_TAG, golden_gate_job
from eval_pipelines.defs.partitions import WORKFLOW_REVISIONS, workflow_revisions
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines.stages.golden_classify import pin_workflow
from eval_pipelines.storage import golden as golden_store
from eval_pipelines.storage import workflows as workflows_store
from eval_pipelines.storage.warehouse import WarehouseBusy, WarehouseUnavailable, connect
from eval_pipelines.storage.warehouse import exists as warehouse_exists

SENSOR_INTERVAL_SECONDS = 15
# Bounds on one tick: how many stored revisions and files are looked at, and how many
# gating runs are requested (the rest wait for the next tick).
REVISIONS_PER_TICK = 50
FILES_PER_TICK = 100
RUNS_PER_TICK = 10
SENSOR_LOCK_WAIT_SECONDS = 2.0
INITIALISED = "initialised"  # the cursor before it tracked requested runs
# A gating run that fails to launch (never starts) is requested again under a new run key
# (``gate:REV:2``, ``gate:REV:3``), up to this many attempts in all.
LAUNCH_ATTEMPTS = 3
PENDING_KEPT = 200  # requested revisions whose run the cursor watches, newest kept


@dataclass(frozen=True)
class _Candidate:
    revision: str
    workflow: str
    workflow_file: str | None
    order: int  # newest first within a workflow


def _candidates(warehouse: WarehouseResource) -> list[_Candidate]:
    """Stored revisions (newest first), then committed files whose revision is not stored."""
    path = warehouse.warehouse_location()
    files = [
        (f.workflow, f.path)
        for f in scan_workflow_files(settings.workflows_dir(), limit=FILES_PER_TICK)
        if f.workflow is not None
    ]
    found: list[_Candidate] = []
    file_revisions: list[tuple[str, str, Path]] = []
    if warehouse_exists(path):
        with connect(path, read_only=True, wait_seconds=SENSOR_LOCK_WAIT_SECONDS) as conn:
            stored = workflows_store.newest_revisions(conn, REVISIONS_PER_TICK)
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


def run_key(revision: str, attempt: int) -> str:
    """``gate:REV`` for the first attempt, ``gate:REV:N`` for the N-th."""
    return f"gate:{revision}" if attempt == 1 else f"gate:{revision}:{attempt}"


def _pending(cursor: str | None) -> dict[str, dict[str, Any]]:
    """The revisions requested whose run has not been seen to start: ``{revision: {attempt,
    workflow, file}}`` (an older cursor, ``initialised``, has none)."""
    if cursor is None or cursor == INITIALISED:
        return {}
    try:
        state = json.loads(cursor)
    except ValueError:
        return {}
    pending = state.get("pending") if isinstance(state, dict) else None
    return pending if isinstance(pending, dict) else {}


def _cursor(pending: dict[str, dict[str, Any]]) -> str:
    kept = dict(list(pending.items())[-PENDING_KEPT:])
    return json.dumps({"pending": kept}, sort_keys=True)


def _launch_state(instance: dg.DagsterInstance, key: str) -> str:
    """``none`` (no run yet: the daemon creates a tick's runs after it), ``waiting`` (queued,
    not started), ``failed_to_launch`` (failed without ever starting) or ``started``."""
    records = instance.get_run_records(
        filters=dg.RunsFilter(tags={RUN_KEY_TAG: key, SENSOR_NAME_TAG: SENSOR_NAME}), limit=1
    )
    if not records:
        return "none"
    record = records[0]
    if record.start_time is not None:
        return "started"
    if record.dagster_run.status == dg.DagsterRunStatus.FAILURE:
        return "failed_to_launch"
    if record.dagster_run.status == dg.DagsterRunStatus.CANCELED:
        return "started"  # canceled by someone: not retried
    return "waiting"


SENSOR_NAME = "workflow_revision_sensor"


@dg.sensor(
    name=SENSOR_NAME,
    job=golden_gate_job,
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Each new workflow revision (saved with the CLI, or a changed file under "
    "data/workflows/) gets its partition and one gating run (run key gate:REVISION; one "
    "that fails to launch is requested again, up to 3 attempts). On its first tick only each "
    "workflow's newest revision is gated.",
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
    pending = _pending(context.cursor)
    retries = _retries(context, pending, limit=RUNS_PER_TICK)
    new = [
        c
        for c in candidates
        if not context.instance.has_dynamic_partition(WORKFLOW_REVISIONS, c.revision)
    ]
    if not new and not retries:
        if context.cursor is not None and _cursor(pending) != context.cursor:
            context.update_cursor(_cursor(pending))  # runs seen to start are forgotten
        return dg.SkipReason("no new workflow revision")
    if context.cursor is None:
        # First tick on an instance: gate each workflow's newest revision, register the rest.
        newest: dict[str, _Candidate] = {}
        for c in sorted(new, key=lambda c: c.order):
            newest.setdefault(c.workflow, c)
        to_run = list(newest.values())
    else:
        to_run = new
    to_run = to_run[: RUNS_PER_TICK - len(retries)]
    for c in to_run:
        context.log.info(
            f"gating workflow {c.workflow} revision {c.revision} "
            f"({c.workflow_file or 'saved in the warehouse'})"
        )
        pending[c.revision] = {"attempt": 1, "workflow": c.workflow, "file": c.workflow_file}
    register = [c.revision for c in new if c in to_run or context.cursor is None]
    requests = [(c.revision, 1, c.workflow, c.workflow_file) for c in to_run]
    for revision in retries:
        entry = pending[revision]
        requests.append((revision, entry["attempt"], entry["workflow"], entry["file"]))
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                partition_key=revision,
                run_key=run_key(revision, attempt),
                tags={WORKFLOW_TAG: workflow, **({FILE_TAG: file} if file else {})},
            )
            for revision, attempt, workflow, file in requests
        ],
        dynamic_partitions_requests=[workflow_revisions.build_add_request(register)]
        if register
        else [],
        cursor=_cursor(pending),
    )


def _retries(
    context: dg.SensorEvaluationContext, pending: dict[str, dict[str, Any]], *, limit: int
) -> list[str]:
    """Look at the runs of the revisions requested before (``pending`` is updated): one that
    started is forgotten; one that failed to launch is requested again under its next run key
    (the spent key would be skipped), until :data:`LAUNCH_ATTEMPTS`. Returns the revisions to
    request again (at most ``limit``; the rest are looked at on the next tick)."""
    retries: list[str] = []
    for revision, entry in list(pending.items()):
        if len(retries) >= limit:
            break
        attempt = int(entry.get("attempt", 1))
        state = _launch_state(context.instance, run_key(revision, attempt))
        if state == "started":
            del pending[revision]
        elif state == "failed_to_launch":
            if attempt >= LAUNCH_ATTEMPTS:
                context.log.warning(
                    f"the gating run of revision {revision} failed to launch {attempt} times; "
                    f"not requested again (run it with 'eval-pipelines golden run SET "
                    f"--revision {revision}')"
                )
                del pending[revision]
                continue
            context.log.info(
                f"the gating run of revision {revision} ({run_key(revision, attempt)}) failed "
                f"to launch; requesting it again ({run_key(revision, attempt + 1)})"
            )
            pending[revision] = {**entry, "attempt": attempt + 1}
            retries.append(revision)
    return retries


@dg.schedule(
    job=golden_gate_job,
    cron_schedule="0 2 * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Nightly: each workflow's gating sets against its active revision.",
)
def nightly_gating_runs(
    context: dg.ScheduleEvaluationContext, warehouse: WarehouseResource
) -> list[dg.RunRequest] | dg.SkipReason:
    path = warehouse.warehouse_location()
    if not warehouse_exists(path):
        return dg.SkipReason("no warehouse yet")
    try:
        with connect(path, read_only=True, wait_seconds=SENSOR_LOCK_WAIT_SECONDS) as conn:
            plans = []
            for name in workflows_store.workflow_names(conn):
                active = workflows_store.active_revision(conn, name)
                gating = [s.set_name for s in golden_store.list_sets(conn, name) if s.gate]
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
