"""The instance's run queue: whether it is used, whether a Dagster daemon dequeues it, how many
runs wait, whether this process may start a run now, and the CLI's dispatcher
(:mod:`eval_pipelines.runs.dispatcher`), started in the background when nobody dequeues."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from dagster import DagsterInstance, DagsterRunStatus, QueuedRunCoordinator, RunsFilter

from eval_pipelines.defs.dagster_private import ACTIVE_RUN_STATUSES
from eval_pipelines.runs.shared_locks import dispatcher_alive_anywhere


def uses_run_queue(instance: DagsterInstance) -> bool:
    return isinstance(instance.run_coordinator, QueuedRunCoordinator)


# The daemon beats every 30 s; Dagster itself calls a daemon healthy for 30 minutes after its
# last beat, far too long to decide whether anyone will dequeue a run submitted now.
DAEMON_SILENCE_SECONDS = 75.0


def daemon_running(instance: DagsterInstance) -> bool:
    """Whether a Dagster daemon dequeued runs for this instance in the last 75 s."""
    beat = instance.get_daemon_heartbeats().get("QUEUED_RUN_COORDINATOR")
    return beat is not None and time.time() - beat.timestamp < DAEMON_SILENCE_SECONDS


def queued_runs(instance: DagsterInstance) -> int:
    """How many runs wait in the instance's queue."""
    return instance.get_runs_count(filters=RunsFilter(statuses=[DagsterRunStatus.QUEUED]))


def dispatch_if_needed(instance: DagsterInstance) -> None:
    """Make sure queued runs will start: without a daemon, start the dispatcher."""
    if uses_run_queue(instance) and not daemon_running(instance) and queued_runs(instance):
        ensure_dispatcher(instance)


def dispatcher_lock_path(instance: DagsterInstance) -> Path:
    return Path(instance.root_directory) / "eval_pipelines_dispatcher.lock"


_spawned: list[subprocess.Popen[bytes]] = []


# The dispatcher's log holds the output of the runs it starts (their code server writes there).
DISPATCHER_LOG_BYTES = 5_000_000


def ensure_dispatcher(instance: DagsterInstance) -> None:
    """Start the dispatcher in the background unless one is already running."""
    # Collect dispatchers this process started that have exited (no zombies while waiting).
    _spawned[:] = [process for process in _spawned if process.poll() is None]
    if dispatcher_alive_anywhere(dispatcher_lock_path(instance)):
        return
    log = Path(instance.root_directory) / "eval_pipelines_dispatcher.log"
    if log.exists() and log.stat().st_size > DISPATCHER_LOG_BYTES:
        log.replace(log.with_suffix(".log.1"))  # keep one previous log, never an endless one
    with open(log, "ab") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "eval_pipelines.runs.dispatcher"],
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(os.environ, DAGSTER_HOME=str(instance.root_directory)),
            start_new_session=True,
        )
    _spawned.append(process)


def run_slot_free(instance: DagsterInstance) -> bool:
    """Whether this process may start a run now without going around the run queue.

    Parameters
    ----------
    instance : DagsterInstance
        The instance whose queue and limits apply.

    Returns
    -------
    bool
        True when nothing dequeues runs in this process's place (no Dagster daemon), nothing
        waits in the queue (those runs come first) and fewer runs are active than
        ``max_concurrent_runs``; always True without a run queue (every run starts at once).
        False whenever tag concurrency limits are configured: only the queue enforces them.
    """
    if not uses_run_queue(instance):
        return True
    if daemon_running(instance) or queued_runs(instance):
        return False
    # As the queue's daemon reads them: the ``concurrency`` settings over the coordinator's.
    config = instance.get_concurrency_config().run_queue_config
    if config is None:
        return True
    if config.tag_concurrency_limits:
        return False
    limit = config.max_concurrent_runs
    active = instance.get_runs_count(filters=RunsFilter(statuses=ACTIVE_RUN_STATUSES))
    return limit == -1 or active < limit
