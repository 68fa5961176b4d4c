"""Following a holdout evaluation: its status document now, or once its run has ended."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from eval_pipelines.api._holdout_state import (
    HoldoutStatus,
    StoredEvaluation,
    progress_events,
    read_stored,
    status_document,
)
from eval_pipelines.api._shared import EvalFailed
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.inputs import is_finite_number
from eval_pipelines.storage.warehouse import WarehouseBusy


def get_holdout_eval(
    case_id: str, eval_id: str, *, warehouse: Path | str | None = None
) -> HoldoutStatus:
    """Status, the newest run and its state (with the reason when it failed), each variant's
    step, the versions and, once complete, the report. Raises :class:`WarehouseBusy` when
    another process holds the warehouse for over 15 s."""
    from eval_pipelines import runs
    from eval_pipelines.runs.instance import dagster_instance

    stored = read_stored(case_id, eval_id, warehouse)
    instance = dagster_instance()
    runs.reap_dead_runs(instance)
    newest = runs.newest_run(instance, eval_id)
    if newest is not None and runs.run_state(instance, newest).state == "queued":
        runs.dispatch_if_needed(instance)  # e.g. the daemon stopped after the run was queued
    return status_document(instance, stored, newest)


# While waiting, the run's state and new events are read from the Dagster instance every
# second (cheap; :func:`eval_pipelines.runs.wait`), the warehouse once the run has ended, so
# many waiting clients do not take CPU or the DuckDB lock from the runs they wait for.
POLL_SECONDS = 1.0


def wait_for_eval(
    case_id: str,
    eval_id: str,
    *,
    timeout: float = 3600,
    poll_seconds: float = POLL_SECONDS,
    warehouse: Path | str | None = None,
    progress: Callable[[HoldoutStatus], None] | None = None,
    run_id: str | None = None,
) -> HoldoutStatus:
    """Block until the newest run (or ``run_id``) has finished and return the status.

    The run is waited for as every run is (:func:`eval_pipelines.runs.wait`: dead runs are
    failed and a queue nobody dequeues gets a dispatcher meanwhile); ``progress`` is called
    with the status document whenever the run's state or a variant step's changes, and once
    with the final one. Raises :class:`EvalFailed` with the reason when there is no report
    once it has finished (the run failed, was canceled, materialised only part of the chain,
    or none was launched), and when the run waited for (``run_id``) failed even though an
    earlier report stands; ``TimeoutError`` after ``timeout`` seconds. A run that has already
    finished costs one read of the warehouse.
    """
    from eval_pipelines import runs
    from eval_pipelines.runs.instance import dagster_instance

    if not is_finite_number(timeout) or timeout <= 0:
        # A NaN deadline never passes (``now > nan`` is false): the wait would never end.
        raise InputError("timeout", timeout, "must be a finite, positive number of seconds")
    deadline = time.monotonic() + timeout
    instance = dagster_instance()
    newest = runs.newest_run(instance, eval_id)
    waited = run_id or (newest.run_id if newest is not None else None)
    # Read when first needed: for a progress line, or, read after the run had finished,
    # as the answer itself.
    stored: StoredEvaluation | None = None
    if waited is not None:
        current = instance.get_run_by_id(waited)
        if current is None:
            raise InputError("run_id", waited, f"no such Dagster run of evaluation {eval_id}")
        if not current.is_finished:
            stored = read_stored(case_id, eval_id, warehouse)
            on_event = progress_events(instance, stored, progress, waited) if progress else None
            try:
                runs.wait(
                    waited,
                    deadline - time.monotonic(),
                    on_event=on_event,
                    poll_seconds=poll_seconds,
                    instance=instance,
                )
            except TimeoutError:
                raise TimeoutError(
                    f"evaluation {eval_id} still running after {timeout:g} s"
                ) from None
    while True:
        try:
            stored = read_stored(case_id, eval_id, warehouse)
            break
        except WarehouseBusy:
            if stored is None or time.monotonic() > deadline:
                raise  # the evaluation itself is unknown until read
            time.sleep(poll_seconds)  # ask again
    ended = instance.get_run_by_id(waited) if waited is not None else None
    status = status_document(instance, stored, ended)
    if progress is not None:
        progress(status)
    return _finished(case_id, status, waited_for_run=run_id is not None)


def no_run_message(status: HoldoutStatus) -> str:
    """What to say about an evaluation the Dagster instance holds no run of: which instance
    was read (``$DAGSTER_HOME``) and how to reach the one that ran it, or how to run it."""
    from eval_pipelines.runs.instance import dagster_home

    rerun = f"'eval-pipelines eval rerun {status.case_id} {status.eval_id}'"
    where = f"the Dagster instance in {dagster_home()} (DAGSTER_HOME)"
    if status.report_run_id is not None:
        return (
            f"evaluation {status.eval_id}: its report was written by run "
            f"{status.report_run_id}, but {where} holds no run of it: set DAGSTER_HOME to the "
            f"instance that ran it (the repository's .dagster_home for make dev and the CLI "
            f"started there), or run it again here with {rerun}"
        )
    return (
        f"evaluation {status.eval_id} has no run in {where}: start one with {rerun} (if it ran "
        "from another instance, set DAGSTER_HOME to that instance's folder)"
    )


def _finished(case_id: str, status: HoldoutStatus, *, waited_for_run: bool) -> HoldoutStatus:
    """The status of a finished wait, or :class:`EvalFailed` saying why there is no report
    (or, when the caller waited for one run, why that run did not write it)."""
    eval_id, run = status.eval_id, status.run
    failed = run is not None and run.state in ("failed", "canceled")
    if status.status == "complete" and not (waited_for_run and failed):
        return status
    if run is not None and failed:
        stands = (
            f"; the report of run {status.report_run_id} still stands"
            if status.status == "complete"
            else ""
        )
        raise EvalFailed(
            f"evaluation {eval_id}: run {run.run_id} {run.state}: "
            f"{run.reason or 'see the run in the Dagster UI'}{stands}",
            status,
        )
    if run is None:
        raise EvalFailed(no_run_message(status), status)
    earlier = (
        f" (the report of run {status.report_run_id} is from before it)"
        if status.report is not None
        else ""
    )
    raise EvalFailed(
        f"evaluation {eval_id}: run {run.run_id} finished without writing the report (it "
        f"materialised only some assets){earlier}; run the whole evaluation with "
        f"'eval-pipelines eval rerun {case_id} {eval_id}'",
        status,
    )
