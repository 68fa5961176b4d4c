"""Each process keeps one attached PostgreSQL warehouse per URL and access mode, and every
connection is a cursor of it: a marker table in the base's own in-memory DuckDB tells whether
two connections share one. Read-only and read-write connections share it (the database attached
twice, once READ_ONLY). A forked child, a failed connection, a restarted server and a changed
password each get a freshly attached base; threads share the base through cursors of their own."""

from __future__ import annotations

import os
import signal
import threading

import duckdb
import pytest

from eval_pipelines.postgres_local.server import start, stop
from eval_pipelines.settings import WAREHOUSE_PASSWORD_ENV
from eval_pipelines.storage import postgres_warehouse
from eval_pipelines.storage.warehouse import WarehouseUnavailable, connect
from eval_pipelines_tests.helpers.postgres import (
    ScratchDatabase,
    create_database,
    point_warehouse_at,
    server_outside_pytest,
)

MARKER = "memory.main.same_base"


def _mark(database: ScratchDatabase) -> None:
    """Create the warehouse and leave a marker in this process's base."""
    with connect(database.url, create=True) as conn:
        conn.execute(f"CREATE TABLE {MARKER} (x INTEGER)")


def _same_base(database: ScratchDatabase, *, read_only: bool = False) -> bool:
    """Whether the next connection is on the marked base (it still answers PostgreSQL)."""
    with connect(database.url, read_only=read_only) as conn:
        conn.execute("SELECT count(*) FROM cases").fetchall()
        found = conn.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE database_name = 'memory' "
            "AND table_name = 'same_base'"
        ).fetchone()
    return bool(found and found[0])


def test_connections_of_a_process_share_one_base(
    postgres_database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_warehouse_at(postgres_database, monkeypatch)
    _mark(postgres_database)
    assert _same_base(postgres_database)
    assert _same_base(postgres_database)
    # a read-only connection shares the base, its database attached READ_ONLY
    assert _same_base(postgres_database, read_only=True)
    with pytest.raises(duckdb.Error, match="read-only"):
        with connect(postgres_database.url, read_only=True) as conn:
            conn.execute("DELETE FROM cases")
    assert not _same_base(postgres_database)  # set aside after the failure


def test_threads_each_get_a_connection_of_their_own_on_the_same_base(
    postgres_database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_warehouse_at(postgres_database, monkeypatch)
    _mark(postgres_database)
    all_open = threading.Barrier(4)
    seen: list[tuple[int, int]] = []
    failures: list[BaseException] = []

    def work(value: int) -> None:
        try:
            with connect(postgres_database.url) as conn:
                conn.execute("BEGIN TRANSACTION")
                conn.execute(f"INSERT INTO {MARKER} VALUES (?)", [value])
                all_open.wait(timeout=60)
                rows = conn.execute(f"SELECT count(*) FROM {MARKER}").fetchone()
                conn.execute("ROLLBACK")
                seen.append((id(conn), rows[0] if rows else -1))
        except BaseException as error:  # reported below, in the test's thread
            failures.append(error)

    threads = [threading.Thread(target=work, args=(value,)) for value in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures
    # four connections open at once, each sees only its own uncommitted row
    assert len({conn_id for conn_id, _ in seen}) == 4
    assert [rows for _, rows in seen] == [1, 1, 1, 1]
    assert _same_base(postgres_database)


def test_a_forked_child_attaches_its_own_base_and_leaves_the_parents_working(
    postgres_database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_warehouse_at(postgres_database, monkeypatch)
    _mark(postgres_database)
    child = os.fork()
    if child == 0:
        try:
            os._exit(0 if not _same_base(postgres_database) else 3)
        except BaseException:
            os._exit(4)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _same_base(postgres_database)


def test_a_child_forked_while_another_thread_takes_a_base_is_not_blocked(
    postgres_database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_warehouse_at(postgres_database, monkeypatch)
    _mark(postgres_database)
    held, release = threading.Event(), threading.Event()

    def take_a_base_slowly() -> None:
        with postgres_warehouse._BASES_LOCK:  # as a thread attaching would hold it
            held.set()
            release.wait(timeout=120)

    thread = threading.Thread(target=take_a_base_slowly)
    thread.start()
    held.wait(timeout=60)
    child = os.fork()
    if child == 0:
        signal.alarm(60)  # a child waiting for the parent's lock is killed, failing the test
        try:
            os._exit(0 if not _same_base(postgres_database) else 3)
        except BaseException:
            os._exit(4)
    _, status = os.waitpid(child, 0)
    release.set()
    thread.join(timeout=60)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_failed_connection_is_never_reused(
    postgres_database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_warehouse_at(postgres_database, monkeypatch)
    _mark(postgres_database)
    with pytest.raises(RuntimeError, match="inside the block"):
        with connect(postgres_database.url):
            raise RuntimeError("inside the block")
    assert not _same_base(postgres_database)


def test_a_changed_password_is_read_again(
    postgres_database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_warehouse_at(postgres_database, monkeypatch)
    _mark(postgres_database)
    monkeypatch.setenv(WAREHOUSE_PASSWORD_ENV, "not-" + postgres_database.password)
    with pytest.raises(WarehouseUnavailable, match="refused the password"):
        _same_base(postgres_database)
    monkeypatch.setenv(WAREHOUSE_PASSWORD_ENV, postgres_database.password)
    assert not _same_base(postgres_database)
    monkeypatch.delenv(WAREHOUSE_PASSWORD_ENV)
    with pytest.raises(WarehouseUnavailable, match=f"{WAREHOUSE_PASSWORD_ENV} is not set"):
        _same_base(postgres_database)


def test_after_a_server_restart_the_next_connection_attaches_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with server_outside_pytest("eval-pipelines-restart-") as server:
        database = create_database(server, "restarted", own_role=True)
        point_warehouse_at(database, monkeypatch)
        _mark(database)
        assert _same_base(database)
        stop(server.data_dir, mode="immediate")
        start(server.data_dir, port=server.port)
        # no connection fails: the dead base is noticed before it is handed out
        assert not _same_base(database)
