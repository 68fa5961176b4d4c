"""Dead runs: the process executing a run, read from its event log, and failing the runs whose
process is gone."""

from __future__ import annotations

from dagster import (
    DagsterEventType,
    DagsterInstance,
    DagsterRunStatus,
    DefaultRunLauncher,
    RunsFilter,
)

from eval_pipelines.defs.run_tags import KIND_TAG
from eval_pipelines.runs.kinds import KINDS
from eval_pipelines.runs.pool_slots import free_finished_run_slots
from eval_pipelines.runs.processes import process_alive
from eval_pipelines.runs.worker_hosts import run_worker_host, this_host


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


def reap_dead_runs(instance: DagsterInstance) -> list[str]:
    """Fail runs of this project whose worker process on this machine is gone, and free the
    pool slots of finished runs; returns the runs it failed.

    With the daemon running, its run monitoring and the code server do this; without one (a
    CLI-only setup, or a killed code server) every submit and status call does it here. Only
    runs started by the default run launcher (local processes) are checked; a starting run
    is checked once its event log names its process (a run executed by the CLI that created
    it names it before it starts). A run whose worker another machine runs (its event log names
    that host: :mod:`eval_pipelines.runs.worker_hosts`) is left to that machine.
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
        host = this_host()
        for run in in_progress:
            if run_worker_host(instance, run.run_id) not in (None, host):
                continue  # another machine's worker: its pid means nothing here
            pid = run_worker_pid(instance, run.run_id)
            if pid is not None and not process_alive(pid):
                instance.report_engine_event(
                    f"Run worker process (pid {pid}) is gone: it was killed or crashed.", run
                )
                instance.report_run_failed(
                    run, f"Run worker process (pid {pid}) was killed or crashed."
                )
                failed.append(run.run_id)
    free_finished_run_slots(instance)
    return failed
