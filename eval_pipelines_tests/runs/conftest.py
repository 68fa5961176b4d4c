"""Fixtures of the machine scenarios: a team's deployment of two machines on the session's
PostgreSQL server, and a server of a test's own for the tests that restart it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipelines.postgres_local.server import LocalPostgres, stop
from eval_pipelines_tests.helpers.machines import TeamDeployment, team_deployment
from eval_pipelines_tests.helpers.postgres import start_server


@pytest.fixture
def team(tmp_path: Path, postgres_server: LocalPostgres) -> Iterator[TeamDeployment]:
    """Two team machines (instance and warehouse on the session's server, a shared folder, the
    unseen case loaded) and a single user's machine on the embedded default."""
    with team_deployment(tmp_path, postgres_server) as deployment:
        yield deployment


@pytest.fixture
def own_server() -> Iterator[LocalPostgres]:
    """A server the test may stop and start again (its folder outside pytest's, as for the
    session's)."""
    folder = Path(tempfile.mkdtemp(prefix="eval-pipelines-restart-"))
    server = start_server(folder)
    try:
        yield server
    finally:
        stop(server.data_dir, mode="immediate")
        shutil.rmtree(folder, ignore_errors=True)
