"""The instance role's password (random, from ``DAGSTER_PG_PASSWORD`` only) appears nowhere
after a holdout evaluation and a golden run on the team's instance: not in ``DAGSTER_HOME`` (the
dispatcher's log, run folders), the working folder (the warehouse file included), the
commands' output, nor in any text column of the instance's database (runs and their config and
tags, every event, every log line Dagster stored)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg2
import pytest
from psycopg2 import sql

from eval_pipelines_tests.helpers.golden_demo import seed
from eval_pipelines_tests.helpers.postgres import ScratchDatabase
from eval_pipelines_tests.helpers.team_instance import install_team_config, team_environment

CLI = [sys.executable, "-m", "eval_pipelines.cli.main"]


def _database_text(database: ScratchDatabase) -> list[str]:
    """Every value of every column of every table of the database, as text."""
    connection = psycopg2.connect(
        host=database.server.host,
        port=database.server.port,
        user=database.user,
        password=database.password,
        dbname=database.name,
    )
    values: list[str] = []
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
            tables = [row[0] for row in cursor.fetchall()]
            for table in tables:
                cursor.execute(sql.SQL("SELECT t::text FROM {} AS t").format(sql.Identifier(table)))
                values += [row[0] for row in cursor.fetchall()]
    finally:
        connection.close()
    return values


def test_the_instance_password_is_stored_and_printed_nowhere(
    golden_home: Path,
    small_case: str,
    postgres_database: ScratchDatabase,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from eval_pipelines.runs.dispatcher import stop_dispatcher

    password = postgres_database.password
    home = Path(os.environ["DAGSTER_HOME"])
    install_team_config(home)
    for name, value in team_environment(postgres_database).items():
        monkeypatch.setenv(name, value)
    seed()
    variants = golden_home / "variants.json"
    variants.write_text(json.dumps([{"name": "baseline"}, {"name": "five", "config": {}}]))
    commands = [
        ["eval", "holdout", small_case, "--variants-file", str(variants), "--sample-size", "30",
         "--seed", "9", "--wait", "--json"],
        ["golden", "run", "inv", "--json"],
        ["python-module", "eval_pipelines.runs.instance"],
    ]  # fmt: skip
    output = ""
    try:
        for command in commands:
            argv = (
                [sys.executable, "-m", command[1]]
                if command[0] == "python-module"
                else [*CLI, *command]
            )
            done = subprocess.run(argv, capture_output=True, text=True, env=os.environ, timeout=300)
            assert done.returncode == 0, done.stderr
            output += done.stdout + done.stderr
    finally:
        stop_dispatcher(home / "eval_pipelines_dispatcher.lock")
    assert '"status": "complete"' in output and '"passed": true' in output
    assert password not in output
    stored = [path for path in golden_home.rglob("*") if path.is_file()]
    assert any(path.suffix == ".duckdb" for path in stored)
    for path in stored:
        assert password.encode() not in path.read_bytes(), path
    values = _database_text(postgres_database)
    assert any('"small-e0001-s9"' in value or "small-e0001-s9" in value for value in values)
    assert not [value for value in values if password in value]
