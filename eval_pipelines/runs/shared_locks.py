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
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from eval_pipelines.runs.instance_storage import (
    CONNECT_TIMEOUT_SECONDS,
    connection_refusal,
    postgres_storages,
)
from eval_pipelines.runs.locks import exclusive, start_lock
from eval_pipelines.storage.advisory_locks import AdvisoryLockSession, advisory_lock_session

# Advisory lock keys (64-bit, the project's own; Dagster takes none).
DISPATCHER_LOCK_KEY = 0x6576616C5F6469  # "eval_di"
START_LOCK_KEY = 0x6576616C5F7374  # "eval_st"
WAREHOUSE_RECORD_LOCK_KEY = 0x6576616C5F7768  # "eval_wh"


@dataclass(frozen=True)
class HeldLock:
    """Whether a lock was taken, and the session holding it (None on a local instance, where
    only lock files are taken)."""

    taken: bool
    session: AdvisoryLockSession | None = None

    def still_held(self) -> bool:
        """False once the PostgreSQL session holding the lock has ended (the server restarted,
        the connection dropped): the lock is free again for any machine."""
        return self.taken and (self.session is None or self.session.alive())


@contextmanager
def instance_lock(home: Path, key: int, *, wait: bool) -> Iterator[HeldLock]:
    """Hold advisory lock ``key`` in ``home``'s PostgreSQL storage while in the block (with
    ``wait`` it is always taken, once free); taken at once on a local instance."""
    storages = postgres_storages(home)
    if not storages:
        yield HeldLock(taken=True)
        return
    storage = storages[0]
    with advisory_lock_session(
        {"connect_timeout": CONNECT_TIMEOUT_SECONDS, **storage.connect},
        partial(connection_refusal, storage),
    ) as session:
        if wait:
            session.lock(key)
            taken = True
        else:
            taken = session.try_lock(key)
        yield HeldLock(taken, session)


@contextmanager
def run_start_lock(root_directory: str | Path) -> Iterator[None]:
    """The start lock of this machine's processes, then of every machine's."""
    with start_lock(root_directory), instance_lock(Path(root_directory), START_LOCK_KEY, wait=True):
        yield


@contextmanager
def dispatcher_lock(lock_file: Path) -> Iterator[HeldLock]:
    """The dispatcher's lock: this machine's lock file (it names the pid, for
    :func:`eval_pipelines.runs.locks.stop_dispatcher`) and the deployment's; taken when both
    were."""
    with exclusive(lock_file) as here:
        if not here:
            yield HeldLock(taken=False)
            return
        with instance_lock(lock_file.parent, DISPATCHER_LOCK_KEY, wait=False) as everywhere:
            yield everywhere


def dispatcher_alive_anywhere(lock_file: Path) -> bool:
    """Whether a dispatcher runs on this machine or, on a shared instance, on any."""
    with dispatcher_lock(lock_file) as lock:
        return not lock.taken
