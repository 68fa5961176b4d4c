"""Moving a DuckDB warehouse file into an empty PostgreSQL warehouse, without loss: every table
copied in one transaction, which commits only once each table's rows compare equal both ways."""

from __future__ import annotations

from pathlib import Path

import duckdb

from eval_pipelines.core.errors import InputError
from eval_pipelines.settings import PostgresWarehouse
from eval_pipelines.storage.duckdb_file import connect_file
from eval_pipelines.storage.postgres_warehouse import CATALOG, connect_postgres
from eval_pipelines.storage.schema import WarehouseUnavailable, schema_version
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, transaction

SOURCE = "copied_file"


def _tables(conn: duckdb.DuckDBPyConnection, catalog: str, schema: str) -> list[str]:
    return [
        name
        for (name,) in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = ? "
            "AND table_schema = ? AND table_type = 'BASE TABLE' ORDER BY table_name",
            [catalog, schema],
        ).fetchall()
    ]


def _count(conn: duckdb.DuckDBPyConnection, table: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


def copy_to_postgres(source: Path, target: PostgresWarehouse) -> dict[str, int]:
    """Copy every table of the DuckDB warehouse ``source`` into ``target``, which must hold no
    row yet; returns the rows copied per table. The file is first upgraded to this release's
    schema (as any write would), so both sides have the same tables and columns."""
    if not source.is_file():
        raise InputError("source", str(source), "is not a DuckDB warehouse file")
    with connect_file(
        source, read_only=True, create=False, wait_seconds=CLI_WAIT_SECONDS, on_wait=None
    ):
        pass  # upgrades an older file in place, then lets it go
    with connect_postgres(target, read_only=False, create=True) as conn:
        tables = _tables(conn, CATALOG, "public")
        filled = [table for table in tables if table != "schema_version" and _count(conn, table)]
        if filled:
            raise InputError(
                "to", target.url, f"must be an empty warehouse; {filled[0]} already holds rows"
            )
        conn.execute(f"ATTACH '{_quoted(source)}' AS {SOURCE} (READ_ONLY)")
        try:
            if schema_version(conn) != _file_version(conn):
                raise WarehouseUnavailable(f"{source} and {target.url} differ in schema version")
            copied = {}
            with transaction(conn):
                for table in _tables(conn, SOURCE, "main"):
                    if table == "schema_version":
                        continue
                    conn.execute(
                        f"INSERT INTO {CATALOG}.{table} BY NAME SELECT * FROM {SOURCE}.main.{table}"
                    )
                    copied[table] = _count(conn, f"{SOURCE}.main.{table}")
                _check_same(conn, list(copied))  # inside: a difference keeps nothing
        finally:
            conn.execute(f"DETACH {SOURCE}")
    return copied


def _file_version(conn: duckdb.DuckDBPyConnection) -> int:
    row = conn.execute(f"SELECT max(version) FROM {SOURCE}.main.schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _check_same(conn: duckdb.DuckDBPyConnection, tables: list[str]) -> None:
    """Each table's rows, compared as multisets in both directions, before the commit."""
    for table in tables:
        source, target = f"{SOURCE}.main.{table}", f"{CATALOG}.{table}"
        columns = ", ".join(
            f'"{name}"'
            for (name,) in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_catalog = ? "
                "AND table_schema = 'main' AND table_name = ? ORDER BY ordinal_position",
                [SOURCE, table],
            ).fetchall()
        )
        row = conn.execute(
            f"SELECT (SELECT count(*) FROM (SELECT {columns} FROM {source} EXCEPT ALL "
            f"SELECT {columns} FROM {target})), (SELECT count(*) FROM (SELECT {columns} FROM "
            f"{target} EXCEPT ALL SELECT {columns} FROM {source}))"
        ).fetchone()
        if row != (0, 0) or _count(conn, source) != _count(conn, target):
            raise WarehouseUnavailable(
                f"the copy of table {table} differs from the file ({row} rows apart): "
                "nothing was copied"
            )


def _quoted(path: Path) -> str:
    return str(path.absolute()).replace("'", "''")
