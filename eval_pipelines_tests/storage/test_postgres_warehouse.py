"""The warehouse in PostgreSQL (through DuckDB's ``postgres`` extension): the setting, the
schema and its constraints, migrations from two processes at once, and every refusal at start
in one line naming the setting, with nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg2
import pytest

from eval_pipelines import settings
from eval_pipelines.settings import (
    PostgresWarehouse,
    SettingError,
    parse_warehouse,
    single_writer,
)
from eval_pipelines.storage.warehouse import (
    WarehouseUnavailable,
    connect,
    latest_schema_version,
    schema_version,
)
from eval_pipelines_tests.helpers.postgres import ScratchDatabase, point_warehouse_at, superuser


def _tables(database: ScratchDatabase) -> list[str]:
    with (
        psycopg2.connect(
            host=database.server.host,
            port=database.server.port,
            user=database.user,
            password=database.password,
            dbname=database.name,
        ) as conn,
        conn.cursor() as cursor,
    ):
        cursor.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
            "ORDER BY table_name"
        )
        return [row[0] for row in cursor.fetchall()]


def test_the_setting_takes_a_file_or_a_postgresql_url(tmp_path: Path) -> None:
    assert parse_warehouse(str(tmp_path / "w.duckdb")) == tmp_path / "w.duckdb"
    assert parse_warehouse("data/w.duckdb") == Path("data/w.duckdb").absolute()
    for url in ("postgresql://ana@db.example:6543/evals", "postgres://ana@db.example:6543/evals"):
        assert parse_warehouse(url) == PostgresWarehouse("db.example", 6543, "evals", "ana")
    assert parse_warehouse("postgresql://ana@db/evals").port == 5432
    assert str(parse_warehouse("postgresql://ana@db/evals")) == "postgresql://ana@db:5432/evals"
    assert single_writer(tmp_path / "w.duckdb") and not single_writer(
        parse_warehouse("postgresql://ana@db/evals")
    )


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        (
            "postgresql://ana:hunter2-secret@db/evals",
            "put it in $EVAL_PIPELINES_WAREHOUSE_PASSWORD",
        ),
        ("mysql://ana@db/evals", "or a postgresql://user@host:port/db URL"),
        ("postgresql://db/evals", "names user, host and database"),
        ("postgresql://ana@db/", "names user, host and database"),
        ("postgresql://ana@db:99999/evals", "the port must be a number"),
        ("postgresql://ana@db/evals?sslmode=off", "takes no ?options"),
    ],
)
def test_a_bad_url_is_refused_in_one_line_without_its_password(value: str, rule: str) -> None:
    with pytest.raises(SettingError) as refused:
        parse_warehouse(value)
    message = str(refused.value)
    assert message.startswith("EVAL_PIPELINES_WAREHOUSE=") and rule in message
    assert "\n" not in message and "hunter2" not in message


def test_a_postgresql_warehouse_requires_the_index_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("EVAL_PIPELINES_INDEX_DIR", raising=False)
    warehouse = parse_warehouse("postgresql://ana@db/evals")
    with pytest.raises(SettingError, match=r"^EVAL_PIPELINES_INDEX_DIR=''.*needs \$EVAL_PIPE"):
        settings.index_dir(warehouse)
    assert settings.index_dir(tmp_path / "w.duckdb") == tmp_path / "indexes"
    monkeypatch.setenv("EVAL_PIPELINES_INDEX_DIR", str(tmp_path / "shared"))
    assert settings.index_dir(warehouse) == tmp_path / "shared"


def test_the_schema_and_its_keys_are_created_in_postgresql(
    postgres_database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every primary key and unique constraint a DuckDB file declares exists in PostgreSQL,
    on the same columns (the extension creates them; nothing is left to the dialect step)."""
    point_warehouse_at(postgres_database, monkeypatch)
    with connect(settings.warehouse_location(), create=True) as conn:
        assert schema_version(conn) == latest_schema_version()
        rows = conn.execute(
            "SELECT count(*), count(DISTINCT version) FROM schema_version"
        ).fetchone()
    assert rows == (latest_schema_version(), latest_schema_version())
    with connect(tmp_path / "w.duckdb", create=True) as conn:
        expected = {
            (table, kind, tuple(columns))
            for table, kind, columns in conn.execute(
                "SELECT table_name, constraint_type, constraint_column_names "
                "FROM duckdb_constraints() WHERE constraint_type IN ('PRIMARY KEY', 'UNIQUE')"
            ).fetchall()
        }
    with (
        psycopg2.connect(
            host=postgres_database.server.host,
            port=postgres_database.server.port,
            user=postgres_database.user,
            password=postgres_database.password,
            dbname=postgres_database.name,
        ) as pg,
        pg.cursor() as cursor,
    ):
        cursor.execute(
            "SELECT c.conrelid::regclass::text, "
            "CASE c.contype WHEN 'p' THEN 'PRIMARY KEY' ELSE 'UNIQUE' END, "
            "array_agg(a.attname ORDER BY k.ord) "
            "FROM pg_constraint c CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY k(num, ord) "
            "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.num "
            "WHERE c.contype IN ('p', 'u') AND c.connamespace = 'public'::regnamespace "
            "GROUP BY c.oid, c.conrelid, c.contype"
        )
        found = {(table, kind, tuple(columns)) for table, kind, columns in cursor.fetchall()}
    assert len(expected) >= 20 and found == expected


def test_two_processes_opening_a_fresh_database_apply_each_migration_once(
    postgres_database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    point_warehouse_at(postgres_database, monkeypatch)
    go = tmp_path / "go"
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "eval_pipelines_tests.helpers.warehouse_writers",
                "migrate",
                str(go),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for _ in range(3)
    ]
    go.touch()
    outputs = [writer.communicate(timeout=300) for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0, 0], outputs
    assert [out.strip() for out, _ in outputs] == [str(latest_schema_version())] * 3
    with connect(settings.warehouse_location(), read_only=True) as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM schema_version").fetchall()]
    assert sorted(versions) == list(range(1, latest_schema_version() + 1))


def _refused(monkeypatch: pytest.MonkeyPatch, url: str, password: str | None) -> str:
    monkeypatch.setenv("EVAL_PIPELINES_WAREHOUSE", url)
    if password is None:
        monkeypatch.delenv("EVAL_PIPELINES_WAREHOUSE_PASSWORD", raising=False)
    else:
        monkeypatch.setenv("EVAL_PIPELINES_WAREHOUSE_PASSWORD", password)
    with pytest.raises(WarehouseUnavailable) as refused:
        with connect(settings.warehouse_location(), create=True):
            pass
    message = str(refused.value)
    assert "\n" not in message
    if password:
        assert password not in message
    return message


def test_every_bad_start_is_refused_in_one_line_and_writes_nothing(
    postgres_database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, db = postgres_database.server, postgres_database
    closed = server.url(db.name, user=db.user).replace(str(server.port), "1")
    cases = [
        (
            closed,
            db.password,
            f"EVAL_PIPELINES_WAREHOUSE={closed}: no PostgreSQL server answers at 127.0.0.1:1",
        ),
        (server.url("nosuchdb", user=db.user), db.password, "database nosuchdb does not exist"),
        (db.url, None, "EVAL_PIPELINES_WAREHOUSE_PASSWORD is not set: the password of "),
        (
            db.url,
            "not-the-password",
            "PostgreSQL refused the password in $EVAL_PIPELINES_WAREHOUSE_PASSWORD",
        ),
        (server.url(db.name, user="nosuchrole"), db.password, "password"),
    ]
    for url, password, expected in cases:
        assert expected in _refused(monkeypatch, url, password)
    assert _tables(db) == []


def test_a_role_without_create_is_refused_and_the_owner_passes(
    postgres_database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A login role that may connect but not create in ``public`` is refused before a table
    is made; the database's owner (the least a deployment needs) opens it."""
    owner = postgres_database
    with superuser(owner.server) as admin, admin.cursor() as cursor:
        cursor.execute(f'CREATE ROLE "{owner.name}_reader" LOGIN PASSWORD %s', ["reader-pw-1"])
        cursor.execute(f'GRANT CONNECT ON DATABASE "{owner.name}" TO "{owner.name}_reader"')
    reader = owner.server.url(owner.name, user=f"{owner.name}_reader")
    message = _refused(monkeypatch, reader, "reader-pw-1")
    assert message == (
        f"EVAL_PIPELINES_WAREHOUSE={reader}: role {owner.name}_reader may not create tables in "
        "schema public: make it the database's owner or GRANT CREATE ON SCHEMA public"
    )
    assert _tables(owner) == []
    point_warehouse_at(owner, monkeypatch)
    with connect(settings.warehouse_location(), create=True) as conn:
        assert schema_version(conn) == latest_schema_version()
    assert "schema_version" in _tables(owner)


def test_a_read_of_an_empty_database_creates_nothing(
    postgres_database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_warehouse_at(postgres_database, monkeypatch)
    with pytest.raises(WarehouseUnavailable, match="holds no warehouse yet: create a case first"):
        with connect(settings.warehouse_location(), read_only=True):
            pass
    assert _tables(postgres_database) == []


def test_the_cli_exits_2_for_an_unavailable_postgresql_warehouse(
    postgres_database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "EVAL_PIPELINES_WAREHOUSE": postgres_database.url,
        "EVAL_PIPELINES_WAREHOUSE_PASSWORD": "wrong-password-77",
        "DAGSTER_HOME": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "eval_pipelines.cli.main", "case", "list"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"error: EVAL_PIPELINES_WAREHOUSE={postgres_database.url}: PostgreSQL refused the password"
    ), done.stderr
    assert "wrong-password-77" not in done.stderr + done.stdout


def test_the_chat_journal_of_a_postgresql_warehouse_is_in_the_shared_folder_when_there_is_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rerun on another machine must find a killed worker's answers: a shared folder holds the
    journal; a bucket cannot (appends, locks), so the journal stays on the machine; the
    setting of its own wins over both."""
    warehouse = parse_warehouse("postgresql://evals@db.internal:5433/evals", "test")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVAL_PIPELINES_CHAT_JOURNAL_DIR", raising=False)
    monkeypatch.setenv("EVAL_PIPELINES_SHARED_DIR", str(tmp_path / "shared"))
    expected = tmp_path / "shared" / "chat-journal" / "db.internal-5433-evals"
    assert settings.chat_journal_dir(warehouse) == expected
    monkeypatch.setenv("EVAL_PIPELINES_SHARED_DIR", "s3://bucket/prefix")
    expected = tmp_path / "data" / "chat-journal" / "db.internal-5433-evals"
    assert settings.chat_journal_dir(warehouse) == expected
    monkeypatch.setenv("EVAL_PIPELINES_CHAT_JOURNAL_DIR", str(tmp_path / "own"))
    expected = tmp_path / "own" / "db.internal-5433-evals"
    assert settings.chat_journal_dir(warehouse) == expected
    file_warehouse = tmp_path / "w.duckdb"
    assert settings.chat_journal_dir(file_warehouse) == tmp_path / "w.duckdb.chat-journal"
