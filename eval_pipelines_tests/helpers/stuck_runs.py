"""Helpers for tests of runs stuck in a step: wait for a condition, find a run's step workers,
terminate an in-process run once its step is under way, wait for a submitted run to be stuck.

Waits are bounded guards against a hang, never measurements."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any


def wait_for(condition: Callable[[], bool], seconds: float = 120.0) -> None:
    """Poll ``condition`` until it holds; fail after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.1)


def killed_and_the_rest_idle(busy: list[int]) -> bool:
    """Whether, of the step workers ``busy`` at the Terminate, some are gone (the stuck step's,
    killed) and every other waits in this process's idle pool (it answered its step meanwhile:
    starting a worker may take a second on a loaded host)."""
    from eval_pipelines.core.workflows import step_worker

    alive = set()
    for pid in busy:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        alive.add(pid)
    return len(alive) < len(busy) and alive <= set(step_worker.idle_pids())


def step_workers(pid: int) -> list[int]:
    """The step workers among a process's descendants."""
    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            if any("step_worker" in part for part in child.cmdline()):
                found.append(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def gone(pid: int) -> bool:
    """The process has exited (or is a zombie waiting to be reaped)."""
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def execute_and_terminate_once_stuck(instance: Any, run: Any) -> tuple[Any, list[int]]:
    """Execute ``run`` in this process and terminate it, as the UI's Terminate button does,
    once a step worker has been busy for a second without a break (the stuck step: the others
    take milliseconds). Returns the run's end state and the pids of the workers busy that long.

    Only those: a worker busy at that moment with a step that then answers goes back to the
    idle pool alive, as it should."""
    from eval_pipelines import runs
    from eval_pipelines.core.workflows import step_worker

    stuck: list[int] = []
    busy_since: dict[int, float] = {}

    def busy_for_a_second() -> bool:
        now = time.monotonic()
        busy = set(step_worker.busy_pids())
        for pid in set(busy_since) - busy:
            del busy_since[pid]
        for pid in busy:
            busy_since.setdefault(pid, now)
        stuck[:] = sorted(pid for pid, since in busy_since.items() if now - since >= 1.0)
        return bool(stuck)

    def terminate_once_stuck() -> None:
        wait_for(busy_for_a_second)
        instance.run_launcher.terminate(run.run_id)

    terminator = threading.Thread(target=terminate_once_stuck)
    terminator.start()
    state = runs.execute_run_here(instance, run)
    terminator.join()
    return state, stuck


def submitted_run_stuck(instance: Any, run_id: str) -> tuple[int, list[int]]:
    """Wait until a submitted run's worker process has a step worker running; returns the run
    worker's pid and its step workers' pids."""
    from eval_pipelines import runs

    worker_pid: int | None = None

    def stuck() -> bool:
        nonlocal worker_pid
        worker_pid = worker_pid or runs.run_worker_pid(instance, run_id)
        return worker_pid is not None and bool(step_workers(worker_pid))

    wait_for(stuck, seconds=240)
    time.sleep(1.0)  # inside the stuck step
    assert worker_pid is not None
    return worker_pid, step_workers(worker_pid)


def interrupt_once_materialized(asset: str) -> Callable[[Any], None]:
    """An ``on_event`` hook for ``runs.execute_run_here`` that sends this process SIGINT (as
    Ctrl-C and the UI's Terminate do) once ``asset``'s materialization is written, so the
    interrupt lands after the step stored its rows and before the step succeeded."""
    import os
    import signal

    import dagster as dg

    def hook(event: dg.DagsterEvent) -> None:
        if (
            event.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION
            and event.asset_key is not None
            and event.asset_key.path[-1] == asset
        ):
            os.kill(os.getpid(), signal.SIGINT)

    return hook
