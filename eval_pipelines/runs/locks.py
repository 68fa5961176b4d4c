"""The lock files in ``$DAGSTER_HOME`` that order the processes starting runs: the start lock
(deciding to start a run and recording it is one step for every process) and the dispatcher's
(one dispatcher at a time). Standard library only."""

from __future__ import annotations

import fcntl
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive(path: Path) -> Iterator[bool]:
    """Hold the lock file exclusively if nobody else does; yields whether it was taken."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))  # who holds it, for stop_dispatcher
        handle.flush()
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        handle.close()


def dispatcher_alive(lock: Path) -> bool:
    """Whether a dispatcher holds the lock right now."""
    with exclusive(lock) as taken:
        return not taken


def stop_dispatcher(lock: Path) -> bool:
    """Ask a running dispatcher to stop (SIGTERM); returns whether one was running."""
    if not lock.exists() or not dispatcher_alive(lock):
        return False
    try:
        os.kill(int(lock.read_text().strip()), signal.SIGTERM)
    except (ValueError, ProcessLookupError):
        return False
    return True


@contextmanager
def start_lock(root_directory: str | Path) -> Iterator[None]:
    """Hold the instance's start lock: deciding to execute a run here and recording it as
    starting is one step for every process, and so is putting a run in the queue.

    Without it two CLIs could both see a free run slot and both start a run, or a run
    submitted by one could be dequeued between another's look at the queue and its run
    record, and more runs than ``max_concurrent_runs`` would run at once. It is held while a
    run is recorded, a fraction of a second.
    """
    path = Path(root_directory) / "eval_pipelines_start.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
