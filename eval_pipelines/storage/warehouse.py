"""The warehouse: a DuckDB file (the default, one writer at a time) or a PostgreSQL database
that several machines write at once; either way a DuckDB connection running the same SQL.

Every table is declared once, in the numbered files of ``storage/migrations``
(:mod:`~eval_pipelines.storage.schema`); a write connection applies the missing ones before it
is handed out, a read-only one to a warehouse that is behind upgrades it first. The backends:
:mod:`~eval_pipelines.storage.duckdb_file` and :mod:`~eval_pipelines.storage.postgres_warehouse`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from eval_pipelines.core.errors import EvalPipelinesError
from eval_pipelines.settings import PostgresWarehouse, WarehouseLocation, parse_warehouse
from eval_pipelines.storage.duckdb_file import (
    COMPANION_SUFFIXES as COMPANION_SUFFIXES,
)
from eval_pipelines.storage.duckdb_file import (
    WarehouseBusy as WarehouseBusy,
)
from eval_pipelines.storage.duckdb_file import (
    check_is_duckdb as check_is_duckdb,
)
from eval_pipelines.storage.duckdb_file import (
    check_writable as check_writable,
)
from eval_pipelines.storage.duckdb_file import connect_file
from eval_pipelines.storage.postgres_warehouse import EMPTY_DATABASE, connect_postgres
from eval_pipelines.storage.postgres_warehouse import writers_take_turns as writers_take_turns
from eval_pipelines.storage.schema import (
    WarehouseUnavailable as WarehouseUnavailable,
)
from eval_pipelines.storage.schema import (
    latest_schema_version as latest_schema_version,
)
from eval_pipelines.storage.schema import (
    migrate as migrate,
)
from eval_pipelines.storage.schema import (
    schema_version as schema_version,
)

# How long a command waits for another process's lock before it reports the warehouse busy.
CLI_WAIT_SECONDS = 15.0
WRITE_WAIT_SECONDS = 120.0


@contextmanager
def connect(
    warehouse: WarehouseLocation | str,
    *,
    read_only: bool = False,
    create: bool = False,
    wait_seconds: float | None = WRITE_WAIT_SECONDS,
    on_wait: Callable[[float], None] | None = None,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the warehouse (a DuckDB file's path, a PostgreSQL location, or the setting's text).

    A DuckDB file is locked per process, and runs and commands keep their connections short, so
    a writer waits: ``wait_seconds=None`` waits for as long as it takes (runs use it, so a slow
    reader never fails an evaluation); ``on_wait`` is told every 30 s how long it has waited.
    A PostgreSQL warehouse takes many writers and never waits here. Raises
    :class:`WarehouseBusy` when the file's lock is still held after ``wait_seconds``,
    :class:`WarehouseUnavailable` when the warehouse is missing (read-only), cannot be written
    or reached, or comes from a newer release. Only ``create=True`` (loading a case) makes a
    new warehouse, so a refused command never leaves an empty one behind.
    """
    location = warehouse if isinstance(warehouse, PostgresWarehouse) else parse_warehouse(warehouse)
    if isinstance(location, Path):
        with connect_file(
            location,
            read_only=read_only,
            create=create,
            wait_seconds=wait_seconds,
            on_wait=on_wait,
        ) as conn:
            yield conn
    else:
        with connect_postgres(location, read_only=read_only, create=create) as conn:
            yield conn


def exists(warehouse: WarehouseLocation) -> bool:
    """Whether the warehouse has been created: the DuckDB file is there, or the PostgreSQL
    database holds its tables."""
    if isinstance(warehouse, Path):
        return warehouse.exists()
    try:
        with connect_postgres(warehouse, read_only=True, create=False):
            return True
    except WarehouseUnavailable as error:
        if EMPTY_DATABASE in str(error):
            return False
        raise


class WarehouseConflict(EvalPipelinesError, RuntimeError):
    """Another writer changed the same rows at the same moment (a shared warehouse): this
    transaction was rolled back, nothing of it was written, and running it again is safe."""


# PostgreSQL's words for a transaction that lost a race with another writer.
_CONFLICT_MARKERS = (
    "could not serialize access",
    "duplicate key value violates unique constraint",
    "deadlock detected",
)


def is_conflict(error: BaseException) -> bool:
    return isinstance(error, duckdb.Error) and any(m in str(error) for m in _CONFLICT_MARKERS)


@contextmanager
def transaction(conn: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """All-or-nothing: a failure rolls back, so bad input or a crash never leaves half a write.
    A write that lost a race with another machine's is refused as :class:`WarehouseConflict`."""
    conn.execute("BEGIN TRANSACTION")
    try:
        yield conn
    except BaseException as error:
        conn.execute("ROLLBACK")
        if is_conflict(error):
            raise _conflict(error) from None
        raise
    try:
        conn.execute("COMMIT")
    except duckdb.Error as error:
        if is_conflict(error):
            raise _conflict(error) from None
        raise


def _conflict(error: BaseException) -> WarehouseConflict:
    first = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return WarehouseConflict(
        "another writer changed the same rows at the same time; nothing of this write was "
        f"kept, run it again ({first})"
    )
