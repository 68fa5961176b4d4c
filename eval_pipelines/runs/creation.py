"""Creating (not starting) a run of a kind's job from a code location: the job, its snapshot
and its execution plan the location serves, and the tags every run carries."""

from __future__ import annotations

from typing import Any

from dagster import DagsterInstance, DagsterRun, DagsterRunStatus

from eval_pipelines.defs.run_tags import EVAL_TAG, KIND_TAG, LAUNCHED_BY_TAG, PARTITION_TAG
from eval_pipelines.runs.kinds import EvaluationKind


def _run_tags(
    job_tags: Any, kind: EvaluationKind, eval_id: str | None, extra_tags: dict[str, str]
) -> dict[str, str]:
    """The tags every run carries, however it is started (a partition's when it has one)."""
    keyed = {PARTITION_TAG: eval_id, EVAL_TAG: eval_id} if eval_id is not None else {}
    return {
        **job_tags,
        **keyed,
        KIND_TAG: kind.name,
        LAUNCHED_BY_TAG: "eval-pipelines",
        **extra_tags,
    }


def create_run(
    instance: DagsterInstance,
    location: Any,
    job_origin_of: Any,
    kind: EvaluationKind,
    eval_id: str | None,
    run_id: str | None,
    extra_tags: dict[str, str],
    run_config: dict[str, Any],
    status: DagsterRunStatus | None = None,
) -> DagsterRun:
    """Create (not start) a run of the kind's job for the partition, from a code location:
    the job, its snapshot and its execution plan are the ones the location serves."""
    repository = next(iter(location.get_repositories().values()))
    remote_job = repository.get_full_job(kind.job_name)
    plan = location.get_execution_plan(
        remote_job, run_config, step_keys_to_execute=None, known_state=None, instance=instance
    )
    return instance.create_run(
        job_name=remote_job.name,
        run_id=run_id,
        run_config=run_config,
        resolved_op_selection=None,
        step_keys_to_execute=None,
        op_selection=None,
        status=status,
        root_run_id=None,
        parent_run_id=None,
        tags=_run_tags(remote_job.tags, kind, eval_id, extra_tags),
        job_snapshot=remote_job.job_snapshot,
        execution_plan_snapshot=plan.execution_plan_snapshot,
        parent_job_snapshot=remote_job.parent_job_snapshot,
        remote_job_origin=job_origin_of(repository, remote_job),
        job_code_origin=remote_job.get_python_origin(),
        asset_selection=None,
        asset_check_selection=None,
        asset_graph=repository.asset_graph,
    )
