"""Bad settings of the team's instance (``deploy/team/dagster.yaml``) refused at start, by
``python -m eval_pipelines.runs.instance`` and by the CLI's first use of the instance: one line
naming the ``dagster.yaml`` setting and the rule, exit code 2, nothing written (no table in the
database, nothing beside the user's ``dagster.yaml``, no warehouse). Healthy least-privilege
roles pass: the database's owner, a role with USAGE and CREATE on a schema, and a role that
may only read and write the tables an administrator's first start created."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
import psycopg2
import pytest
import yaml

from eval_pipelines.core.ports import free_port
from eval_pipelines_tests.helpers.cli_calls import cli, refused
from eval_pipelines_tests.helpers.postgres import (
    SUPERUSER_PASSWORD,
    ScratchDatabase,
    create_database,
    superuser,
)
from eval_pipelines_tests.helpers.team_instance import (
    instance_tables,
    use_team_instance,
)

if TYPE_CHECKING:
    from eval_pipelines.postgres_local.server import LocalPostgres

SETTING = "dagster.yaml: storage.postgres.postgres_db"


def _new_role(server: LocalPostgres, *grants: str, database: str = "postgres") -> tuple[str, str]:
    """A login role with a random password, given ``grants`` (run in ``database``)."""
    name, password = "r" + secrets.token_hex(5), secrets.token_urlsafe(12)
    with superuser(server) as conn, conn.cursor() as cursor:
        cursor.execute(f'CREATE ROLE "{name}" LOGIN PASSWORD %s', [password])
    if grants:
        conn = psycopg2.connect(
            host=server.host,
            port=server.port,
            user="postgres",
            password=SUPERUSER_PASSWORD,
            dbname=database,
        )
        conn.autocommit = True
        try:
            with conn.cursor() as cursor:
                for grant in grants:
                    cursor.execute(grant.format(role=name))
        finally:
            conn.close()
    return name, password


def _refused_everywhere(
    home: Path, capsys: pytest.CaptureFixture[str], database: ScratchDatabase, setting: str
) -> str:
    """The same one-line refusal from the instance setup and from a CLI command; returns it."""
    from eval_pipelines.runs.instance import main

    capsys.readouterr()
    assert main() == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, (out, err)
    line = refused(capsys, "eval", "status", "small", "small-e0001-s1")
    assert err == f"error: {line}\n"
    assert line.startswith(f"{home / 'dagster.yaml'}: {setting.split(': ')[1]}"), line
    assert database.password not in line
    assert sorted(p.name for p in home.iterdir()) == ["dagster.yaml"]
    assert not Path(os.environ["EVAL_PIPELINES_WAREHOUSE"]).exists()
    assert instance_tables(database) == set()
    return line


def test_an_unreachable_server_is_refused(
    workdir: Path,
    postgres_database: ScratchDatabase,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:

    home = use_team_instance(postgres_database, monkeypatch)
    port = free_port()
    monkeypatch.setenv("DAGSTER_PG_PORT", str(port))
    line = _refused_everywhere(home, capsys, postgres_database, f"{SETTING}.hostname/port")
    assert f"='127.0.0.1:{port}': no PostgreSQL server answers there" in line


def test_an_unknown_database_is_refused(
    workdir: Path,
    postgres_database: ScratchDatabase,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = use_team_instance(postgres_database, monkeypatch)
    monkeypatch.setenv("DAGSTER_PG_DB", "no_such_db")
    line = _refused_everywhere(home, capsys, postgres_database, f"{SETTING}.db_name")
    assert "db_name='no_such_db': no such database on 127.0.0.1:" in line


def test_a_password_missing_from_the_environment_is_refused(
    workdir: Path,
    postgres_database: ScratchDatabase,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = use_team_instance(postgres_database, monkeypatch)
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", "")
    line = _refused_everywhere(home, capsys, postgres_database, f"{SETTING}.password")
    assert "='env DAGSTER_PG_PASSWORD': the environment variable DAGSTER_PG_PASSWORD is not" in line


def test_a_wrong_password_is_refused(
    workdir: Path,
    postgres_database: ScratchDatabase,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = use_team_instance(postgres_database, monkeypatch)
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", secrets.token_urlsafe(12))
    line = _refused_everywhere(home, capsys, postgres_database, f"{SETTING}.password")
    assert f"PostgreSQL refused the login of '{postgres_database.user}'" in line


def test_a_role_without_create_on_any_schema_is_refused(
    workdir: Path,
    postgres_server: LocalPostgres,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A database the role may connect to but does not own: since PostgreSQL 15 nobody but the
    # owner may create in its public schema.
    database = create_database(postgres_server, "t" + secrets.token_hex(6))
    role, password = _new_role(postgres_server)
    home = use_team_instance(database, monkeypatch)
    monkeypatch.setenv("DAGSTER_PG_USER", role)
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", password)
    line = _refused_everywhere(home, capsys, database, f"{SETTING}.username")
    assert f"username='{role}': the role needs USAGE and CREATE on the schema" in line
    assert f"GRANT USAGE, CREATE ON SCHEMA public TO {role}" in line


def test_a_password_written_in_the_file_is_refused(
    workdir: Path,
    postgres_database: ScratchDatabase,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = use_team_instance(postgres_database, monkeypatch)
    config = home / "dagster.yaml"
    config.write_text(
        config.read_text().replace(
            "password: {env: DAGSTER_PG_PASSWORD}", f"password: {postgres_database.password}"
        )
    )
    line = _refused_everywhere(home, capsys, postgres_database, f"{SETTING}.password")
    assert "a password must come from the environment, never from the file" in line


def test_the_setup_exits_2_as_a_program(
    workdir: Path, postgres_database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_team_instance(postgres_database, monkeypatch)
    monkeypatch.delenv("DAGSTER_PG_PASSWORD")
    setup = [sys.executable, "-m", "eval_pipelines.runs.instance"]
    out = subprocess.run(setup, capture_output=True, text=True, env=os.environ, timeout=120)
    assert (out.returncode, out.stdout, out.stderr.count("\n")) == (2, "", 1), out.stderr
    assert "DAGSTER_PG_PASSWORD is not set" in out.stderr


def _works(capsys: pytest.CaptureFixture[str]) -> None:
    """The setup passes and the CLI's first use opens the instance (no false alarm)."""
    from eval_pipelines.defs.pools import DUCKDB_POOL
    from eval_pipelines.runs.instance import main

    assert main() == 0, capsys.readouterr().err
    assert "(PostgreSQL storage)" in capsys.readouterr().out
    code, _, err = cli(capsys, "eval", "status", "small", "small-e0001-s1")
    assert "dagster.yaml" not in err and code == 2  # refused for the unknown case only
    storage = dg.DagsterInstance.get().event_log_storage
    assert storage.get_concurrency_info(DUCKDB_POOL).slot_count == 1


def test_least_privilege_roles_pass(
    workdir: Path,
    postgres_server: LocalPostgres,
    postgres_database: ScratchDatabase,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The owner of its own database (the fixture's role).
    use_team_instance(postgres_database, monkeypatch)
    _works(capsys)
    # USAGE and CREATE on a schema of a database someone else owns, first on its search_path.
    database = create_database(postgres_server, "t" + secrets.token_hex(6))
    role, password = _new_role(
        postgres_server,
        "CREATE SCHEMA dagster",
        "GRANT USAGE, CREATE ON SCHEMA dagster TO {role}",
        "ALTER ROLE {role} SET search_path = dagster",
        database=database.name,
    )
    monkeypatch.setenv("DAGSTER_PG_DB", database.name)
    monkeypatch.setenv("DAGSTER_PG_USER", role)
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", password)
    _works(capsys)
    # Only reading and writing the tables that role's first start created.
    reader, reader_password = _new_role(
        postgres_server,
        "GRANT USAGE ON SCHEMA dagster TO {role}",
        "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA dagster TO {role}",
        "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA dagster TO {role}",
        "ALTER ROLE {role} SET search_path = dagster",
        database=database.name,
    )
    monkeypatch.setenv("DAGSTER_PG_USER", reader)
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", reader_password)
    _works(capsys)


def test_a_url_setting_is_checked_the_same_way(
    workdir: Path,
    postgres_database: ScratchDatabase,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = use_team_instance(postgres_database, monkeypatch)
    config = home / "dagster.yaml"
    team = yaml.safe_load(config.read_text())
    server, database = postgres_database.server, postgres_database
    address = f"{database.user}:{database.password}@{server.host}:{server.port}/{database.name}"

    def with_url(url: object) -> None:
        team["storage"] = {"postgres": {"postgres_url": url}}
        config.write_text(yaml.safe_dump(team))

    with_url(f"postgresql+psycopg2://{address}")
    setting = "dagster.yaml: storage.postgres.postgres_url"
    line = _refused_everywhere(home, capsys, database, setting)
    assert "a password must come from the environment, never from the file" in line
    # The same URL read from the environment passes.
    with_url({"env": "DAGSTER_PG_URL"})
    monkeypatch.setenv("DAGSTER_PG_URL", f"postgresql+psycopg2://{address}")
    _works(capsys)
