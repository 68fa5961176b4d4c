"""The DuckDB warehouse: one file, one writer at a time, a schema that upgrades in place.

Every table is declared once, in the numbered files of ``storage/migrations``; the
``schema_version`` table records which have been applied. A write connection applies the
missing ones (each in its own transaction) before it is handed out; a read-only connection to
a file that is behind upgrades it first, then reopens read-only.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import duckdb

from eval_pipelines.core.errors import EvalPipelinesError, InputError

log = logging.getLogger(__name__)

# How long a command waits for another process's lock before it reports the warehouse busy.
CLI_WAIT_SECONDS = 15.0
# The folder beside a warehouse where chat answers wait until they are stored
# (stages/chat_journal.py).
CHAT_JOURNAL_SUFFIX = ".chat-journal"
# Files and folders kept beside a warehouse that belong to it (the lift settings assignment
# reads, chat answers not yet stored): a new warehouse file must not inherit one left from a
# removed warehouse of the same name.
COMPANION_SUFFIXES = (".lift-settings.json", CHAT_JOURNAL_SUFFIX)
WRITE_WAIT_SECONDS = 120.0
# DuckDB keeps one database instance per file per process, shared by its connections. Opening a
# file on one thread while another thread closes that file's last connection (the instance
# being torn down) fails with "Unique file handle conflict: Cannot attach ..." (DuckDB 1.5.6,
# a golden run's four cases at once): opening and closing are serialised within the process.
_INSTANCE_LOCK = threading.Lock()
# Connections this process has open, per file. DuckDB's lock on a database file is a POSIX
# record lock, which the kernel drops when its process closes *any* descriptor of that file:
# the header check (check_is_duckdb reads it with open()) runs only while this count is 0, or
# another process could open a file this one is writing (seen: a run's commit failing on the
# WAL lock of a warehouse the test process still had open).
_OPEN_CONNECTIONS: dict[Path, int] = {}


class WarehouseBusy(EvalPipelinesError, RuntimeError):
    """Another process holds the DuckDB file's lock."""


class WarehouseUnavailable(EvalPipelinesError, RuntimeError):
    """The warehouse cannot be opened at all (missing, read-only, newer than this release)."""


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


def _has_table(conn: duckdb.DuckDBPyConnection, name: str) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]
    ).fetchone()
    return bool(row and row[0])


def schema_version(conn: duckdb.DuckDBPyConnection) -> int:
    """The applied schema version: 0 for an empty file, 1 for a file written before schema
    versioning (it holds the tables of migration 1 but no ``schema_version`` table)."""
    if _has_table(conn, "schema_version"):
        row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        return int(row[0]) if row and row[0] is not None else 0
    return 1 if _has_table(conn, "cases") else 0


def migrate(conn: duckdb.DuckDBPyConnection) -> list[int]:
    """Apply the migrations this file lacks, each in one transaction; returns their versions."""
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
        conn.execute("BEGIN TRANSACTION")
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, "
                "name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)"
            )
            if current == 1 and not _recorded(conn, 1):
                conn.execute(
                    "INSERT INTO schema_version VALUES (1, 'initial', ?)", [_now()]
                )  # a file from before versioning: its tables are migration 1's
            for statement in _statements(sql):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version VALUES (?, ?, ?)", [version, name, _now()])
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        applied.append(version)
    return applied


def _recorded(conn: duckdb.DuckDBPyConnection, version: int) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM schema_version WHERE version = ?", [version]
    ).fetchone()
    return bool(row and row[0])


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _is_lock_error(error: duckdb.Error) -> bool:
    text = str(error).lower()
    return "lock" in text or "conflicting" in text


def _open(
    path: Path,
    key: Path,
    *,
    read_only: bool,
    wait_seconds: float | None,
    on_wait: Callable[[float], None] | None,
) -> duckdb.DuckDBPyConnection:
    started = time.monotonic()
    delay = 0.05
    next_notice = 10.0
    while True:
        try:
            with _INSTANCE_LOCK:
                if not _OPEN_CONNECTIONS.get(key):
                    check_is_duckdb(path)
                conn = duckdb.connect(str(path), read_only=read_only)
                _OPEN_CONNECTIONS[key] = _OPEN_CONNECTIONS.get(key, 0) + 1
                return conn
        except duckdb.IOException as error:
            if not _is_lock_error(error):
                raise _unavailable(path, error) from None
            waited = time.monotonic() - started
            if wait_seconds is not None and waited > wait_seconds:
                raise WarehouseBusy(
                    f"warehouse {path} is busy (locked by another process for {waited:.0f} s)"
                ) from None
            if waited >= next_notice:
                if on_wait is not None:
                    on_wait(waited)
                else:
                    log.warning(f"waiting {waited:.0f} s for the warehouse lock on {path}")
                next_notice += 30.0
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def _close(conn: duckdb.DuckDBPyConnection, key: Path) -> None:
    """Close ``conn``, opened by :func:`_open` with the same ``key`` (the file's resolved path,
    so the count it keeps is the one the open added to)."""
    with _INSTANCE_LOCK:
        conn.close()
        left = _OPEN_CONNECTIONS.get(key, 1) - 1
        if left > 0:
            _OPEN_CONNECTIONS[key] = left
        else:
            _OPEN_CONNECTIONS.pop(key, None)


def _unavailable(path: Path, error: Exception) -> WarehouseUnavailable:
    text = str(error)
    if "Permission denied" in text or "Read-only file system" in text:
        return WarehouseUnavailable(f"warehouse {path} cannot be written: {text.splitlines()[0]}")
    return WarehouseUnavailable(f"warehouse {path} cannot be opened: {text.splitlines()[0]}")


def check_writable(path: Path) -> None:
    """Refuse early, with one line, when the warehouse or its folder cannot be written (DuckDB
    writes a ``.wal`` file beside the warehouse on every commit)."""
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    for target in (path, folder) if path.exists() else (folder,):
        if not os.access(target, os.W_OK):
            raise WarehouseUnavailable(f"warehouse {path} cannot be written: {target} is read-only")


DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file


def check_is_duckdb(path: Path) -> None:
    """Refuse a path that holds some other kind of file (a records file passed by mistake)."""
    if path.exists() and path.stat().st_size > 0:
        with open(path, "rb") as handle:
            header = handle.read(12)
        if header[8:12] != DUCKDB_MAGIC:
            raise InputError(
                "warehouse", str(path), "is not a DuckDB database file; give the warehouse's path"
            )


@contextmanager
def connect(
    path: Path,
    *,
    read_only: bool = False,
    create: bool = False,
    wait_seconds: float | None = WRITE_WAIT_SECONDS,
    on_wait: Callable[[float], None] | None = None,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the warehouse, waiting while another process holds the lock.

    DuckDB locks the file per process, and runs and commands keep their connections short, so
    waiting is enough. ``wait_seconds=None`` waits for as long as it takes (runs use it, so a
    slow reader never fails an evaluation); ``on_wait`` is told every 30 s how long it has
    waited. Raises :class:`WarehouseBusy` when the lock is still held after ``wait_seconds``,
    :class:`WarehouseUnavailable` when the file is missing (read-only), cannot be written or
    comes from a newer release. Only ``create=True`` (loading a case) makes a new file, so a
    refused command never leaves an empty warehouse behind.
    """
    if path.exists() and path.is_dir():
        raise InputError("warehouse", str(path), "is a directory; give the DuckDB file's path")
    key = path.resolve()  # one name per file for the open-connection count
    if not create and not path.exists():
        raise WarehouseUnavailable(
            f"warehouse {path} does not exist yet: create a case first "
            "(eval-pipelines case create ...)"
        )
    if read_only:
        conn = _open(path, key, read_only=True, wait_seconds=wait_seconds, on_wait=on_wait)
        if schema_version(conn) < latest_schema_version():
            _close(conn, key)
            with connect(path, wait_seconds=wait_seconds, on_wait=on_wait):
                pass  # upgrades the file in place
            conn = _open(path, key, read_only=True, wait_seconds=wait_seconds, on_wait=on_wait)
    else:
        check_writable(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            for suffix in COMPANION_SUFFIXES:
                companion = path.with_name(path.name + suffix)
                if companion.is_dir():
                    shutil.rmtree(companion, ignore_errors=True)
                else:
                    companion.unlink(missing_ok=True)
        conn = _open(path, key, read_only=False, wait_seconds=wait_seconds, on_wait=on_wait)
        try:
            migrate(conn)
        except BaseException:
            _close(conn, key)
            raise
    try:
        yield conn
    finally:
        _close(conn, key)


@contextmanager
def transaction(conn: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """All-or-nothing: a failure rolls back, so bad input or a crash never leaves half a write."""
    conn.execute("BEGIN TRANSACTION")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
