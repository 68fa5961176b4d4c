"""One run model for every kind of evaluation: submit, execute here, read the state, notice
dead runs.

Every run is an ordinary Dagster run of the kind's job, recorded in the instance with the
origin of the code location the UI shows (``eval_pipelines``), so the UI lists it with its job
and partition, can re-execute it and terminate it. It starts one of two ways:

- submitted, the way ``dagster job launch`` does: with the QueuedRunCoordinator the run waits
  in the instance's queue; the daemon (``make dev``) starts it, or, when no daemon is running,
  the CLI's own dispatcher (:mod:`eval_pipelines.dispatcher`) does, with the same limits;
- executed in the process that creates it (:func:`create_inline_run`, :func:`execute_run_here`:
  the API's ``inline`` launch, and ``eval holdout --wait`` when no daemon runs and a run slot is
  free). This skips the dispatcher, its code server and the run's own process, each of which
  imports Dagster and the definitions again: about 6 s from submission to the run's start on
  2 cores, for a caller that waits anyway.

States (mapped once, here, from Dagster's run status): ``queued``, ``running``,
``succeeded``, ``failed``, ``canceled``.
"""

from __future__ import annotations

import fcntl
import gc
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagster import DagsterEventType, DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter

from eval_pipelines.defs.partitions import (
    HOLDOUT_EVALUATIONS,
    QUERY_EVALUATIONS,
    WORKFLOW_REVISIONS,
)

if TYPE_CHECKING:
    from dagster._core.workspace.context import WorkspaceProcessContext

LOCATION_NAME = "eval_pipelines"
DEFINITIONS_MODULE = "eval_pipelines.definitions"
DEFINITIONS_ATTRIBUTE = "defs"
# The name Dagster gives the one repository of a Definitions object.
SINGLE_REPOSITORY = "__repository__"
EVAL_TAG = "eval_pipelines/eval_id"
KIND_TAG = "eval_pipelines/kind"
LAUNCHED_BY_TAG = "eval_pipelines/launched_by"
PARTITION_TAG = "dagster/partition"


@dataclass(frozen=True)
class EvaluationKind:
    """How one kind of evaluation maps onto Dagster: its job and its dynamic partitions."""

    name: str
    job_name: str
    partitions: str


KINDS = {
    "holdout": EvaluationKind("holdout", "holdout_eval", HOLDOUT_EVALUATIONS),
    "golden": EvaluationKind("golden", "golden_gate", WORKFLOW_REVISIONS),
    "query": EvaluationKind("query", "evaluate_query_job", QUERY_EVALUATIONS),
}

STATES = {
    DagsterRunStatus.QUEUED: "queued",
    DagsterRunStatus.NOT_STARTED: "queued",
    DagsterRunStatus.STARTING: "running",
    DagsterRunStatus.STARTED: "running",
    DagsterRunStatus.CANCELING: "running",
    DagsterRunStatus.SUCCESS: "succeeded",
    DagsterRunStatus.FAILURE: "failed",
    DagsterRunStatus.CANCELED: "canceled",
}
FINISHED_STATES = ("succeeded", "failed", "canceled")
# Engine events that say a run's process died (the code server's and this module's wording).
# ("Process for run exited" is the normal end of every run, hence "unexpectedly exited".)
_CRASH_WORDS = ("unexpectedly exited", "terminated by signal", "killed or crashed")


@dataclass(frozen=True)
class RunState:
    """A run as the CLI and API report it."""

    run_id: str
    state: str
    dagster_status: str
    reason: str | None

    def to_json(self) -> dict[str, str | None]:
        return {
            "runId": self.run_id,
            "state": self.state,
            "dagsterStatus": self.dagster_status,
            "reason": self.reason,
        }

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


def prune_partitions(instance: DagsterInstance, kind: EvaluationKind, keep: set[str]) -> list[str]:
    """Delete the kind's partition keys that name no registered evaluation (added by hand in
    the UI); returns them."""
    stray = [key for key in instance.get_dynamic_partitions(kind.partitions) if key not in keep]
    for key in stray:
        instance.delete_dynamic_partition(kind.partitions, key)
    return stray


def kind_of(name: str) -> EvaluationKind:
    return KINDS[name]


def register_partition(instance: DagsterInstance, kind: EvaluationKind, eval_id: str) -> None:
    """Add the evaluation's key to its kind's dynamic partitions (idempotent)."""
    if not instance.has_dynamic_partition(kind.partitions, eval_id):
        instance.add_dynamic_partitions(kind.partitions, [eval_id])


@contextmanager
def workspace(instance: DagsterInstance) -> Iterator[WorkspaceProcessContext]:
    """The project's code location, loaded as the UI loads it (a code server process)."""
    from dagster._core.workspace.context import WorkspaceProcessContext

    with WorkspaceProcessContext(instance, _target(), code_server_log_level="WARNING") as context:
        yield context


def _target() -> Any:
    from dagster._core.workspace.load_target import ModuleTarget

    return ModuleTarget(
        module_name=DEFINITIONS_MODULE,
        attribute=None,
        working_directory=os.getcwd(),
        location_name=LOCATION_NAME,
    )


def _run_tags(
    job_tags: Any, kind: EvaluationKind, eval_id: str, extra_tags: dict[str, str]
) -> dict[str, str]:
    """The tags every run of an evaluation carries, however it is started."""
    return {
        **job_tags,
        PARTITION_TAG: eval_id,
        EVAL_TAG: eval_id,
        KIND_TAG: kind.name,
        LAUNCHED_BY_TAG: "eval-pipelines",
        **extra_tags,
    }


def _create_run(
    instance: DagsterInstance,
    location: Any,
    job_origin_of: Any,
    kind: EvaluationKind,
    eval_id: str,
    run_id: str | None,
    extra_tags: dict[str, str],
) -> DagsterRun:
    """Create (not start) a run of the kind's job for the partition, from a code location."""
    repository = next(iter(location.get_repositories().values()))
    remote_job = repository.get_full_job(kind.job_name)
    plan = location.get_execution_plan(
        remote_job, {}, step_keys_to_execute=None, known_state=None, instance=instance
    )
    return instance.create_run(
        job_name=remote_job.name,
        run_id=run_id,
        run_config={},
        resolved_op_selection=None,
        step_keys_to_execute=None,
        op_selection=None,
        status=None,
        root_run_id=None,
        parent_run_id=None,
        tags=_run_tags(remote_job.tags, kind, eval_id, extra_tags),
        job_snapshot=remote_job.job_snapshot,
        execution_plan_snapshot=plan.execution_plan_snapshot,
        parent_job_snapshot=remote_job.parent_job_snapshot,
        remote_job_origin=job_origin_of(repository, remote_job),
        job_code_origin=remote_job.get_python_origin(),
        asset_selection=None,
        asset_check_selection=None,
        asset_graph=repository.asset_graph,
    )


@contextmanager
def _start_lock(instance: DagsterInstance) -> Iterator[None]:
    """Hold the instance's start lock: deciding to execute a run here and recording it as
    starting is one step for every process, and so is putting a run in the queue.

    Without it two CLIs could both see a free run slot and both start a run, or a run
    submitted by one could be dequeued between another's look at the queue and its run
    record, and more runs than ``max_concurrent_runs`` would run at once. It is held while a
    run is recorded, a fraction of a second.
    """
    path = Path(instance.root_directory) / "eval_pipelines_start.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def submit(
    instance: DagsterInstance,
    kind: EvaluationKind,
    eval_id: str,
    *,
    run_id: str | None = None,
    tags: dict[str, str] | None = None,
) -> RunState:
    """Create a run of the kind's job for the evaluation's partition and submit it.

    The run carries its job origin (so the UI can re-execute and terminate it), the partition
    tag and the evaluation's tags. With the run queue, the run is only recorded as queued, so
    its snapshot is taken from the definitions loaded in this process while its origin names
    the code location the daemon and the dispatcher load (no code server is started here);
    without a daemon to dequeue it, the CLI's dispatcher is started. Without the queue, the run
    is launched at once through a code server, as ``dagster job launch`` does.
    """
    register_partition(instance, kind, eval_id)
    reap_dead_runs(instance)
    if uses_run_queue(instance):
        if not daemon_running(instance):
            ensure_dispatcher(instance)  # it boots while this process creates the run
        from dagster._core.remote_origin import InProcessCodeLocationOrigin

        served = _served_origin()
        local = InProcessCodeLocationOrigin(
            loadable_target_origin=served.loadable_target_origin, location_name=LOCATION_NAME
        )
        with local.create_location(instance) as location:
            run = _create_run(
                instance,
                location,
                lambda repository, remote_job: job_origin(remote_job.name, repository.name),
                kind,
                eval_id,
                run_id,
                tags or {},
            )
        with _start_lock(instance):
            # The queued-run coordinator records the run as queued and uses no workspace.
            submitted = instance.submit_run(run.run_id, None)  # type: ignore[arg-type]
        dispatch_if_needed(instance)  # in case a dispatcher was just leaving
        return _followed(instance, run_state(instance, submitted))
    with workspace(instance) as context:
        request = context.create_request_context()
        location = request.get_code_location(LOCATION_NAME)
        run = _create_run(
            instance,
            location,
            lambda _, remote_job: remote_job.get_remote_origin(),
            kind,
            eval_id,
            run_id,
            tags or {},
        )
        submitted = instance.submit_run(run.run_id, request)
    return _followed(instance, run_state(instance, submitted))


def _followed(instance: DagsterInstance, state: RunState) -> RunState:
    """A submitted run, its progress followed while this command lasts (a waiting one)."""
    from eval_pipelines.run_progress import follow

    follow(instance, state.run_id)
    return state


def _served_origin() -> Any:
    """The origin of the code location the daemon, the dispatcher and the UI serve."""
    return _target().create_origins()[0]


def job_origin(job_name: str, repository_name: str = SINGLE_REPOSITORY) -> Any:
    """The job's origin in the served code location.

    Parameters
    ----------
    job_name : str
        A job of the definitions.
    repository_name : str, optional
        The repository holding it; a ``Definitions`` object has one, ``__repository__``.

    Returns
    -------
    RemoteJobOrigin
        What a run records so the UI can re-execute and terminate it.
    """
    from dagster._core.remote_origin import RemoteJobOrigin, RemoteRepositoryOrigin

    return RemoteJobOrigin(RemoteRepositoryOrigin(_served_origin(), repository_name), job_name)


def _reconstructable_job(job_name: str) -> Any:
    """The job as a run process reconstructs it: module, attribute and working directory."""
    from dagster._core.definitions.reconstruct import ReconstructableRepository

    repository = ReconstructableRepository.for_module(
        DEFINITIONS_MODULE, DEFINITIONS_ATTRIBUTE, working_directory=os.getcwd()
    )
    return repository.get_reconstructable_job(job_name)


def run_slot_free(instance: DagsterInstance) -> bool:
    """Whether this process may start a run now without going around the run queue.

    Parameters
    ----------
    instance : DagsterInstance
        The instance whose queue and limits apply.

    Returns
    -------
    bool
        True when nothing dequeues runs in this process's place (no Dagster daemon), nothing
        waits in the queue (those runs come first) and fewer runs are active than
        ``max_concurrent_runs``; always True without a run queue (every run starts at once).
        False whenever tag concurrency limits are configured: only the queue enforces them.
    """
    from dagster._core.storage.dagster_run import ACTIVE_RUN_STATUSES

    if not uses_run_queue(instance):
        return True
    if daemon_running(instance) or queued_runs(instance):
        return False
    # As the queue's daemon reads them: the ``concurrency`` settings over the coordinator's.
    config = instance.get_concurrency_config().run_queue_config
    if config is None:
        return True
    if config.tag_concurrency_limits:
        return False
    limit = config.max_concurrent_runs
    active = instance.get_runs_count(filters=RunsFilter(statuses=ACTIVE_RUN_STATUSES))
    return limit == -1 or active < limit


def create_inline_run(
    instance: DagsterInstance,
    kind: EvaluationKind,
    eval_id: str,
    *,
    run_id: str | None = None,
    tags: dict[str, str] | None = None,
    only_if_slot_free: bool = False,
) -> DagsterRun | None:
    """Record a run of the kind's job for the partition, to be executed by this process.

    The run has the tags, origin and snapshots of a submitted run; it is created as
    ``STARTING`` with this process's pid in its event log, so a dispatcher counts it against
    ``max_concurrent_runs`` at once and :func:`reap_dead_runs` fails it should this process
    die before it ends. Execute it with :func:`execute_run_here`.

    Parameters
    ----------
    instance : DagsterInstance
        Where the run is recorded.
    kind : EvaluationKind
        Which job, which dynamic partitions (the key is registered if new).
    eval_id : str
        The partition key.
    run_id : str, optional
        The run's id (one written to the warehouse beforehand); a new one by default.
    tags : dict of str to str, optional
        Tags added to those every run of an evaluation carries.
    only_if_slot_free : bool, optional
        Record the run only when :func:`run_slot_free` says so; the look and the record are
        one step under the instance's start lock.

    Returns
    -------
    DagsterRun or None
        The run, or None when ``only_if_slot_free`` and no slot is free (submit it instead).
    """
    from dagster._core.events import EngineEventData

    from eval_pipelines.defs.families import QUIET_CONSOLE

    register_partition(instance, kind, eval_id)
    reap_dead_runs(instance)
    # Loading the definitions takes about a second: before the lock, not under it.
    job = _reconstructable_job(kind.job_name)
    definition = job.get_definition()
    with _start_lock(instance):
        if only_if_slot_free and not run_slot_free(instance):
            return None
        run = instance.create_run_for_job(
            definition,
            run_id=run_id,
            # The run's console would print every event on this process's terminal; the
            # event log the UI shows is complete whatever this level says.
            run_config=QUIET_CONSOLE,
            status=DagsterRunStatus.STARTING,
            tags=_run_tags(definition.tags, kind, eval_id, tags or {}),
            remote_job_origin=job_origin(kind.job_name),
            job_code_origin=job.get_python_origin(),
        )
    instance.report_engine_event(
        f"Executing the run in the process that created it (pid: {os.getpid()}).",
        run,
        EngineEventData.in_process(os.getpid()),
    )
    return run


class RunInterrupted(KeyboardInterrupt):
    """This process was interrupted (Ctrl-C, SIGTERM) while executing a run; the run was
    canceled. ``state`` is the run's state afterwards."""

    def __init__(self, state: RunState) -> None:
        super().__init__(f"run {state.run_id} {state.state}")
        self.state = state


# How often a run executing here looks whether the UI asked to terminate it.
TERMINATION_POLL_SECONDS = 1.0


class _TerminationWatcher:
    """Interrupt this process's execution of a run when someone asks to terminate it.

    The UI's Terminate button (and ``instance.run_launcher.terminate``) marks the run
    ``CANCELING`` and then asks the run's code server to stop it; a run executed here has no
    code server, so this thread polls the run's status and, once it reads canceling, sends
    this process SIGINT: what Dagster's run workers do on a termination request. Signals
    reach the main thread only, and Dagster turns them into a stop of the run there only:
    a run executed by another thread is not watched.
    """

    def __init__(self, instance: DagsterInstance, run_id: str) -> None:
        self._instance = instance
        self._run_id = run_id
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._interrupted_here = False
        self.terminated = False
        self._thread = threading.Thread(
            target=self._watch, name=f"termination-watcher-{run_id[:8]}", daemon=True
        )

    def __enter__(self) -> _TerminationWatcher:
        if threading.current_thread() is threading.main_thread():
            self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def interrupted_here(self) -> bool:
        """Record that this process was interrupted (it cancels the run itself); returns
        whether that was news, i.e. not the watcher's own interrupt."""
        with self._lock:
            news = not self.terminated and not self._interrupted_here
            self._interrupted_here = True
            return news

    def _watch(self) -> None:
        while not self._stop.wait(TERMINATION_POLL_SECONDS):
            run = self._instance.get_run_by_id(self._run_id)
            if run is None or run.status != DagsterRunStatus.CANCELING:
                continue
            with self._lock:
                if self._interrupted_here or self.terminated:
                    return
                self.terminated = True
            os.kill(os.getpid(), signal.SIGINT)
            return


def _mark_canceling(instance: DagsterInstance, run_id: str) -> None:
    run = instance.get_run_by_id(run_id)
    if run is not None and run.status in (DagsterRunStatus.STARTING, DagsterRunStatus.STARTED):
        instance.report_run_canceling(run, message="Interrupted (Ctrl-C) in eval-pipelines.")


def execute_run_here(
    instance: DagsterInstance,
    run: DagsterRun,
    *,
    on_event: Callable[[Any], None] | None = None,
) -> RunState:
    """Execute a run made by :func:`create_inline_run` in this process.

    Execution is Dagster's own (``execute_run_iterator``, the function a run worker calls):
    the run's events go to the instance's event log as they happen, and steps in a pool
    claim the instance's pool slots before they start, as in any run.

    Parameters
    ----------
    instance : DagsterInstance
        The instance the run is recorded in.
    run : DagsterRun
        A run made by :func:`create_inline_run`, not started yet.
    on_event : callable, optional
        Called with each event as it is written. An error it raises is re-raised once the
        run has ended, never in the middle of it.

    Returns
    -------
    RunState
        The run's state once it has ended; ``canceled`` when the UI asked to terminate it
        (there is no code server to ask: the run's status is watched instead).

    Raises
    ------
    RunInterrupted
        This process was interrupted (Ctrl-C, SIGTERM). The step the interrupt stopped is
        failed, and the run is marked canceling before Dagster decides how it ended, so it
        ends ``canceled``, not failed.
    """
    from dagster._core.events import DagsterEventType
    from dagster._core.execution.api import execute_run_iterator
    from dagster._core.execution.plan.objects import ErrorSource

    from eval_pipelines.run_progress import follow

    callback_error: Exception | None = None
    interrupted = False
    stop_progress = follow(instance, run.run_id)  # lines on stderr for a person waiting
    with _TerminationWatcher(instance, run.run_id) as watcher:
        try:
            # Python's full garbage collections walk every object in the process, Dagster's
            # and the definitions' included: about a second of a 200-record evaluation here.
            # Objects that exist before the run are left out of them while it executes, and
            # put back after.
            gc.freeze()
            for event in execute_run_iterator(_reconstructable_job(run.job_name), run, instance):
                failure = (
                    event.step_failure_data
                    if event.event_type == DagsterEventType.STEP_FAILURE
                    else None
                )
                if failure is not None and failure.error_source == ErrorSource.INTERRUPT:
                    # Dagster reads the run's status right after this event to decide between
                    # canceled and failed: say canceling first.
                    interrupted = watcher.interrupted_here() or interrupted
                    _mark_canceling(instance, run.run_id)
                if on_event is not None and callback_error is None:
                    try:
                        on_event(event)
                    except Exception as error:
                        callback_error = error
        except KeyboardInterrupt:
            # Outside Dagster's handling of interrupts: before the execution began or once it
            # had ended. A run that never started is canceled here.
            interrupted = watcher.interrupted_here() or interrupted
            unfinished = instance.get_run_by_id(run.run_id)
            if unfinished is not None and not unfinished.is_finished:
                instance.report_run_canceled(
                    unfinished, message="Interrupted (Ctrl-C) in eval-pipelines."
                )
        finally:
            gc.unfreeze()
            stop_progress()
    finished = instance.get_run_by_id(run.run_id)
    assert finished is not None
    state = run_state(instance, finished)
    if interrupted:
        raise RunInterrupted(state)
    if callback_error is not None:
        raise callback_error
    return state


def execute_inline(
    instance: DagsterInstance,
    kind: EvaluationKind,
    key: str,
    *,
    run_id: str | None = None,
    tags: dict[str, str] | None = None,
) -> tuple[str, bool]:
    """Run the kind's job for the partition in this process (tests, ``launch="inline"``),
    recorded as :func:`submit` records its runs; returns the run id and whether it
    succeeded."""
    run = create_inline_run(instance, kind, key, run_id=run_id, tags=tags)
    assert run is not None  # only a run waiting for a free slot is ever declined
    state = execute_run_here(instance, run)
    return state.run_id, state.state == "succeeded"


def execute_job(
    instance: DagsterInstance,
    job_name: str,
    *,
    partition_key: str | None = None,
    run_id: str | None = None,
    run_config: dict[str, Any] | None = None,
    tags: dict[str, str] | None = None,
) -> Any:
    """Run a job of the definitions in this process, recorded in ``instance`` like any run;
    returns Dagster's in-process result (never raises for a failed step)."""
    from dagster._core.utils import make_new_run_id

    from eval_pipelines.definitions import defs
    from eval_pipelines.run_progress import follow

    run_id = run_id or make_new_run_id()  # known before the run exists, to follow it
    stop_progress = follow(instance, run_id)
    try:
        return defs.resolve_job_def(job_name).execute_in_process(
            instance=instance,
            partition_key=partition_key,
            run_id=run_id,
            run_config=run_config,
            raise_on_error=False,
            tags=tags,
        )
    finally:
        stop_progress()


def uses_run_queue(instance: DagsterInstance) -> bool:
    from dagster._core.run_coordinator import QueuedRunCoordinator

    return isinstance(instance.run_coordinator, QueuedRunCoordinator)


# The daemon beats every 30 s; Dagster itself calls a daemon healthy for 30 minutes after its
# last beat, far too long to decide whether anyone will dequeue a run submitted now.
DAEMON_SILENCE_SECONDS = 75.0


def daemon_running(instance: DagsterInstance) -> bool:
    """Whether a Dagster daemon dequeued runs for this instance in the last 75 s."""
    beat = instance.get_daemon_heartbeats().get("QUEUED_RUN_COORDINATOR")
    return beat is not None and time.time() - beat.timestamp < DAEMON_SILENCE_SECONDS


def queued_runs(instance: DagsterInstance) -> int:
    """How many runs wait in the instance's queue."""
    return instance.get_runs_count(filters=RunsFilter(statuses=[DagsterRunStatus.QUEUED]))


def dispatch_if_needed(instance: DagsterInstance) -> None:
    """Make sure queued runs will start: without a daemon, start the dispatcher."""
    if uses_run_queue(instance) and not daemon_running(instance) and queued_runs(instance):
        ensure_dispatcher(instance)


def dispatcher_lock_path(instance: DagsterInstance) -> Path:
    return Path(instance.root_directory) / "eval_pipelines_dispatcher.lock"


_spawned: list[subprocess.Popen[bytes]] = []
# The dispatcher's log holds the output of the runs it starts (their code server writes there).
DISPATCHER_LOG_BYTES = 5_000_000


def ensure_dispatcher(instance: DagsterInstance) -> None:
    """Start the dispatcher in the background unless one is already running."""
    from eval_pipelines.dispatcher import dispatcher_alive

    # Collect dispatchers this process started that have exited (no zombies while waiting).
    _spawned[:] = [process for process in _spawned if process.poll() is None]
    if dispatcher_alive(dispatcher_lock_path(instance)):
        return
    log = Path(instance.root_directory) / "eval_pipelines_dispatcher.log"
    if log.exists() and log.stat().st_size > DISPATCHER_LOG_BYTES:
        log.replace(log.with_suffix(".log.1"))  # keep one previous log, never an endless one
    with open(log, "ab") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "eval_pipelines.dispatcher"],
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(os.environ, DAGSTER_HOME=str(instance.root_directory)),
            start_new_session=True,
        )
    _spawned.append(process)


def newest_run(instance: DagsterInstance, eval_id: str) -> DagsterRun | None:
    """The newest run of the evaluation's partition, whoever launched it (CLI, UI, dagster
    CLI, a re-execution)."""
    runs = instance.get_runs(filters=RunsFilter(tags={PARTITION_TAG: eval_id}), limit=1)
    return runs[0] if runs else None


def run_state(instance: DagsterInstance, run: DagsterRun) -> RunState:
    state = STATES.get(run.status, "running")
    reason = failure_reason(instance, run.run_id) if state in ("failed", "canceled") else None
    return RunState(run.run_id, state, run.status.value, reason)


def _deepest_message(error: object) -> str:
    cause = getattr(error, "cause", None)
    while cause is not None and getattr(cause, "cause", None) is not None:
        cause = cause.cause
    message = getattr(cause or error, "message", "") or ""
    return message.strip().splitlines()[-1] if message.strip() else ""


def failure_reason(instance: DagsterInstance, run_id: str) -> str | None:
    """One line saying why a run did not succeed: for a canceled run, that it was canceled;
    for a failed one, the failing step and its error, else how its process died."""
    records = instance.all_logs(
        run_id,
        of_type={
            DagsterEventType.STEP_FAILURE,
            DagsterEventType.RUN_FAILURE,
            DagsterEventType.RUN_CANCELED,
            DagsterEventType.ENGINE_EVENT,
        },
    )
    events = [(r.dagster_event, r.user_message) for r in records if r.dagster_event is not None]

    def text(event: object, user_message: str) -> str:
        message = (getattr(event, "message", None) or user_message or "").strip()
        return message.splitlines()[0] if message else ""

    for event, message in reversed(events):
        if event.event_type == DagsterEventType.RUN_CANCELED:
            return f"canceled: {text(event, message) or 'terminated'}"
    for event, _ in events:
        if event.event_type == DagsterEventType.STEP_FAILURE:
            data = event.step_failure_data
            error = _deepest_message(data.error) if data and data.error else "failed"
            return f"step {event.step_key} failed: {error}"
    crashes = [
        text(event, message)
        for event, message in events
        if event.event_type == DagsterEventType.ENGINE_EVENT
        and any(w in text(event, message) for w in _CRASH_WORDS)
    ]
    if crashes:
        # Dagster's own wording goes on to guess at memory; the first sentence is the fact.
        return crashes[-1].split(". ")[0].rstrip(".") + "."
    for event, message in reversed(events):
        if event.event_type == DagsterEventType.RUN_FAILURE and text(event, message):
            return text(event, message)
    return None


def ended_runs(instance: DagsterInstance, run_ids: list[str]) -> dict[str, str]:
    """Why each of these runs is over (``run_id -> reason``); runs that may still be live are
    left out. A run whose process is gone is failed first (:func:`reap_dead_runs`)."""
    reap_dead_runs(instance)
    ended: dict[str, str] = {}
    for run_id in run_ids:
        run = instance.get_run_by_id(run_id)
        if run is None:
            ended[run_id] = f"its Dagster run {run_id} no longer exists"
        elif run.is_finished:
            why = failure_reason(instance, run_id)
            ended[run_id] = f"its Dagster run {run_id} ended {run.status.value}" + (
                f": {why}" if why else ""
            )
    return ended


def _run_worker_pid(instance: DagsterInstance, run_id: str) -> int | None:
    """The pid of the process executing the run ("Started process for run (pid: N)")."""
    for record in instance.all_logs(run_id, of_type=DagsterEventType.ENGINE_EVENT):
        event = record.dagster_event
        data = event.engine_event_data if event is not None else None
        if data is not None and "pid" in data.metadata:
            try:
                return int(str(data.metadata["pid"].value))
            except ValueError:
                return None
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_dead_runs(instance: DagsterInstance) -> list[str]:
    """Fail runs of this project whose worker process is gone, and free the pool slots of
    finished runs; returns the runs it failed.

    With the daemon running, its run monitoring and the code server do this; without one (a
    CLI-only setup, or a killed code server) every submit and status call does it here. Only
    runs started by the default run launcher (local processes) are checked; a starting run
    is checked once its event log names its process (a run executed by the CLI that created
    it names it before it starts).
    """
    from dagster._core.launcher import DefaultRunLauncher

    failed: list[str] = []
    if isinstance(instance.run_launcher, DefaultRunLauncher):
        in_progress = instance.get_runs(
            filters=RunsFilter(
                statuses=[
                    DagsterRunStatus.STARTING,
                    DagsterRunStatus.STARTED,
                    DagsterRunStatus.CANCELING,
                ],
                tags={KIND_TAG: list(KINDS)},
            )
        )
        for run in in_progress:
            pid = _run_worker_pid(instance, run.run_id)
            if pid is not None and not _alive(pid):
                instance.report_engine_event(
                    f"Run worker process (pid {pid}) is gone: it was killed or crashed.", run
                )
                instance.report_run_failed(
                    run, f"Run worker process (pid {pid}) was killed or crashed."
                )
                failed.append(run.run_id)
    free_finished_run_slots(instance)
    return failed


def free_finished_run_slots(instance: DagsterInstance) -> None:
    """Release concurrency slots still held by runs that have finished (a killed step never
    frees its own)."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return
    holders = storage.get_concurrency_run_ids()
    if not holders:
        return
    for run in instance.get_runs(filters=RunsFilter(run_ids=list(holders))):
        if run.is_finished:
            storage.free_concurrency_slots_for_run(run.run_id)
