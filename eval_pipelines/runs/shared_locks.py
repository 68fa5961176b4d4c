"""Locks every machine of a team's deployment shares: PostgreSQL advisory locks in the
instance's own database (``deploy/team/dagster.yaml``), beside the lock files of
:mod:`eval_pipelines.runs.locks`, which order the processes of one machine only.

Two are needed once machines share one instance: one dispatcher for the whole deployment (two
would both dequeue the same queued run: Dagster's coordinator checks a run is still queued,
then launches it, with nothing in between), and the start lock (deciding that a run slot is
free and recording the run is one step for every process, on every machine). An advisory lock
belongs to its session: a process that dies releases it with its connection. On the local
default instance (SQLite, one machine) they take nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg2

from eval_pipelines.runs.instance_storage import CONNECT_TIMEOUT_SECONDS, postgres_storages
from eval_pipelines.runs.locks import exclusive, start_lock

# Advisory lock keys (64-bit, the project's own; Dagster takes none).
DISPATCHER_LOCK_KEY = 0x6576616C5F6469  # "eval_di"
START_LOCK_KEY = 0x6576616C5F7374  # "eval_st"


@contextmanager
def instance_lock(home: Path, key: int, *, wait: bool) -> Iterator[bool]:
    """Hold advisory lock ``key`` in ``home``'s PostgreSQL storage while in the block (yields
    whether it was taken; with ``wait`` always, once it is); yields True at once for a local
    instance."""
    storages = postgres_storages(home)
    if not storages:
        yield True
        return
    connection = psycopg2.connect(connect_timeout=CONNECT_TIMEOUT_SECONDS, **storages[0].connect)
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            if wait:
                cursor.execute("SELECT pg_advisory_lock(%s)", [key])
                taken = True
            else:
                cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
                taken = bool(cursor.fetchone()[0])
        yield taken
    finally:
        connection.close()  # releases the lock with the session


@contextmanager
def run_start_lock(root_directory: str | Path) -> Iterator[None]:
    """The start lock of this machine's processes, then of every machine's."""
    with start_lock(root_directory), instance_lock(Path(root_directory), START_LOCK_KEY, wait=True):
        yield


@contextmanager
def dispatcher_lock(lock_file: Path) -> Iterator[bool]:
    """The dispatcher's lock: this machine's lock file (it names the pid, for
    :func:`eval_pipelines.runs.locks.stop_dispatcher`) and the deployment's; yields whether
    both were taken."""
    with exclusive(lock_file) as here:
        if not here:
            yield False
            return
        with instance_lock(lock_file.parent, DISPATCHER_LOCK_KEY, wait=False) as everywhere:
            yield everywhere


def dispatcher_alive_anywhere(lock_file: Path) -> bool:
    """Whether a dispatcher runs on this machine or, on a shared instance, on any."""
    with dispatcher_lock(lock_file) as taken:
        return not taken
