"""Every name eval_pipelines takes from Dagster's private modules (``dagster._*``), in one
place.

Dagster's public API has no way to create a run from a code location, execute it in this
process, dequeue runs without the daemon, or build executors from Dagster's own parts; these
are its internals, and they move between releases. Dagster is pinned exactly (pyproject.toml);
``eval_pipelines_tests/runs/test_dagster_private.py`` names that version and imports each name
below, so an upgrade fails there, loudly, before anything else. No other module of the package
imports ``dagster._`` (a test greps for it).
"""

from __future__ import annotations

from typing import Any

# Runs: code locations, origins, creation and execution in this process.
from dagster._core.definitions.executor_definition import (
    IN_PROC_CONFIG,
    MULTI_PROC_CONFIG,
    ExecutorRequirement,
    _core_in_process_executor_creation,
    _core_multiprocess_executor_creation,
    multiple_process_executor_requirements,
)
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.errors import DagsterExecutionInterruptedError
from dagster._core.events import DagsterEvent, EngineEventData
from dagster._core.execution.api import execute_run_iterator
from dagster._core.execution.context.system import PlanOrchestrationContext
from dagster._core.execution.plan.objects import ErrorSource
from dagster._core.execution.plan.plan import ExecutionPlan
from dagster._core.execution.retries import RetryMode
from dagster._core.executor.base import Executor
from dagster._core.executor.init import InitExecutorContext
from dagster._core.executor.step_delegating import (
    CheckStepHealthResult,
    StepDelegatingExecutor,
    StepHandler,
    StepHandlerContext,
)
from dagster._core.remote_origin import (
    InProcessCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.storage.dagster_run import ACTIVE_RUN_STATUSES
from dagster._core.storage.local_compute_log_manager import LocalComputeLogManager
from dagster._core.storage.tags import RUN_KEY_TAG, SENSOR_NAME_TAG
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import ModuleTarget
from dagster._grpc.types import ExecuteStepArgs
from dagster._serdes import deserialize_value, serialize_value


def execute_step_command_body(args: Any, instance: Any, run: Any) -> Any:
    """Dagster's ``dagster api execute_step`` body (imported when a Dask worker needs it: the
    CLI module it lives in is heavy)."""
    from dagster._cli.api import _execute_step_command_body

    return _execute_step_command_body(args, instance, run)


def queued_run_coordinator_daemon(interval_seconds: float) -> Any:
    """The daemon's queued-run coordinator, for the dispatcher (imported when one starts)."""
    from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import (
        QueuedRunCoordinatorDaemon,
    )

    return QueuedRunCoordinatorDaemon(interval_seconds)


def instance_storage_tables() -> frozenset[str]:
    """The tables Dagster's SQL storages (runs, event logs, schedules) create in their database,
    for the check of a role's rights on a PostgreSQL instance."""
    from dagster._core.storage.event_log.schema import SqlEventLogStorageMetadata
    from dagster._core.storage.runs.schema import RunStorageSqlMetadata
    from dagster._core.storage.schedules.schema import ScheduleStorageSqlMetadata

    metadata = (RunStorageSqlMetadata, SqlEventLogStorageMetadata, ScheduleStorageSqlMetadata)
    return frozenset(name for tables in metadata for name in tables.tables)


__all__ = [
    "ACTIVE_RUN_STATUSES",
    "IN_PROC_CONFIG",
    "MULTI_PROC_CONFIG",
    "RUN_KEY_TAG",
    "SENSOR_NAME_TAG",
    "CheckStepHealthResult",
    "DagsterEvent",
    "DagsterExecutionInterruptedError",
    "EngineEventData",
    "ErrorSource",
    "ExecuteStepArgs",
    "ExecutionPlan",
    "Executor",
    "ExecutorRequirement",
    "InProcessCodeLocationOrigin",
    "InitExecutorContext",
    "LocalComputeLogManager",
    "ModuleTarget",
    "PlanOrchestrationContext",
    "ReconstructableRepository",
    "RemoteJobOrigin",
    "RemoteRepositoryOrigin",
    "RetryMode",
    "StepDelegatingExecutor",
    "StepHandler",
    "StepHandlerContext",
    "WorkspaceProcessContext",
    "_core_in_process_executor_creation",
    "_core_multiprocess_executor_creation",
    "deserialize_value",
    "execute_run_iterator",
    "execute_step_command_body",
    "instance_storage_tables",
    "multiple_process_executor_requirements",
    "queued_run_coordinator_daemon",
    "serialize_value",
]
