"""The warehouse's schema: the numbered files of ``storage/migrations``, applied in order on
either backend.

The ``schema_version`` table records which have been applied; each missing one runs in its own
transaction. The files are written in DuckDB's SQL and run on a PostgreSQL warehouse through
DuckDB's ``postgres`` extension (tables, primary keys and unique constraints are created in
PostgreSQL as declared); :func:`postgres_dialect` is the one step that rewrites a statement
for it.
"""

from __future__ import annotations

import functools
import re
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from importlib import resources

import duckdb

from eval_pipelines.core.errors import EvalPipelinesError


class WarehouseUnavailable(EvalPipelinesError, RuntimeError):
    """The warehouse cannot be opened at all (missing, read-only, unreachable, newer than this
    release)."""


@functools.cache
def _migration_files() -> tuple[tuple[int, str, str], ...]:
    """``(version, name, sql)`` of every migration, in order (read once per process: every
    connection compares the file's version with the latest)."""
    folder = resources.files("eval_pipelines.storage") / "migrations"
    found = []
    for item in folder.iterdir():
        if item.name.endswith(".sql"):
            number, _, name = item.name.removesuffix(".sql").partition("_")
            found.append((int(number), name, item.read_text(encoding="utf-8")))
    found.sort()
    versions = [version for version, _, _ in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations must be numbered 1..n without gaps, found {versions}")
    return tuple(found)


def latest_schema_version() -> int:
    return len(_migration_files())


def _statements(sql: str) -> list[str]:
    """Split a migration on ``;`` at line ends (the files hold no procedural code)."""
    body = "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--"))
    return [part.strip() for part in body.split(";\n") if part.strip().rstrip(";")]


# DuckDB's DOUBLE is PostgreSQL's DOUBLE PRECISION: CREATE TABLE through the extension maps
# it, but ALTER TABLE ... ADD COLUMN hands DuckDB's type name to PostgreSQL, which has no
# DOUBLE (writing DOUBLE PRECISION does not help: DuckDB parses it back to DOUBLE).
_ADDED_DOUBLE = re.compile(
    r"^\s*(ALTER\s+TABLE\s+\w+\s+ADD\s+COLUMN\s+\w+\s+)DOUBLE\s*;?\s*$", re.IGNORECASE
)


def postgres_dialect(statement: str, catalog: str) -> str:
    """``statement`` as it runs on the PostgreSQL database attached as ``catalog``: adding a
    DOUBLE column is sent to PostgreSQL itself (``postgres_execute``, inside the migration's
    transaction) as DOUBLE PRECISION; every other statement runs as written."""
    found = _ADDED_DOUBLE.match(statement)
    if found is None:
        return statement
    native = f"{found.group(1)}DOUBLE PRECISION".replace("'", "''")
    return f"CALL postgres_execute('{catalog}', '{native}')"


def _has_table(conn: duckdb.DuckDBPyConnection, name: str) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM information_schema.tables "
        "WHERE table_catalog = current_database() AND table_schema = current_schema() "
        "AND table_name = ?",
        [name],
    ).fetchone()
    return bool(row and row[0])


def schema_version(conn: duckdb.DuckDBPyConnection) -> int:
    """The applied schema version: 0 for an empty warehouse, 1 for a file written before schema
    versioning (it holds the tables of migration 1 but no ``schema_version`` table)."""
    if _has_table(conn, "schema_version"):
        row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        return int(row[0]) if row and row[0] is not None else 0
    return 1 if _has_table(conn, "cases") else 0


def migrate(
    conn: duckdb.DuckDBPyConnection,
    *,
    postgres_catalog: str | None = None,
    exclusive: AbstractContextManager[object] | None = None,
) -> list[int]:
    """Apply the migrations the warehouse lacks, each in one transaction; returns their versions.

    ``postgres_catalog`` names the attached PostgreSQL database ``conn`` uses, if it is one
    (:func:`postgres_dialect` applies).

    ``exclusive`` is held while the version is read and the migrations applied, so that two
    processes opening a fresh shared warehouse at once apply each migration once (a DuckDB
    file's own lock already does that)."""
    with exclusive if exclusive is not None else nullcontext():
        current = schema_version(conn)
        migrations = _migration_files()
        if current > len(migrations):
            raise WarehouseUnavailable(
                f"the warehouse has schema version {current}, newer than this release knows "
                f"({len(migrations)}): upgrade eval_pipelines"
            )
        applied = []
        for version, name, sql in migrations:
            if version <= current:
                continue
            _apply(conn, version, name, sql, legacy=current == 1, postgres_catalog=postgres_catalog)
            applied.append(version)
        return applied


def _apply(
    conn: duckdb.DuckDBPyConnection,
    version: int,
    name: str,
    sql: str,
    *,
    legacy: bool,
    postgres_catalog: str | None,
) -> None:
    conn.execute("BEGIN TRANSACTION")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, "
            "name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)"
        )
        if legacy and not _recorded(conn, 1):
            conn.execute(
                "INSERT INTO schema_version VALUES (1, 'initial', ?)", [_now()]
            )  # a file from before versioning: its tables are migration 1's
        for statement in _statements(sql):
            if postgres_catalog is not None:
                statement = postgres_dialect(statement, postgres_catalog)
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (?, ?, ?)", [version, name, _now()])
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    if postgres_catalog is not None:
        conn.execute("CALL pg_clear_cache()")  # see the columns postgres_execute added


def _recorded(conn: duckdb.DuckDBPyConnection, version: int) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM schema_version WHERE version = ?", [version]
    ).fetchone()
    return bool(row and row[0])


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)
