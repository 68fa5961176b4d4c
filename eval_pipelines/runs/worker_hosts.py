"""The host a run's worker process runs on, recorded in the run's event log, so that a process
judges only the run workers of its own machine dead or alive (a process id means nothing on
another host). The CLI records its host when it executes a run itself; on a team's instance,
the run launcher of ``deploy/team/dagster.yaml`` records the launching machine's."""

from __future__ import annotations

import socket

from dagster import DagsterEventType, DagsterInstance, DefaultRunLauncher, MetadataValue

from eval_pipelines.defs.dagster_private import EngineEventData

HOST_METADATA = "host"


def this_host() -> str:
    """This machine's name (every machine of a deployment must have its own)."""
    return socket.gethostname()


def host_metadata() -> dict[str, MetadataValue]:
    return {HOST_METADATA: MetadataValue.text(this_host())}


def run_worker_host(instance: DagsterInstance, run_id: str) -> str | None:
    """The host recorded for the run's worker; None for a run that recorded none (an earlier
    release's, or one launched by a plain ``DefaultRunLauncher``)."""
    for record in instance.all_logs(run_id, of_type=DagsterEventType.ENGINE_EVENT):
        event = record.dagster_event
        data = event.engine_event_data if event is not None else None
        if data is not None and HOST_METADATA in data.metadata:
            return str(data.metadata[HOST_METADATA].value)
    return None


class HostRecordingRunLauncher(DefaultRunLauncher):
    """Dagster's default run launcher (a process per run, started by the code server of this
    machine) that first records this machine as the run's worker host."""

    def launch_run(self, context):  # type: ignore[no-untyped-def]
        self._instance.report_engine_event(
            f"Launching the run's worker process on host {this_host()}.",
            context.dagster_run,
            EngineEventData(metadata=host_metadata()),
        )
        super().launch_run(context)
