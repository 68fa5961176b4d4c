"""Start queued runs when no Dagster daemon is running:
``python -m eval_pipelines.runs.dispatcher``.

A command that waits for its run executes it itself when no daemon runs and a run slot is
free (:func:`eval_pipelines.runs.launch`); a run submitted to the instance's queue is
started by the Dagster daemon (``make dev``) or, without one, by this process, which the CLI
starts in the background whenever it leaves a run in the queue. It runs Dagster's own queued-run
coordinator (same limits: ``max_concurrent_runs``, the pools), fails runs whose process died
and frees their pool slots, and exits once the queue has been empty for a while or a real
daemon shows up. One dispatcher at a time (a lock file in ``$DAGSTER_HOME``; on a team's
shared instance, also an advisory lock in its database: one for every machine).
"""

from __future__ import annotations

import logging
import os
import time

from dagster import DagsterInstance

from eval_pipelines.defs.dagster_private import queued_run_coordinator_daemon
from eval_pipelines.runs.instance import dagster_instance
from eval_pipelines.runs.locations import workspace
from eval_pipelines.runs.locks import dispatcher_alive, stop_dispatcher
from eval_pipelines.runs.queue import daemon_running, dispatcher_lock_path, queued_runs
from eval_pipelines.runs.reaping import reap_dead_runs
from eval_pipelines.runs.shared_locks import HeldLock, dispatcher_lock

__all__ = ["dispatch", "dispatcher_alive", "main", "stop_dispatcher"]

# Long enough that a script starting evaluations one after another keeps one dispatcher (and
# its code server) warm; short enough that nothing lingers after a session.
IDLE_EXIT_SECONDS = 60.0
TICK_SECONDS = 1.0
LOCK_LOST = (
    "the deployment's dispatcher lock ended with its PostgreSQL session (the server restarted "
    "or the connection dropped): stopped dequeuing and exiting; a waiting command starts a "
    "dispatcher again"
)


def dispatch(instance: DagsterInstance, lock: HeldLock, *, log: logging.Logger) -> bool:
    """Dequeue runs until the queue has been empty for ``IDLE_EXIT_SECONDS``, while ``lock``
    is held; returns False when it was lost."""
    idle_since: float | None = None
    with (
        workspace(instance) as context,
        queued_run_coordinator_daemon(TICK_SECONDS) as coordinator,
    ):
        while True:
            # A restart of the instance's PostgreSQL ends the session holding the deployment's
            # lock: another machine's dispatcher may hold it now, and two would dequeue at once.
            if not lock.still_held():
                log.warning(LOCK_LOST)
                return False
            if daemon_running(instance):
                log.info("a Dagster daemon is running; it dequeues from now on")
                return True
            reap_dead_runs(instance)
            for error in coordinator.run_iteration(context):
                if error is not None:
                    log.warning("dequeue error: %s", error)
            if queued_runs(instance):
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > IDLE_EXIT_SECONDS:
                return True
            time.sleep(TICK_SECONDS)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s dispatcher %(message)s")
    log = logging.getLogger("eval_pipelines.runs.dispatcher")
    instance = dagster_instance()
    lock = dispatcher_lock_path(instance)
    while True:
        with dispatcher_lock(lock) as held:
            if not held.taken:
                return  # another dispatcher is at work
            log.info("started (pid %s)", os.getpid())
            if not dispatch(instance, held, log=log):
                return
        # A run queued between the last check and the release would wait for the next CLI
        # call: look once more now that the lock is free.
        if not queued_runs(instance):
            log.info("queue empty; exiting")
            return


if __name__ == "__main__":
    main()
