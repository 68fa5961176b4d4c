"""Submitting a run, as ``dagster job launch`` does: to the instance's run queue (the daemon or
the CLI's dispatcher starts it), or, without a queue, launched at once through a code
server."""

from __future__ import annotations

from typing import Any

from dagster import DagsterInstance

from eval_pipelines.defs.run_tags import LOCATION_NAME
from eval_pipelines.runs.creation import create_run
from eval_pipelines.runs.kinds import EvaluationKind, register_partition
from eval_pipelines.runs.locations import served_job_origin, served_location, workspace
from eval_pipelines.runs.progress import follow
from eval_pipelines.runs.queue import (
    daemon_running,
    dispatch_if_needed,
    ensure_dispatcher,
    uses_run_queue,
)
from eval_pipelines.runs.reaping import reap_dead_runs
from eval_pipelines.runs.shared_locks import run_start_lock
from eval_pipelines.runs.states import RunState, run_state


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
        with served_location(instance) as location:
            run = create_run(
                instance,
                location,
                served_job_origin,
                kind,
                eval_id,
                run_id,
                tags or {},
                run_config or {},
            )
        with run_start_lock(instance.root_directory):
            # The queued-run coordinator records the run as queued and uses no workspace.
            submitted = instance.submit_run(run.run_id, None)  # type: ignore[arg-type]
        dispatch_if_needed(instance)  # in case a dispatcher was just leaving
        return _followed(instance, run_state(instance, submitted))
    with workspace(instance) as context:
        request = context.create_request_context()
        location = request.get_code_location(LOCATION_NAME)
        run = create_run(
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
