"""The shared warehouse backend: a PostgreSQL database reached through DuckDB's ``postgres``
extension.

Each process keeps one in-memory DuckDB per warehouse URL and access mode (a *base*) that loaded
the extension from the ``duckdb-ext-postgres`` wheel (never from the network), ATTACHed the
database and checked its schema once; every connection is a cursor of that base (DuckDB's own
connection to the same database, sharing the attached catalog) that USEs it, so every storage
module runs its own SQL and gets its polars frames as on a DuckDB file. Loading the extension and
attaching cost far more than the queries of a short connection, which is why the base is kept.

A base is never shared with a forked child (the key holds the process id), is set aside when a
connection on it failed or when PostgreSQL no longer answers it, and is attached again when the
password in the environment changed. The password is read from
``$EVAL_PIPELINES_WAREHOUSE_PASSWORD`` into an in-memory DuckDB secret; it is never part of a
message, a log line or a stored value.
"""

from __future__ import annotations

import hashlib
import os
import threading
import zlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
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
# The same database attached READ_ONLY in the same base, for read-only connections.
READ_CATALOG = "wh_read"
SCHEMA = "public"
CONNECT_TIMEOUT_SECONDS = 10
EMPTY_DATABASE = "the database holds no warehouse yet"
# The first key of every advisory lock this project takes (any constant of its own); the
# second names what is serialised: 0 the migrations, else a CRC of a writer's name.
LOCK_NAMESPACE = 0x6576616C  # "eval"
MIGRATION_LOCK = 0
# The PostgreSQL warehouse of each open connection (a base's cursor), by id(): a writer that
# must take turns (writers_take_turns) opens its lock session to the same database.
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


def _open_base(warehouse: PostgresWarehouse, secret: str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the extension loaded and the password in a secret."""
    conn = duckdb.connect(":memory:")
    try:
        conn.execute(f"SET extension_directory = {_quoted(str(_extension_directory()))}")
        conn.execute("LOAD postgres_scanner")
        conn.execute(
            f"CREATE TEMPORARY SECRET {CATALOG}_login (TYPE postgres, PASSWORD {_quoted(secret)})"
        )
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


def _catalog(read_only: bool) -> str:
    return READ_CATALOG if read_only else CATALOG


def _attach(
    conn: duckdb.DuckDBPyConnection, warehouse: PostgresWarehouse, *, read_only: bool
) -> None:
    """ATTACH the database to the base ``conn`` as the access mode's catalog, and USE it."""
    options = f"TYPE postgres, SECRET {CATALOG}_login" + (", READ_ONLY" if read_only else "")
    try:
        conn.execute(f"ATTACH {_quoted(_conninfo(warehouse))} AS {_catalog(read_only)} ({options})")
        conn.execute(f"USE {_catalog(read_only)}")
    except duckdb.Error as error:
        raise refusal(warehouse, error) from None


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


@dataclass
class _Base:
    """One in-memory DuckDB of this process with the extension loaded, the database attached
    in the access modes used so far (read-only: True/False), and the password it was opened
    with."""

    conn: duckdb.DuckDBPyConnection
    password_digest: str
    attached: set[bool] = field(default_factory=set)
    users: int = 0
    retired: bool = False


_BaseKey = tuple[int, str]  # (process id, warehouse URL)
_BASES: dict[_BaseKey, _Base] = {}
# Re-entrant: attaching read-only to a warehouse that is behind migrates it first.
_BASES_LOCK = threading.RLock()


def _new_lock_in_child() -> None:
    """A forked child gets a lock of its own: another thread of the parent may have held it at
    the fork, and nothing in the child would ever release it (the parent's bases stay in the
    cache untouched, keyed by the parent's process id)."""
    global _BASES_LOCK
    _BASES_LOCK = threading.RLock()


os.register_at_fork(after_in_child=_new_lock_in_child)


def _digest(secret: str) -> str:
    """What tells a changed password apart without keeping it in the cache."""
    return hashlib.sha256(secret.encode()).hexdigest()


def _answers(base: _Base) -> bool:
    """Whether PostgreSQL still answers the base's attached database (a restarted server drops
    every connection the extension holds); one being attached has nothing to probe yet."""
    if not base.attached:
        return True
    probe = base.conn.cursor()
    try:
        probe.execute(f"CALL postgres_execute('{_catalog(min(base.attached))}', 'SELECT 1')")
        return True
    except duckdb.Error:
        return False
    finally:
        probe.close()


def _retire(key: _BaseKey, base: _Base) -> None:
    """Set the base aside: no new connection gets it; the last one still on it closes it.
    Called with ``_BASES_LOCK`` held."""
    if _BASES.get(key) is base:
        del _BASES[key]
    base.retired = True
    if base.users == 0:
        base.conn.close()


def _attach_checked(
    base: _Base, warehouse: PostgresWarehouse, *, read_only: bool, create: bool
) -> None:
    """Attach the database in the access mode and check its schema is this release's
    (migrated if it was behind): once per base and mode."""
    conn = base.conn
    _attach(conn, warehouse, read_only=read_only)
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
            conn.execute("CALL pg_clear_cache()")  # see the tables it created
        else:
            try:
                migrate(conn, postgres_catalog=CATALOG, exclusive=migration_lock(warehouse, conn))
            except duckdb.Error as error:
                raise refusal(warehouse, error) from None
    base.attached.add(read_only)


def _borrow(
    warehouse: PostgresWarehouse, *, read_only: bool, create: bool
) -> tuple[_BaseKey, _Base]:
    """This process's base for ``warehouse``, opened when there is none, the password changed
    or PostgreSQL stopped answering it, and attached (and checked) in the access mode."""
    key = (os.getpid(), warehouse.url)
    secret = password(warehouse)
    digest = _digest(secret)
    with _BASES_LOCK:
        base = _BASES.get(key)
        if base is not None and (base.password_digest != digest or not _answers(base)):
            _retire(key, base)
            base = None
        if base is None:
            base = _Base(conn=_open_base(warehouse, secret), password_digest=digest)
            _BASES[key] = base
        if read_only not in base.attached:
            try:
                _attach_checked(base, warehouse, read_only=read_only, create=create)
            except BaseException:
                _retire(key, base)
                raise
        base.users += 1
        return key, base


def _give_back(key: _BaseKey, base: _Base, *, failed: bool) -> None:
    with _BASES_LOCK:
        base.users -= 1
        if failed or base.retired:
            _retire(key, base)


@contextmanager
def connect_postgres(
    warehouse: PostgresWarehouse, *, read_only: bool, create: bool
) -> Iterator[duckdb.DuckDBPyConnection]:
    """The PostgreSQL warehouse (see :func:`eval_pipelines.storage.warehouse.connect`): a
    cursor of this process's base, closed on leaving; a failure sets the base aside, so the
    next connection attaches afresh rather than reuse a connection that may be broken."""
    key, base = _borrow(warehouse, read_only=read_only, create=create)
    failed = True
    try:
        conn = base.conn.cursor()
        try:
            conn.execute(f"USE {_catalog(read_only)}")
            _OPEN[id(conn)] = warehouse
            yield conn
            failed = False
        finally:
            _OPEN.pop(id(conn), None)
            conn.close()
    finally:
        _give_back(key, base, failed=failed)
