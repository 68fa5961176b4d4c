"""A run as the CLI and API report it. States (mapped once, here, from Dagster's run status):
``queued``, ``running``, ``succeeded``, ``failed``, ``canceled``."""

from __future__ import annotations

from dataclasses import dataclass

from dagster import DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter

from eval_pipelines.defs.run_tags import PARTITION_TAG
from eval_pipelines.runs.failures import failure_reason

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


def run_state(instance: DagsterInstance, run: DagsterRun) -> RunState:
    state = STATES.get(run.status, "running")
    reason = failure_reason(instance, run.run_id) if state in ("failed", "canceled") else None
    return RunState(run.run_id, state, run.status.value, reason)


def newest_run(instance: DagsterInstance, eval_id: str) -> DagsterRun | None:
    """The newest run of the evaluation's partition, whoever launched it (CLI, UI, dagster
    CLI, a re-execution)."""
    runs = instance.get_runs(filters=RunsFilter(tags={PARTITION_TAG: eval_id}), limit=1)
    return runs[0] if runs else None
