"""Why a run did not succeed, in one line read from its event log; and which of some runs are
over, and why."""

from __future__ import annotations

from dagster import DagsterEventType, DagsterInstance

from eval_pipelines.runs.reaping import reap_dead_runs

# Engine events that say a run's process died (the code server's and reaping.py's wording).
# ("Process for run exited" is the normal end of every run, hence "unexpectedly exited".)
_CRASH_WORDS = ("unexpectedly exited", "terminated by signal", "killed or crashed")


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
