"""A run the UI launches (Materialize: Dagster's ``__ASSET_JOB`` through GraphQL's
``launchPipelineExecution``, as the webserver does) carries the project's kind tag, so the
Runs page filtered by ``eval_pipelines/kind`` finds it. Real instance, real code server, the
webserver's GraphQL schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dagster_graphql.client.query import LAUNCH_PIPELINE_EXECUTION_MUTATION
from dagster_graphql.test.utils import execute_dagster_graphql

from eval_pipelines.defs.run_tags import (
    EVAL_TAG,
    KIND_TAG,
    LOCATION_NAME,
    PARTITION_TAG,
    SINGLE_REPOSITORY,
)

ASSET_JOB = "__ASSET_JOB"


def _materialize_from_ui(
    context: Any, assets: list[str], tags: dict[str, str]
) -> tuple[str, dict[str, str]]:
    """What the UI's Materialize button sends: the implicit asset job, an asset selection,
    the partition's tags. Returns the run id and its tags as stored."""
    result = execute_dagster_graphql(
        context,
        LAUNCH_PIPELINE_EXECUTION_MUTATION,
        variables={
            "executionParams": {
                "selector": {
                    "repositoryLocationName": LOCATION_NAME,
                    "repositoryName": SINGLE_REPOSITORY,
                    "pipelineName": ASSET_JOB,
                    "assetSelection": [{"path": [name]} for name in assets],
                    "assetCheckSelection": [],
                },
                "mode": "default",
                "runConfigData": {},
                "executionMetadata": {
                    "tags": [{"key": key, "value": value} for key, value in tags.items()]
                },
            }
        },
    )
    launched = result.data["launchPipelineExecution"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    stored = context.instance.get_run_by_id(run_id)
    assert stored.job_name == ASSET_JOB
    return run_id, dict(stored.tags)


def test_a_ui_materialize_of_holdout_assets_carries_the_kind_tag(workdir: Path) -> None:
    from dagster import DagsterRunStatus, RunsFilter

    from eval_pipelines.runs import KINDS
    from eval_pipelines.runs.instance import dagster_instance
    from eval_pipelines.runs.locations import workspace

    instance = dagster_instance()
    eval_id = "small-e0001-s7"
    instance.add_dynamic_partitions(KINDS["holdout"].partitions, [eval_id])
    with workspace(instance) as process_context:
        context = process_context.create_request_context()
        holdout_run, holdout_tags = _materialize_from_ui(
            context, ["holdout_sample", "eval_report"], {PARTITION_TAG: eval_id}
        )
        # The ANN index is its own kind's (`case embed` builds it through that job).
        _, index_tags = _materialize_from_ui(context, ["embedding_ann_index"], {})

    # Before: only the partition tag (and the UI's own), so the kind filter missed the run.
    assert holdout_tags[KIND_TAG] == "holdout"
    assert holdout_tags[EVAL_TAG] == eval_id
    assert index_tags[KIND_TAG] == "embedding_index"
    found = instance.get_runs(filters=RunsFilter(tags={KIND_TAG: "holdout"}))
    assert [run.run_id for run in found] == [holdout_run]
    assert found[0].status == DagsterRunStatus.QUEUED


def test_an_instance_config_an_earlier_release_wrote_gets_the_tagging_coordinator(
    tmp_path: Path,
) -> None:
    """The dagster.yaml the previous release wrote named Dagster's QueuedRunCoordinator: left
    as it was, the UI's runs would still miss the tag. Unedited, it is replaced; edited, kept."""
    from eval_pipelines.runs.instance import INSTANCE_CONFIG, ensure_instance_config

    earlier = (
        INSTANCE_CONFIG.replace(
            "  module: eval_pipelines.runs.coordinator\n  class: TaggingRunCoordinator\n",
            "  module: dagster.core.run_coordinator\n  class: QueuedRunCoordinator\n",
        )
        .replace(
            "\n# Edit freely: it is only written when the folder has no dagster.yaml (or has, "
            "unedited,\n# the one an earlier release wrote).\n",
            "\n# Edit freely: it is only written when the folder has no dagster.yaml.\n",
        )
        .replace(
            " time. The runs the UI launches\n# get the project's eval_pipelines/kind tag here "
            "(docs/runs.md).\n",
            " time.\n",
        )
    )
    unedited, edited = tmp_path / "unedited", tmp_path / "edited"
    for home, text in ((unedited, earlier), (edited, earlier + "\n# mine\n")):
        home.mkdir()
        (home / "dagster.yaml").write_text(text)
    assert ensure_instance_config(unedited)
    assert (unedited / "dagster.yaml").read_text() == INSTANCE_CONFIG
    assert not ensure_instance_config(edited)
    assert "QueuedRunCoordinator" in (edited / "dagster.yaml").read_text()
