"""The reference deployment's Dagster instance (``deploy/team/dagster.yaml``) pointed at a test
database: the same file copied into a ``DAGSTER_HOME``, its variables set to the database's
address, role and password."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psycopg2
import pytest

from eval_pipelines_tests.helpers.paths import REPO
from eval_pipelines_tests.helpers.postgres import ScratchDatabase

TEAM_DEPLOYMENT = REPO / "deploy" / "team"
TEAM_DAGSTER_YAML = TEAM_DEPLOYMENT / "dagster.yaml"


def team_environment(database: ScratchDatabase) -> dict[str, str]:
    """The instance's variables of ``deploy/team/team.env.example`` for ``database``."""
    return {
        "DAGSTER_PG_HOST": database.server.host,
        "DAGSTER_PG_PORT": str(database.server.port),
        "DAGSTER_PG_USER": database.user,
        "DAGSTER_PG_PASSWORD": database.password,
        "DAGSTER_PG_DB": database.name,
    }


def use_team_instance(database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The team's ``dagster.yaml`` in this test's ``DAGSTER_HOME`` (set by ``workdir``), its
    variables set for ``database``; returns the home."""
    home = Path(os.environ["DAGSTER_HOME"])
    install_team_config(home)
    for name, value in team_environment(database).items():
        monkeypatch.setenv(name, value)
    return home


def install_team_config(home: Path) -> Path:
    """``deploy/team/dagster.yaml`` copied into ``home``; returns the copy."""
    home.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(TEAM_DAGSTER_YAML, home / "dagster.yaml"))


def instance_tables(database: ScratchDatabase) -> set[str]:
    """The tables of the database's ``public`` schema (Dagster's, once it has started)."""
    connection = psycopg2.connect(
        host=database.server.host,
        port=database.server.port,
        user=database.user,
        password=database.password,
        dbname=database.name,
    )
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
            return {row[0] for row in cursor.fetchall()}
    finally:
        connection.close()
