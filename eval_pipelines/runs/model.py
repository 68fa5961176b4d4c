"""One run model for every kind of run: launch, wait, read the state, notice dead runs.

Every run is an ordinary Dagster run of the kind's job, created from the job the code location
``eval_pipelines`` serves (its origin and its snapshot), so the UI lists it with its job and
partition, re-executes it as the same job and terminates it. :func:`launch` starts every run
of every kind (holdout, golden, query, lift ingest, lift report), one of two ways:

- ``wait=False``: submitted, the way ``dagster job launch`` does: with the QueuedRunCoordinator
  the run waits in the instance's queue; the daemon (``make dev``) starts it, or, when no
  daemon is running, the CLI's own dispatcher (:mod:`eval_pipelines.dispatcher`) does, with
  the same limits;
- ``wait=True``: executed in the calling process when the queue would start it now (no daemon
  dequeues, nothing waits in the queue, a run slot is free), else submitted and waited for
  (:func:`wait`). Executing here skips the dispatcher, its code server and the run's own
  process, each of which imports Dagster and the definitions again (about 6 s from
  submission to the run's start on 2 cores, for a caller that waits anyway), and a
  ``breakpoint()`` in a stage stops the command that waits.

States (mapped once, here, from Dagster's run status): ``queued``, ``running``,
``succeeded``, ``failed``, ``canceled``.
"""

from __future__ import annotations

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
from typing import Any

from dagster import (
    DagsterEventType,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    DefaultRunLauncher,
    QueuedRunCoordinator,
    RunsFilter,
)

from eval_pipelines.core.errors import InputError
from eval_pipelines.defs.families import QUIET_CONSOLE
from eval_pipelines.defs.partitions import (
    CASES,
    HOLDOUT_EVALUATIONS,
    QUERY_EVALUATIONS,
    WORKFLOW_REVISIONS,
)
from eval_pipelines.instance import dagster_instance
from eval_pipelines.run_progress import follow
from eval_pipelines.runs.dagster_private import (
    ACTIVE_RUN_STATUSES,
    EngineEventData,
    ErrorSource,
    InProcessCodeLocationOrigin,
    ModuleTarget,
    ReconstructableRepository,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
    WorkspaceProcessContext,
    execute_run_iterator,
)
from eval_pipelines.runs.locks import dispatcher_alive, start_lock
from eval_pipelines.runs.tags import (
    DEFINITIONS_ATTRIBUTE,
    DEFINITIONS_MODULE,
    EVAL_TAG,
    KIND_TAG,
    LAUNCHED_BY_TAG,
    LOCATION_NAME,
    PARTITION_TAG,
    SINGLE_REPOSITORY,
)


@dataclass(frozen=True)
class EvaluationKind:
    """How one kind of run maps onto Dagster: its job and its dynamic partitions (none for
    the lift jobs: a lift ingest is one file, a lift report covers every day)."""

    name: str
    job_name: str
    partitions: str | None


KINDS = {
    "holdout": EvaluationKind("holdout", "holdout_eval", HOLDOUT_EVALUATIONS),
    "golden": EvaluationKind("golden", "golden_gate", WORKFLOW_REVISIONS),
    "query": EvaluationKind("query", "evaluate_query_job", QUERY_EVALUATIONS),
    "lift_ingest": EvaluationKind("lift_ingest", "lift_ingest_job", None),
    "lift_report": EvaluationKind("lift_report", "lift_report_job", None),
    # Not an evaluation: the ANN index of a case's embeddings, built by `case embed`.
    "embedding_index": EvaluationKind("embedding_index", "embedding_index", CASES),
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
    if kind.partitions is None:
        return []
    stray = [key for key in instance.get_dynamic_partitions(kind.partitions) if key not in keep]
    for key in stray:
        instance.delete_dynamic_partition(kind.partitions, key)
    return stray


def kind_of(name: str) -> EvaluationKind:
    return KINDS[name]


def register_partition(
    instance: DagsterInstance, kind: EvaluationKind, eval_id: str | None
) -> None:
    """Add the evaluation's key to its kind's dynamic partitions (idempotent)."""
    if kind.partitions is None or eval_id is None:
        return
    if not instance.has_dynamic_partition(kind.partitions, eval_id):
        instance.add_dynamic_partitions(kind.partitions, [eval_id])


@contextmanager
def workspace(instance: DagsterInstance) -> Iterator[WorkspaceProcessContext]:
    """The project's code location, loaded as the UI loads it (a code server process)."""
    with WorkspaceProcessContext(instance, _target(), code_server_log_level="WARNING") as context:
        yield context


def _target() -> Any:
    return ModuleTarget(
        module_name=DEFINITIONS_MODULE,
        attribute=None,
        working_directory=os.getcwd(),
        location_name=LOCATION_NAME,
    )


def _run_tags(
    job_tags: Any, kind: EvaluationKind, eval_id: str | None, extra_tags: dict[str, str]
) -> dict[str, str]:
    """The tags every run carries, however it is started (a partition's when it has one)."""
    keyed = {PARTITION_TAG: eval_id, EVAL_TAG: eval_id} if eval_id is not None else {}
    return {
        **job_tags,
        **keyed,
        KIND_TAG: kind.name,
        LAUNCHED_BY_TAG: "eval-pipelines",
        **extra_tags,
    }


def _create_run(
    instance: DagsterInstance,
    location: Any,
    job_origin_of: Any,
    kind: EvaluationKind,
    eval_id: str | None,
    run_id: str | None,
    extra_tags: dict[str, str],
    run_config: dict[str, Any],
    status: DagsterRunStatus | None = None,
) -> DagsterRun:
    """Create (not start) a run of the kind's job for the partition, from a code location:
    the job, its snapshot and its execution plan are the ones the location serves."""
    repository = next(iter(location.get_repositories().values()))
    remote_job = repository.get_full_job(kind.job_name)
    plan = location.get_execution_plan(
        remote_job, run_config, step_keys_to_execute=None, known_state=None, instance=instance
    )
    return instance.create_run(
        job_name=remote_job.name,
        run_id=run_id,
        run_config=run_config,
        resolved_op_selection=None,
        step_keys_to_execute=None,
        op_selection=None,
        status=status,
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


def submit(
    instance: DagsterInstance,
    kind: EvaluationKind,
    eval_id: str | None,
    *,
    run_id: str | None = None,
    tags: dict[str, str] | None = None,
    run_config: dict[str, Any] | None = None,
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
        with _served_location(instance) as location:
            run = _create_run(
                instance,
                location,
                _served_job_origin,
                kind,
                eval_id,
                run_id,
                tags or {},
                run_config or {},
            )
        with start_lock(instance.root_directory):
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
            run_config or {},
        )
        submitted = instance.submit_run(run.run_id, request)
    return _followed(instance, run_state(instance, submitted))


def _followed(instance: DagsterInstance, state: RunState) -> RunState:
    """A submitted run, its progress followed while this command lasts (a waiting one)."""
    follow(instance, state.run_id)
    return state


@contextmanager
def _served_location(instance: DagsterInstance) -> Iterator[Any]:
    """The served code location loaded in this process (its module, attribute and working
    directory: what the daemon, the dispatcher and the UI load), without a code server. The
    jobs' snapshots are the same in every process (``test_job_snapshots.py``)."""
    served = _served_origin()
    local = InProcessCodeLocationOrigin(
        loadable_target_origin=served.loadable_target_origin, location_name=LOCATION_NAME
    )
    with local.create_location(instance) as location:
        yield location


def _served_job_origin(repository: Any, remote_job: Any) -> Any:
    """A run's origin: the job in the served code location (not the in-process one)."""
    return job_origin(remote_job.name, repository.name)


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
    return RemoteJobOrigin(RemoteRepositoryOrigin(_served_origin(), repository_name), job_name)


def _reconstructable_job(job_name: str) -> Any:
    """The job as a run process reconstructs it: module, attribute and working directory."""
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
    eval_id: str | None,
    *,
    run_id: str | None = None,
    tags: dict[str, str] | None = None,
    run_config: dict[str, Any] | None = None,
    only_if_slot_free: bool = False,
) -> DagsterRun | None:
    """Record a run of the kind's job for the partition, to be executed by this process.

    The run is created as :func:`submit` creates one, from the served job (its origin, its
    snapshot, its tags); it is recorded as ``STARTING`` with this process's pid in its event
    log, so a dispatcher counts it against ``max_concurrent_runs`` at once and
    :func:`reap_dead_runs` fails it should this process die before it ends. Execute it with
    :func:`execute_run_here` (:func:`launch` does both).

    Parameters
    ----------
    instance : DagsterInstance
        Where the run is recorded.
    kind : EvaluationKind
        Which job, which dynamic partitions (the key is registered if new).
    eval_id : str or None
        The partition key (None for the lift jobs, which have no partitions).
    run_id : str, optional
        The run's id (one written to the warehouse beforehand); a new one by default.
    tags : dict of str to str, optional
        Tags added to those every run carries.
    run_config : dict, optional
        The run's config (a lift ingest's file); the console is quiet on top of it.
    only_if_slot_free : bool, optional
        Record the run only when :func:`run_slot_free` says so; the look and the record are
        one step under the instance's start lock.

    Returns
    -------
    DagsterRun or None
        The run, or None when ``only_if_slot_free`` and no slot is free (submit it instead).
    """
    register_partition(instance, kind, eval_id)
    reap_dead_runs(instance)
    # The run's console would print every event on this process's terminal; the event log
    # the UI shows is complete whatever this level says.
    config = {**QUIET_CONSOLE, **(run_config or {})}
    # Loading the definitions takes about a second: before the lock, not under it.
    with _served_location(instance) as location:
        with start_lock(instance.root_directory):
            if only_if_slot_free and not run_slot_free(instance):
                return None
            run = _create_run(
                instance,
                location,
                _served_job_origin,
                kind,
                eval_id,
                run_id,
                tags or {},
                config,
                status=DagsterRunStatus.STARTING,
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


def launch(
    kind: str | EvaluationKind,
    key: str | None,
    *,
    wait: bool,
    tags: dict[str, str] | None = None,
    on_event: Callable[[Any], None] | None = None,
    run_id: str | None = None,
    run_config: dict[str, Any] | None = None,
    timeout: float | None = None,
    instance: DagsterInstance | None = None,
) -> RunState:
    """Start a run of the kind's job for the partition ``key``: the one way every run starts.

    Parameters
    ----------
    kind : str or EvaluationKind
        ``holdout``, ``golden``, ``query``, ``lift_ingest``, ``lift_report`` or
        ``embedding_index``.
    key : str or None
        The partition key (registered if new); None for the lift jobs.
    wait : bool
        False: submit the run to the instance's queue and return (the daemon or the
        dispatcher starts it). True: execute it in this process when the queue would start it
        now (no daemon dequeues, nothing waits in the queue, a run slot is free), else submit
        it and wait for it; return once it has ended.
    tags : dict of str to str, optional
        Tags added to those every run carries.
    on_event : callable, optional
        With ``wait``: called with each of the run's events (``DagsterEvent``), as it is
        written when the run executes here, as it is read from the event log otherwise.
    run_id : str, optional
        The run's id (one written to the warehouse beforehand); a new one by default.
    run_config : dict, optional
        The run's config (a lift ingest's file).
    timeout : float, optional
        With ``wait``, for a run that had to be submitted: seconds to wait (None: no limit).
    instance : DagsterInstance, optional
        The project's instance (``$DAGSTER_HOME``) by default.

    Returns
    -------
    RunState
        ``queued`` (or later) without ``wait``; the ended run's state with it.

    Raises
    ------
    RunInterrupted
        This process was interrupted while executing the run (it ends canceled).
    TimeoutError
        A submitted run waited for did not end within ``timeout``.
    """
    instance = instance or dagster_instance()
    kind = kind_of(kind) if isinstance(kind, str) else kind
    if wait:
        run = create_inline_run(
            instance,
            kind,
            key,
            run_id=run_id,
            tags=tags,
            run_config=run_config,
            only_if_slot_free=True,
        )
        if run is not None:
            return execute_run_here(instance, run, on_event=on_event)
    state = submit(instance, kind, key, run_id=run_id, tags=tags, run_config=run_config)
    if not wait:
        return state
    return _wait(state.run_id, timeout, on_event=on_event, instance=instance)


# While waiting for a run executed elsewhere, its state and new events are read every second;
# dead runs and the queue are looked after every 10 s.
WAIT_POLL_SECONDS = 1.0
HOUSEKEEPING_SECONDS = 10.0


def wait(
    run_id: str,
    timeout: float | None = None,
    *,
    on_event: Callable[[Any], None] | None = None,
    poll_seconds: float = WAIT_POLL_SECONDS,
    instance: DagsterInstance | None = None,
) -> RunState:
    """Block until the run has ended (executed by another process: the daemon's, the
    dispatcher's, another CLI's) and return its state.

    While waiting, a run whose process died is failed and a queue nobody dequeues gets a
    dispatcher; ``on_event`` is called with each of the run's events as it is read; the
    run's progress is printed for a person waiting (:mod:`eval_pipelines.run_progress`).

    Raises
    ------
    InputError
        No such run in the instance.
    TimeoutError
        Still not ended after ``timeout`` seconds (None: no limit).
    """
    instance = instance or dagster_instance()
    deadline = None if timeout is None else time.monotonic() + timeout
    housekeeping = 0.0
    cursor: str | None = None
    while True:
        if time.monotonic() >= housekeeping:
            reap_dead_runs(instance)
            dispatch_if_needed(instance)
            housekeeping = time.monotonic() + HOUSEKEEPING_SECONDS
        run = instance.get_run_by_id(run_id)
        if run is None:
            raise InputError("run", run_id, "no such Dagster run")
        if on_event is not None:
            while True:
                page = instance.get_records_for_run(run_id, cursor=cursor, limit=1000)
                cursor = page.cursor
                for record in page.records:
                    event = record.event_log_entry.dagster_event
                    if event is not None:
                        on_event(event)
                if not page.has_more:
                    break
        state = run_state(instance, run)
        if state.finished:
            return state
        follow(instance, run_id)  # progress lines for a person waiting
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} still running after {timeout:g} s")
        time.sleep(poll_seconds)


_wait = wait  # for launch, whose ``wait`` is its flag


def uses_run_queue(instance: DagsterInstance) -> bool:
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


def stored_by_a_succeeded_step(instance: Any, run_id: str | None, step_key: str) -> bool:
    """Whether what step ``step_key`` of Dagster run ``run_id`` stored in the warehouse counts:
    only once that step succeeded.

    A step commits its rows before it ends, so an interrupt in between (the UI's Terminate,
    Ctrl-C) leaves the rows of a step that did not succeed, in a canceled run whose asset the
    UI shows missing. Rows with no run id, or whose run this instance does not hold, have
    nothing to contradict them and count."""
    if run_id is None or instance.get_run_by_id(run_id) is None:
        return True
    return any(
        record.dagster_event is not None and record.dagster_event.step_key == step_key
        for record in instance.all_logs(run_id, of_type=DagsterEventType.STEP_SUCCESS)
    )


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


def run_worker_pid(instance: DagsterInstance, run_id: str) -> int | None:
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
            pid = run_worker_pid(instance, run.run_id)
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
