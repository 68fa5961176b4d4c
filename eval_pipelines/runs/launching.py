"""The one way every run starts (:func:`launch`) and the one way to wait for a run (:func:`wait`).

Every run is an ordinary Dagster run of the kind's job, created from the job the code location
``eval_pipelines`` serves (its origin and its snapshot), so the UI lists it with its job and
partition, re-executes it as the same job and terminates it. :func:`launch` starts every run
of every kind (holdout, golden, query, lift ingest, lift report), one of two ways:

- ``wait=False``: submitted, the way ``dagster job launch`` does: with the QueuedRunCoordinator
  the run waits in the instance's queue; the daemon (``make dev``) starts it, or, when no
  daemon is running, the CLI's own dispatcher (:mod:`eval_pipelines.runs.dispatcher`) does, with
  the same limits;
- ``wait=True``: executed in the calling process when the queue would start it now (no daemon
  dequeues, nothing waits in the queue, a run slot is free), else submitted and waited for
  (:func:`wait`). Executing here skips the dispatcher, its code server and the run's own
  process, each of which imports Dagster and the definitions again, for a caller that waits
  anyway, and a ``breakpoint()`` in a stage stops the command that waits.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from dagster import DagsterInstance

from eval_pipelines.core.errors import InputError
from eval_pipelines.runs.in_process import create_inline_run, execute_run_here
from eval_pipelines.runs.kinds import EvaluationKind, kind_of
from eval_pipelines.runs.progress import follow
from eval_pipelines.runs.queue import dispatch_if_needed
from eval_pipelines.runs.reaping import reap_dead_runs
from eval_pipelines.runs.states import RunState, run_state
from eval_pipelines.runs.submission import submit


def _project_instance() -> DagsterInstance:
    """The project's instance (``$DAGSTER_HOME``)."""
    # Imported when called: ``python -m eval_pipelines.runs.instance`` (make install) imports
    # this package first, and a module its __init__ had imported would be executed twice.
    from eval_pipelines.runs.instance import dagster_instance

    return dagster_instance()


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
    instance = instance or _project_instance()
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
    run's progress is printed for a person waiting (:mod:`eval_pipelines.runs.progress`).

    Raises
    ------
    InputError
        No such run in the instance.
    TimeoutError
        Still not ended after ``timeout`` seconds (None: no limit).
    """
    instance = instance or _project_instance()
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
