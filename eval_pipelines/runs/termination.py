"""A run executing in this process, interrupted when someone asks to terminate it (the UI's
Terminate button)."""

from __future__ import annotations

import os
import signal
import threading

from dagster import DagsterInstance, DagsterRunStatus

# How often a run executing here looks whether the UI asked to terminate it.
TERMINATION_POLL_SECONDS = 1.0


class TerminationWatcher:
    """Interrupt this process's execution of a run when someone asks to terminate it.

    The UI's Terminate button (and ``instance.run_launcher.terminate``) marks the run
    ``CANCELING`` and then asks the run's code server to stop it; a run executed here has no
    code server, so this thread polls the run's status and, once it reads canceling, sends
    this process SIGINT: what Dagster's run workers do on a termination request. Signals
    reach the main thread only, and Dagster turns them into a stop of the run there only:
    a run executed by another thread is not watched.
    """

    def __init__(self, instance: DagsterInstance, run_id: str) -> None:
        self._instance = instance
        self._run_id = run_id
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._interrupted_here = False
        self.terminated = False
        self._thread = threading.Thread(
            target=self._watch, name=f"termination-watcher-{run_id[:8]}", daemon=True
        )

    def __enter__(self) -> TerminationWatcher:
        if threading.current_thread() is threading.main_thread():
            self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def interrupted_here(self) -> bool:
        """Record that this process was interrupted (it cancels the run itself); returns
        whether that was news, i.e. not the watcher's own interrupt."""
        with self._lock:
            news = not self.terminated and not self._interrupted_here
            self._interrupted_here = True
            return news

    def _watch(self) -> None:
        while not self._stop.wait(TERMINATION_POLL_SECONDS):
            run = self._instance.get_run_by_id(self._run_id)
            if run is None or run.status != DagsterRunStatus.CANCELING:
                continue
            with self._lock:
                if self._interrupted_here or self.terminated:
                    return
                self.terminated = True
            os.kill(os.getpid(), signal.SIGINT)
            return
