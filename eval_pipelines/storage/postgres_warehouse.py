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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import psycopg2

from eval_pipelines.settings import WAREHOUSE_ENV, WAREHOUSE_PASSWORD_ENV, PostgresWarehouse
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
# Any constant key: every process migrating this database takes the same session lock.
MIGRATION_LOCK_KEY = 0x6576616C5F706970  # "eval_pip"


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
    text = str(error)
    lowered = text.lower()
    where = f"{WAREHOUSE_ENV}={warehouse.url}"
    if "password authentication failed" in lowered:
        rule = f"PostgreSQL refused the password in ${WAREHOUSE_PASSWORD_ENV} for {warehouse.user}"
    elif "database" in lowered and "does not exist" in lowered:
        rule = f"database {warehouse.database} does not exist: create it (owned by the role)"
    elif "role" in lowered and "does not exist" in lowered:
        rule = f"role {warehouse.user} does not exist on the server"
    elif "permission denied" in lowered:
        rule = (
            f"role {warehouse.user} may not create tables in schema {SCHEMA}: "
            "make it the database's owner or GRANT CREATE ON SCHEMA public"
        )
    elif any(
        marker in lowered
        for marker in ("connection refused", "could not translate host", "timeout", "no route")
    ):
        rule = f"no PostgreSQL server answers at {warehouse.host}:{warehouse.port}"
    else:
        first = next((line.strip() for line in text.splitlines() if line.strip()), text)
        rule = f"the warehouse cannot be opened: {first}"
    return WarehouseUnavailable(f"{where}: {rule}")


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


@contextmanager
def migration_lock(warehouse: PostgresWarehouse, conn: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """PostgreSQL's session advisory lock on its own connection: a second process migrating
    the same database waits until the first has committed, then finds nothing left to apply
    (``conn`` forgets the tables it had cached, so it sees the other's)."""
    try:
        session = psycopg2.connect(
            host=warehouse.host,
            port=warehouse.port,
            dbname=warehouse.database,
            user=warehouse.user,
            password=password(warehouse),
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
        )
    except psycopg2.Error as error:
        raise refusal(warehouse, error) from None
    try:
        session.autocommit = True
        with session.cursor() as cursor:
            cursor.execute("SELECT has_schema_privilege(current_user, %s, 'CREATE')", [SCHEMA])
            row = cursor.fetchone()
            if not (row and row[0]):
                raise refusal(warehouse, PermissionError("permission denied"))
            cursor.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK_KEY])
        conn.execute("CALL pg_clear_cache()")
        yield
    finally:
        session.close()  # ends the session, which releases its advisory lock


@contextmanager
def connect_postgres(
    warehouse: PostgresWarehouse, *, read_only: bool, create: bool
) -> Iterator[duckdb.DuckDBPyConnection]:
    """The PostgreSQL warehouse (see :func:`eval_pipelines.storage.warehouse.connect`)."""
    conn = _attach(warehouse, read_only=read_only)
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
        conn.close()
