"""A PostgreSQL session that holds advisory locks: one psycopg2 connection of its own, in
autocommit, so a lock is held from when it is taken until the session ends.

Closing the session releases its locks, whatever happened meanwhile; so does the server, when
the connection dies (a crash of the process, a restart of PostgreSQL). A holder that must not
lose its lock unnoticed asks :meth:`AdvisoryLockSession.alive` before each step it guards.
Used by the warehouse's migrations and writers (:mod:`eval_pipelines.storage.postgres_warehouse`)
and by the team instance's locks (:mod:`eval_pipelines.runs.shared_locks`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg2
import psycopg2.extensions


class AdvisoryLockSession:
    """Advisory locks keyed by one 64-bit or two 32-bit integers, as PostgreSQL takes them."""

    def __init__(self, connection: psycopg2.extensions.connection) -> None:
        self._connection = connection
        self.cursor = connection.cursor()

    def lock(self, *key: int) -> None:
        """Take the lock ``key``, waiting while another session holds it."""
        self.cursor.execute(f"SELECT pg_advisory_lock({_placeholders(key)})", key)

    def try_lock(self, *key: int) -> bool:
        """Take the lock ``key`` if no other session holds it; whether it was taken."""
        self.cursor.execute(f"SELECT pg_try_advisory_lock({_placeholders(key)})", key)
        row = self.cursor.fetchone()
        return bool(row and row[0])

    def alive(self) -> bool:
        """Whether the session still runs on the server (so still holds what it took)."""
        if self._connection.closed:
            return False
        try:
            self.cursor.execute("SELECT 1")
        except psycopg2.Error:
            return False
        return True


def _placeholders(key: tuple[int, ...]) -> str:
    if len(key) not in (1, 2):
        raise ValueError(f"an advisory lock key is one or two integers, not {len(key)}")
    return ", ".join(["%s"] * len(key))


@contextmanager
def advisory_lock_session(
    connect: Mapping[str, Any], refused: Callable[[psycopg2.Error], Exception]
) -> Iterator[AdvisoryLockSession]:
    """A session opened with psycopg2's ``connect`` arguments; a refused connection raises
    ``refused(error)`` (the caller's one line naming its setting)."""
    try:
        connection = psycopg2.connect(**connect)
    except psycopg2.Error as error:
        raise refused(error) from None
    try:
        connection.autocommit = True
        yield AdvisoryLockSession(connection)
    finally:
        connection.close()
