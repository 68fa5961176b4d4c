"""The default warehouse backend: one DuckDB file, one writer process at a time.

DuckDB locks the file per process, and runs and commands keep their connections short, so a
writer waits for the lock instead of failing.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from eval_pipelines.core.errors import EvalPipelinesError, InputError
from eval_pipelines.settings import CHAT_JOURNAL_SUFFIX
from eval_pipelines.storage.schema import (
    WarehouseUnavailable,
    latest_schema_version,
    migrate,
    schema_version,
)

log = logging.getLogger(__name__)

# Files and folders kept beside a warehouse that belong to it (the lift settings assignment
# reads, chat answers not yet stored): a new warehouse file must not inherit one left from a
# removed warehouse of the same name.
COMPANION_SUFFIXES = (".lift-settings.json", CHAT_JOURNAL_SUFFIX)
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
DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file


class WarehouseBusy(EvalPipelinesError, RuntimeError):
    """Another process holds the DuckDB file's lock."""


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


def check_is_duckdb(path: Path) -> None:
    """Refuse a path that holds some other kind of file (a records file passed by mistake)."""
    if path.exists() and path.stat().st_size > 0:
        with open(path, "rb") as handle:
            header = handle.read(12)
        if header[8:12] != DUCKDB_MAGIC:
            raise InputError(
                "warehouse", str(path), "is not a DuckDB database file; give the warehouse's path"
            )


def _forget_companions(path: Path) -> None:
    for suffix in COMPANION_SUFFIXES:
        companion = path.with_name(path.name + suffix)
        if companion.is_dir():
            shutil.rmtree(companion, ignore_errors=True)
        else:
            companion.unlink(missing_ok=True)


@contextmanager
def connect_file(
    path: Path,
    *,
    read_only: bool,
    create: bool,
    wait_seconds: float | None,
    on_wait: Callable[[float], None] | None,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """The DuckDB file at ``path`` (see :func:`eval_pipelines.storage.warehouse.connect`)."""
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
            with connect_file(
                path, read_only=False, create=False, wait_seconds=wait_seconds, on_wait=on_wait
            ):
                pass  # upgrades the file in place
            conn = _open(path, key, read_only=True, wait_seconds=wait_seconds, on_wait=on_wait)
    else:
        check_writable(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            _forget_companions(path)
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
