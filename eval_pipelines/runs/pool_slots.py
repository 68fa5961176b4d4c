"""The pool slots that finished runs still hold, freed."""

from __future__ import annotations

from dagster import DagsterInstance, RunsFilter


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
