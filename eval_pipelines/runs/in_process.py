"""Executing a run in the process that created it: recorded as starting under the start lock
when a run slot is free, executed by Dagster's own run iterator, canceled when this process
is interrupted or the UI terminates it."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from typing import Any

from dagster import DagsterEventType, DagsterInstance, DagsterRun, DagsterRunStatus

from eval_pipelines.defs.dagster_private import EngineEventData, ErrorSource, execute_run_iterator
from eval_pipelines.defs.families import QUIET_CONSOLE
from eval_pipelines.runs.creation import create_run
from eval_pipelines.runs.kinds import EvaluationKind, register_partition
from eval_pipelines.runs.locations import reconstructable_job, served_job_origin, served_location
from eval_pipelines.runs.progress import follow
from eval_pipelines.runs.queue import run_slot_free
from eval_pipelines.runs.reaping import reap_dead_runs
from eval_pipelines.runs.shared_locks import run_start_lock
from eval_pipelines.runs.states import RunState, run_state
from eval_pipelines.runs.termination import TerminationWatcher


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
    # Loading the definitions is slow: before the lock, not under it.
    with served_location(instance) as location:
        with run_start_lock(instance.root_directory):
            if only_if_slot_free and not run_slot_free(instance):
                return None
            run = create_run(
                instance,
                location,
                served_job_origin,
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
    with TerminationWatcher(instance, run.run_id) as watcher:
        try:
            # Python's full garbage collections walk every object in the process, Dagster's
            # and the definitions' included, many times over a run. Objects that exist before
            # the run are left out of them while it executes, and put back after.
            gc.freeze()
            for event in execute_run_iterator(reconstructable_job(run.job_name), run, instance):
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
