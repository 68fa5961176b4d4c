"""What every part of the API shares: where the warehouse is, and the failure types."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import duckdb

from eval_pipelines import settings
from eval_pipelines.core.errors import EvalPipelinesError, InputError
from eval_pipelines.core.results import JsonResult
from eval_pipelines.defs.step_success import (
    stored_by_a_succeeded_step as stored_by_a_succeeded_step,
)
from eval_pipelines.stages import shared_files
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, connect


class EvalFailed(EvalPipelinesError, RuntimeError):
    """The evaluation's run failed or was canceled; ``status`` is its status (a holdout
    evaluation's :class:`~eval_pipelines.api.HoldoutStatus`, or a run's document)."""

    def __init__(self, message: str, status: JsonResult | Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status


class EvalInterrupted(KeyboardInterrupt):
    """This process was interrupted (Ctrl-C) while it executed the evaluation's run; the run
    was canceled. The message says which run and how to start it again."""


def resolve_warehouse(
    warehouse: settings.WarehouseLocation | str | None,
) -> settings.WarehouseLocation:
    """An explicit warehouse (a DuckDB file's path or a PostgreSQL URL), else
    ``$EVAL_PIPELINES_WAREHOUSE`` or the default."""
    if isinstance(warehouse, settings.PostgresWarehouse):
        return warehouse
    return (
        settings.parse_warehouse(warehouse, "warehouse")
        if warehouse
        else settings.warehouse_location()
    )


def open_warehouse(
    warehouse: Path | str | None, *, read_only: bool = False, create: bool = False
) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
    """A connection to the warehouse (:func:`resolve_warehouse`), waiting for its lock as
    long as the CLI does."""
    return connect(
        resolve_warehouse(warehouse),
        read_only=read_only,
        create=create,
        wait_seconds=CLI_WAIT_SECONDS,
    )


def require_run_warehouse(warehouse: Path | str | None) -> None:
    """Runs read the warehouse the definitions' resource names (``$EVAL_PIPELINES_WAREHOUSE``
    or the default): refuse another one rather than store where the run cannot see it."""
    given, run_reads = resolve_warehouse(warehouse), settings.warehouse_location()
    if _identity(given) != _identity(run_reads):
        raise InputError(
            "warehouse",
            str(given),
            f"the run reads {run_reads}; point $EVAL_PIPELINES_WAREHOUSE at this warehouse instead",
        )
    require_shared_location()


def require_shared_location() -> None:
    """Runs keep index files and step payloads in ``$EVAL_PIPELINES_SHARED_DIR`` when it is
    set: refuse, before anything is written, a location they could not use (a folder missing
    or read-only; a bucket missing, forbidden or behind an unreachable endpoint)."""
    location = shared_files.configured_location()
    if location is not None:
        shared_files.check_location(location, settings.SHARED_DIR_ENV)


def _identity(warehouse: settings.WarehouseLocation) -> object:
    return warehouse.resolve() if isinstance(warehouse, Path) else warehouse


def step_refusal(run_id: str, marker: str) -> str | None:
    """The sentence a step of the run refused with (a ``dg.Failure`` whose metadata holds
    ``marker``, see ``defs.families.refusal``), if one did."""
    from dagster import DagsterEventType

    from eval_pipelines.runs.instance import dagster_instance

    for record in dagster_instance().all_logs(run_id, of_type=DagsterEventType.STEP_FAILURE):
        event = record.dagster_event
        data = event.step_failure_data if event is not None else None
        failure = data.user_failure_data if data is not None else None
        if failure is not None and marker in failure.metadata:
            return str(failure.description)
    return None
