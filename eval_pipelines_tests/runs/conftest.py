"""Fixtures of the machine scenarios: a team's deployment of two machines on the session's
PostgreSQL server, and a server of a test's own for the tests that restart it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipelines.postgres_local.server import LocalPostgres
from eval_pipelines_tests.helpers.machines import TeamDeployment, team_deployment
from eval_pipelines_tests.helpers.postgres import server_outside_pytest


@pytest.fixture
def team(tmp_path: Path, postgres_server: LocalPostgres) -> Iterator[TeamDeployment]:
    """Two team machines (instance and warehouse on the session's server, a shared folder, the
    unseen case loaded) and a single user's machine on the embedded default."""
    with team_deployment(tmp_path, postgres_server) as deployment:
        yield deployment


@pytest.fixture
def own_server() -> Iterator[LocalPostgres]:
    """A server the test may stop and start again."""
    with server_outside_pytest("eval-pipelines-restart-") as server:
        yield server
