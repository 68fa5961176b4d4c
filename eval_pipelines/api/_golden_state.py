"""What ``api.golden`` and ``api.workflows`` both do before they read: save the committed
workflow files that changed, close the golden runs a dead Dagster run left ``running``, and
take the gate's decision counting only golden runs whose step succeeded. Below both modules,
so neither imports the other."""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from eval_pipelines import settings
from eval_pipelines.core.errors import InputError, NotFoundError
from eval_pipelines.core.golden.gate import Gate
from eval_pipelines.core.workflows.files import scan_workflow_files
from eval_pipelines.stages import golden as golden_stage
from eval_pipelines.stages.golden_classify import pin_workflow
from eval_pipelines.storage import workflows as workflows_store


def sync_workflow_files(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """Save the committed files under ``data/workflows/`` whose content changed since they were
    last read (what the sensor sees, so the CLI agrees with it without a daemon); returns the
    revisions saved. Files that do not parse are skipped here (``workflow save`` reports
    their error)."""
    saved = []
    for file in scan_workflow_files(settings.workflows_dir()):
        workflow = file.workflow
        if workflow is None:
            continue
        try:
            workflow = pin_workflow(conn, workflow)
        except (InputError, NotFoundError):
            continue  # a classify workflow over a case not loaded yet
        if workflows_store.file_revision(conn, str(file.path)) == workflow.revision:
            continue
        workflows_store.save_revision(conn, workflow, source=f"file:{file.path}", saved_by=None)
        workflows_store.record_file_revision(conn, str(file.path), workflow.name, workflow.revision)
        saved.append(workflow.revision)
    return saved


def close_abandoned_runs(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """Close the golden runs left ``running`` by a Dagster run that is over (its process
    killed, say) as ``failed``, before anything reads them; returns the runs closed."""

    def ended(run_ids: list[str]) -> dict[str, str]:
        from eval_pipelines import runs
        from eval_pipelines.runs.instance import dagster_instance

        return runs.ended_runs(dagster_instance(), run_ids)

    return golden_stage.close_abandoned_runs(conn, ended)


def golden_run_step_succeeded() -> Callable[[str | None], bool]:
    """Whether the ``golden_run`` step of a Dagster run of this instance succeeded (given the
    run's id): a golden run counts only then."""
    from eval_pipelines.defs.golden import golden_run_step_succeeded as succeeded
    from eval_pipelines.runs.instance import dagster_instance

    return succeeded(dagster_instance())


def gate_decision(conn: duckdb.DuckDBPyConnection, revision: str) -> Gate:
    """The gate for ``revision`` (:func:`eval_pipelines.stages.golden.gate_decision`), counting
    a golden run only once the ``golden_run`` step that stored it succeeded."""
    return golden_stage.gate_decision(conn, revision, step_succeeded=golden_run_step_succeeded())
