"""The code location every run is created from and executed with: the one the UI, the daemon
and the dispatcher serve (the definitions' module and attribute, the working directory)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dagster import DagsterInstance

from eval_pipelines.defs.dagster_private import (
    InProcessCodeLocationOrigin,
    ModuleTarget,
    ReconstructableRepository,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
    WorkspaceProcessContext,
)
from eval_pipelines.defs.run_tags import (
    DEFINITIONS_ATTRIBUTE,
    DEFINITIONS_MODULE,
    LOCATION_NAME,
    SINGLE_REPOSITORY,
)


@contextmanager
def workspace(instance: DagsterInstance) -> Iterator[WorkspaceProcessContext]:
    """The project's code location, loaded as the UI loads it (a code server process)."""
    with WorkspaceProcessContext(instance, _target(), code_server_log_level="WARNING") as context:
        yield context


def _target() -> Any:
    return ModuleTarget(
        module_name=DEFINITIONS_MODULE,
        attribute=None,
        working_directory=os.getcwd(),
        location_name=LOCATION_NAME,
    )


@contextmanager
def served_location(instance: DagsterInstance) -> Iterator[Any]:
    """The served code location loaded in this process (its module, attribute and working
    directory: what the daemon, the dispatcher and the UI load), without a code server. The
    jobs' snapshots are the same in every process (``test_job_snapshots.py``)."""
    served = _served_origin()
    local = InProcessCodeLocationOrigin(
        loadable_target_origin=served.loadable_target_origin, location_name=LOCATION_NAME
    )
    with local.create_location(instance) as location:
        yield location


def served_job_origin(repository: Any, remote_job: Any) -> Any:
    """A run's origin: the job in the served code location (not the in-process one)."""
    return job_origin(remote_job.name, repository.name)


def _served_origin() -> Any:
    """The origin of the code location the daemon, the dispatcher and the UI serve."""
    return _target().create_origins()[0]


def job_origin(job_name: str, repository_name: str = SINGLE_REPOSITORY) -> Any:
    """The job's origin in the served code location.

    Parameters
    ----------
    job_name : str
        A job of the definitions.
    repository_name : str, optional
        The repository holding it; a ``Definitions`` object has one, ``__repository__``.

    Returns
    -------
    RemoteJobOrigin
        What a run records so the UI can re-execute and terminate it.
    """
    return RemoteJobOrigin(RemoteRepositoryOrigin(_served_origin(), repository_name), job_name)


def reconstructable_job(job_name: str) -> Any:
    """The job as a run process reconstructs it: module, attribute and working directory."""
    repository = ReconstructableRepository.for_module(
        DEFINITIONS_MODULE, DEFINITIONS_ATTRIBUTE, working_directory=os.getcwd()
    )
    return repository.get_reconstructable_job(job_name)
