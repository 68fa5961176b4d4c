"""Start queued runs when no Dagster daemon is running: ``python -m eval_pipelines.dispatcher``.

The CLI submits runs to the instance's queue (a client that waits for its run executes it itself
when no daemon runs and a run slot is free: :func:`eval_pipelines.runs.create_inline_run`).
``make dev`` runs the Dagster daemon, which dequeues them; without it, the CLI starts this
process in the background whenever it leaves a run in the queue. It runs
Dagster's own queued-run coordinator (same limits: ``max_concurrent_runs``, the pools), fails
runs whose process died and frees their pool slots, and exits once the queue has been empty
for a while or a real daemon shows up. One dispatcher at a time (a lock file in
``$DAGSTER_HOME``).
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dagster import DagsterInstance

# Long enough that a script starting evaluations one after another keeps one dispatcher (and
# its code server) warm; short enough that nothing lingers after a session.
IDLE_EXIT_SECONDS = 60.0
TICK_SECONDS = 1.0


@contextmanager
def _exclusive(path: Path) -> Iterator[bool]:
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
    with _exclusive(lock) as taken:
        return not taken


def stop_dispatcher(lock: Path) -> bool:
    """Ask a running dispatcher to stop (SIGTERM); returns whether one was running."""
    import signal

    if not lock.exists() or not dispatcher_alive(lock):
        return False
    try:
        os.kill(int(lock.read_text().strip()), signal.SIGTERM)
    except (ValueError, ProcessLookupError):
        return False
    return True


def dispatch(instance: DagsterInstance, *, log: logging.Logger) -> None:
    """Dequeue runs until the queue has been empty for ``IDLE_EXIT_SECONDS``."""
    from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import (
        QueuedRunCoordinatorDaemon,
    )

    from eval_pipelines.runs import daemon_running, queued_runs, reap_dead_runs, workspace

    idle_since: float | None = None
    with workspace(instance) as context, QueuedRunCoordinatorDaemon(TICK_SECONDS) as coordinator:
        while True:
            if daemon_running(instance):
                log.info("a Dagster daemon is running; it dequeues from now on")
                return
            reap_dead_runs(instance)
            for error in coordinator.run_iteration(context):
                if error is not None:
                    log.warning("dequeue error: %s", error)
            if queued_runs(instance):
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > IDLE_EXIT_SECONDS:
                return
            time.sleep(TICK_SECONDS)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s dispatcher %(message)s")
    log = logging.getLogger("eval_pipelines.dispatcher")
    from eval_pipelines.instance import dagster_instance
    from eval_pipelines.runs import dispatcher_lock_path, queued_runs

    instance = dagster_instance()
    lock = dispatcher_lock_path(instance)
    while True:
        with _exclusive(lock) as taken:
            if not taken:
                return  # another dispatcher is at work
            log.info("started (pid %s)", os.getpid())
            dispatch(instance, log=log)
        # A run queued between the last check and the release would wait for the next CLI
        # call: look once more now that the lock is free.
        if not queued_runs(instance):
            log.info("queue empty; exiting")
            return


if __name__ == "__main__":
    main()
