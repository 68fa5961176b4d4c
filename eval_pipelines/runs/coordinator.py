"""The instance's run coordinator: Dagster's run queue, plus the project's tags on the runs
the UI launches.

The UI's Materialize launches Dagster's implicit ``__ASSET_JOB`` with only the tags the UI
sets (the partition's): in Dagster 1.13 definitions cannot give that job tags (a job's
``tags`` are its own, and asset ``tags``, ``owners``, ``kinds`` and ``op_tags`` never reach
the run), so filtering the Runs page by ``eval_pipelines/kind`` missed those runs. Every
submitted run, the UI's included, passes through the instance's run coordinator, so this
one adds the kind of the project's job that owns the run's assets (and the evaluation's id,
from the partition) to a run that has no kind yet. Runs the project launches already carry
both; a run executed in process (``dagster asset materialize``) is never submitted and keeps
only its partition tag.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dagster import DagsterRun, QueuedRunCoordinator, SubmitRunContext

from eval_pipelines.defs.run_tags import EVAL_TAG, KIND_TAG, PARTITION_TAG

# The implicit job every asset belongs to: it names no kind.
IMPLICIT_ASSET_JOB = "__ASSET_JOB"


def kind_of_assets(job_tags_of_asset: Iterable[Iterable[dict[str, str]]]) -> str | None:
    """The one kind the project's jobs give the assets, else None: an asset in no kind's
    job (the ANN index) or assets of several kinds in one run name no kind."""
    kinds = {
        frozenset(tags[KIND_TAG] for tags in job_tags if KIND_TAG in tags)
        for job_tags in job_tags_of_asset
    }
    if len(kinds) != 1:
        return None
    (kind,) = kinds
    return next(iter(kind)) if len(kind) == 1 else None


def missing_run_tags(run: DagsterRun, workspace: Any) -> dict[str, str]:
    """The project's tags a run submitted without them should carry, from the jobs (in the
    run's code location) that select its assets."""
    origin = run.remote_job_origin
    if KIND_TAG in run.tags or workspace is None or origin is None or not run.asset_selection:
        return {}
    location = workspace.get_code_location(origin.location_name)
    repository = location.get_repository(origin.repository_origin.repository_name)
    nodes = {node.asset_key: node for node in repository.get_asset_node_snaps()}
    job_tags: dict[str, dict[str, str]] = {}

    def tags_of(job_name: str) -> dict[str, str]:
        if job_name not in job_tags:
            job_tags[job_name] = dict(repository.get_full_job(job_name).tags)
        return job_tags[job_name]

    kind = kind_of_assets(
        [
            tags_of(name)
            for name in (nodes[key].job_names if key in nodes else ())
            if name != IMPLICIT_ASSET_JOB
        ]
        for key in run.asset_selection
    )
    if kind is None:
        return {}
    tags = {KIND_TAG: kind}
    if PARTITION_TAG in run.tags:
        tags[EVAL_TAG] = run.tags[PARTITION_TAG]
    return tags


class TaggingRunCoordinator(QueuedRunCoordinator):
    """Dagster's ``QueuedRunCoordinator`` (same configuration, same queue and daemon) that
    gives a run submitted without the project's kind tag the kind of its assets' job."""

    def submit_run(self, context: SubmitRunContext) -> DagsterRun:
        run = context.dagster_run
        tags = missing_run_tags(run, context.workspace)
        if tags:
            self._instance.add_run_tags(run.run_id, tags)
            context = context._replace(dagster_run=run.with_tags({**run.tags, **tags}))
        return super().submit_run(context)
