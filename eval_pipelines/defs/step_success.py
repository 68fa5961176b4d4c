"""Whether what a step of a Dagster run stored in the warehouse counts: read from the run's
event log, by the definitions (a golden run's rows) and the API (a report's rows) alike."""

from __future__ import annotations

from typing import Any

from dagster import DagsterEventType


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
