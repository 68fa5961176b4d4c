"""The shared warehouse backend: a PostgreSQL database reached through DuckDB's ``postgres``
extension.

Each connection is an in-memory DuckDB that loads the extension from the ``duckdb-ext-postgres``
wheel (never from the network), ATTACHes the database and USEs it, so every storage module runs
its own SQL and gets its polars frames as on a DuckDB file. The password is read from
``$EVAL_PIPELINES_WAREHOUSE_PASSWORD`` into an in-memory DuckDB secret; it is never part of a
message, a log line or a stored value.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import duckdb

from eval_pipelines.settings import WAREHOUSE_ENV, WAREHOUSE_PASSWORD_ENV, PostgresWarehouse
from eval_pipelines.storage.advisory_locks import AdvisoryLockSession, advisory_lock_session
from eval_pipelines.storage.postgres_failures import PostgresFailure, first_line, postgres_failure
from eval_pipelines.storage.schema import (
    WarehouseUnavailable,
    latest_schema_version,
    migrate,
    schema_version,
)

CATALOG = "wh"
SCHEMA = "public"
CONNECT_TIMEOUT_SECONDS = 10
EMPTY_DATABASE = "the database holds no warehouse yet"
# The first key of every advisory lock this project takes (any constant of its own); the
# second names what is serialised: 0 the migrations, else a CRC of a writer's name.
LOCK_NAMESPACE = 0x6576616C  # "eval"
MIGRATION_LOCK = 0
# The PostgreSQL warehouse of each open connection, by id(): a writer that must take turns
# (writers_take_turns) opens its lock session to the same database.
_OPEN: dict[int, PostgresWarehouse] = {}


def _extension_directory() -> Path:
    """The ``duckdb-ext-postgres`` wheel's folder of extensions (what DuckDB's
    ``extension_directory`` expects: ``v<version>/<platform>/<name>.duckdb_extension`` below)."""
    return Path(duckdb.__file__).resolve().parent.parent / "duckdb_ext" / "extensions"


def password(warehouse: PostgresWarehouse) -> str:
    value = os.environ.get(WAREHOUSE_PASSWORD_ENV)
    if not value:
        raise WarehouseUnavailable(
            f"{WAREHOUSE_PASSWORD_ENV} is not set: the password of {WAREHOUSE_ENV}="
            f"{warehouse.url} goes in that environment variable"
        )
    return value


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _conninfo(warehouse: PostgresWarehouse) -> str:
    """libpq's key=value string, without the password (the secret carries it)."""
    fields = {
        "host": warehouse.host,
        "port": str(warehouse.port),
        "dbname": warehouse.database,
        "user": warehouse.user,
        "connect_timeout": str(CONNECT_TIMEOUT_SECONDS),
    }
    return " ".join(f"{key}={_libpq_quoted(value)}" for key, value in fields.items())


def _libpq_quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def refusal(warehouse: PostgresWarehouse, error: Exception) -> WarehouseUnavailable:
    """One line naming the setting and what to fix, from libpq's or PostgreSQL's message (which
    never holds the password)."""
    failure = postgres_failure(error)
    if failure is PostgresFailure.LOGIN_REFUSED:
        rule = f"PostgreSQL refused the password in ${WAREHOUSE_PASSWORD_ENV} for {warehouse.user}"
    elif failure is PostgresFailure.NO_DATABASE:
        rule = f"database {warehouse.database} does not exist: create it (owned by the role)"
    elif failure is PostgresFailure.NO_ROLE:
        rule = f"role {warehouse.user} does not exist on the server"
    elif failure is PostgresFailure.PERMISSION_DENIED:
        rule = (
            f"role {warehouse.user} may not create tables in schema {SCHEMA}: "
            "make it the database's owner or GRANT CREATE ON SCHEMA public"
        )
    elif failure is PostgresFailure.UNREACHABLE:
        rule = f"no PostgreSQL server answers at {warehouse.host}:{warehouse.port}"
    else:
        rule = f"the warehouse cannot be opened: {first_line(error)}"
    return WarehouseUnavailable(f"{WAREHOUSE_ENV}={warehouse.url}: {rule}")


def _attach(warehouse: PostgresWarehouse, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    secret = password(warehouse)
    conn = duckdb.connect(":memory:")
    try:
        conn.execute(f"SET extension_directory = {_quoted(str(_extension_directory()))}")
        conn.execute("LOAD postgres_scanner")
        conn.execute(
            f"CREATE TEMPORARY SECRET {CATALOG}_login (TYPE postgres, PASSWORD {_quoted(secret)})"
        )
        options = f"TYPE postgres, SECRET {CATALOG}_login" + (", READ_ONLY" if read_only else "")
        conn.execute(f"ATTACH {_quoted(_conninfo(warehouse))} AS {CATALOG} ({options})")
        conn.execute(f"USE {CATALOG}")
    except duckdb.Error as error:
        conn.close()
        raise refusal(warehouse, error) from None
    return conn


def _lock_session(warehouse: PostgresWarehouse) -> AbstractContextManager[AdvisoryLockSession]:
    return advisory_lock_session(
        {
            "host": warehouse.host,
            "port": warehouse.port,
            "dbname": warehouse.database,
            "user": warehouse.user,
            "password": password(warehouse),
            "connect_timeout": CONNECT_TIMEOUT_SECONDS,
        },
        lambda error: refusal(warehouse, error),
    )


@contextmanager
def migration_lock(warehouse: PostgresWarehouse, conn: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """The migrations' advisory lock: a second process migrating the same database waits
    until the first has committed, then finds nothing left to apply (``conn`` forgets the
    tables it had cached, so it sees the other's)."""
    with _lock_session(warehouse) as session:
        session.cursor.execute("SELECT has_schema_privilege(current_user, %s, 'CREATE')", [SCHEMA])
        row = session.cursor.fetchone()
        if not (row and row[0]):
            raise refusal(warehouse, PermissionError("permission denied"))
        session.lock(LOCK_NAMESPACE, MIGRATION_LOCK)
        conn.execute("CALL pg_clear_cache()")
        yield


@contextmanager
def writers_take_turns(conn: duckdb.DuckDBPyConnection, name: str) -> Iterator[None]:
    """Hold the advisory lock ``name`` while the block runs, when ``conn`` is a PostgreSQL
    warehouse's. Enter it before the block's transaction: PostgreSQL (REPEATABLE READ, as
    DuckDB's extension opens it) takes the transaction's snapshot at its first statement, so
    a writer that waited then sees everything the previous one committed."""
    warehouse = _OPEN.get(id(conn))
    if warehouse is None:
        yield  # a DuckDB file has one writer at a time already
        return
    key = zlib.crc32(name.encode()) - 2**31  # PostgreSQL's int4
    with _lock_session(warehouse) as session:
        session.lock(LOCK_NAMESPACE, key)
        yield


@contextmanager
def connect_postgres(
    warehouse: PostgresWarehouse, *, read_only: bool, create: bool
) -> Iterator[duckdb.DuckDBPyConnection]:
    """The PostgreSQL warehouse (see :func:`eval_pipelines.storage.warehouse.connect`)."""
    conn = _attach(warehouse, read_only=read_only)
    _OPEN[id(conn)] = warehouse
    try:
        found = schema_version(conn)
        if found == 0 and not create:
            raise WarehouseUnavailable(
                f"{WAREHOUSE_ENV}={warehouse.url}: {EMPTY_DATABASE}: "
                "create a case first (eval-pipelines case create ...)"
            )
        if found < latest_schema_version():
            if read_only:
                with connect_postgres(warehouse, read_only=False, create=create):
                    pass  # upgrades the database in place
            else:
                try:
                    migrate(
                        conn, postgres_catalog=CATALOG, exclusive=migration_lock(warehouse, conn)
                    )
                except duckdb.Error as error:
                    raise refusal(warehouse, error) from None
        yield conn
    finally:
        _OPEN.pop(id(conn), None)
        conn.close()
