"""A run's progress, read from its event log while it goes, for the active progress reporter
(:mod:`eval_pipelines.core.progress`).

One hook for every kind of run (holdout, golden, query, lift) and every way one starts
(executed here, submitted to the queue, ``execute_in_process``): :mod:`eval_pipelines.runs`
calls :func:`follow` with the run's id, and a thread reads the run's new event-log records
every :data:`POLL_SECONDS` (Dagster's step events and the steps' log messages, such as ``text
index of 130,525 records: segment 1 of 2 written``) until the run has finished or the reporter
is closed. Without an active reporter nothing is started.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from eval_pipelines.core import progress

POLL_SECONDS = 0.5


def follow(instance: Any, run_id: str) -> Callable[[], None]:
    """Report the run's progress to the active reporter until it finishes; returns a
    function that stops following after reading what is left (call it once the run has
    ended here). Does nothing without an active reporter."""
    reporter = progress.active()
    if reporter is None:
        return lambda: None
    with _lock:
        # Asked again (a wait loop, after the submit that started the run): one is enough.
        key = (id(reporter), run_id)
        follower = _following.get(key)
        if follower is not None and follower.alive():
            return follower.stop
        follower = _following[key] = _Follower(instance, run_id, reporter)
    reporter.on_close(follower.stop)
    follower.start()
    return follower.stop


_lock = threading.Lock()
_following: dict[tuple[int, str], _Follower] = {}


class _Follower:
    def __init__(self, instance: Any, run_id: str, reporter: progress.Reporter) -> None:
        self._instance = instance
        self._run_id = run_id
        self._reporter = reporter
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"progress-{run_id[:8]}", daemon=True
        )
        self._cursor: str | None = None
        self._planned: list[str] | None = None
        self._mapped: set[str] = set()  # bases of steps mapped over a dynamic output
        # Per mapped base, the dynamic output (step key, output name) it is mapped over, and
        # per dynamic output the mapping keys it has yielded: a base has one step per key.
        self._sources: dict[str, tuple[str, str]] = {}
        self._yielded: dict[tuple[str, str], set[str]] = {}
        self._running: list[str] = []
        self._done: set[str] = set()
        self._said: dict[str, str] = {}  # step key -> its latest log message
        self._ended: str | None = None

    def start(self) -> None:
        self._thread.start()

    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _loop(self) -> None:
        try:
            while True:
                stopping = self._stop.is_set()
                self._read()
                self._tell()
                if self._ended is not None or stopping:
                    return
                self._stop.wait(POLL_SECONDS)
        except Exception:  # noqa: BLE001 - progress is never worth failing a command for
            return

    def _read(self) -> None:
        from dagster import DagsterEventType

        if self._planned is None:
            self._planned = self._plan()
        finished = {
            DagsterEventType.STEP_SUCCESS,
            DagsterEventType.STEP_FAILURE,
            DagsterEventType.STEP_SKIPPED,
        }
        ends = {
            DagsterEventType.RUN_SUCCESS: "succeeded",
            DagsterEventType.RUN_FAILURE: "failed",
            DagsterEventType.RUN_CANCELED: "canceled",
        }
        while True:
            connection = self._instance.get_records_for_run(self._run_id, cursor=self._cursor)
            for record in connection.records:
                entry = record.event_log_entry
                event = entry.dagster_event
                key = entry.step_key
                # Each step's start and each of its messages gets its line, in the order of
                # the log, however quickly the step ran (not only what runs at a poll).
                if event is None:
                    if key and entry.user_message:
                        self._said[key] = entry.user_message
                        if key in self._running:
                            self._tell()
                    continue
                if event.event_type == DagsterEventType.STEP_START and key:
                    if key not in self._running:
                        self._running.append(key)
                    self._tell()
                elif event.event_type == DagsterEventType.STEP_OUTPUT:
                    handle = event.step_output_data.step_output_handle
                    source = (handle.step_key, handle.output_name)
                    if source in self._yielded and handle.mapping_key is not None:
                        self._yielded[source].add(handle.mapping_key)
                elif event.event_type in finished and key:
                    self._done.add(key)
                    if key in self._running:
                        self._running.remove(key)
                elif event.event_type in ends:
                    self._ended = ends[event.event_type]
            self._cursor = connection.cursor
            if not connection.has_more:
                return

    def _plan(self) -> list[str] | None:
        """The run's planned step keys (``name[?]`` for a step mapped over a dynamic
        output: one per item, known once they start), once the run exists."""
        run = self._instance.get_run_by_id(self._run_id)
        if run is None:
            return None
        snapshot = (
            self._instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)
            if run.execution_plan_snapshot_id is not None
            else None
        )
        if run.step_keys_to_execute:
            planned = list(run.step_keys_to_execute)
        elif snapshot is not None:
            planned = [step.key for step in snapshot.steps]
        else:
            return []
        self._mapped = {key.split("[")[0] for key in planned if key.endswith("[?]")}
        if snapshot is not None:
            self._map_sources(snapshot.steps)
        return planned

    def _map_sources(self, steps: Any) -> None:
        """Which dynamic output each mapped step is mapped over (through the mapped steps it
        reads, for a step mapped over another mapped step's output)."""
        dynamic = {
            (step.key, output.name)
            for step in steps
            for output in step.outputs
            if output.properties is not None and output.properties.is_dynamic
        }
        self._yielded = {source: set() for source in dynamic}
        upstream = {
            step.key.split("[")[0]: [
                (handle.step_key, handle.output_name)
                for step_input in step.inputs
                for handle in step_input.upstream_output_handles
            ]
            for step in steps
            if step.key.endswith("[?]")
        }

        def source_of(base: str, seen: frozenset[str]) -> tuple[str, str] | None:
            for handle in upstream.get(base, []):
                if handle in dynamic:
                    return handle
                parent = handle[0].split("[")[0]
                if handle[0].endswith("[?]") and parent not in seen:
                    found = source_of(parent, seen | {parent})
                    if found is not None:
                        return found
            return None

        for base in self._mapped:
            found = source_of(base, frozenset({base}))
            if found is not None:
                self._sources[base] = found

    def _total(self) -> int | None:
        """The steps the run will have run, or None while it is not known: a step mapped
        over a dynamic output has one copy per item, known once the step yielding them has
        finished (before, a total would grow mid-run: 8/14, then 9/15)."""
        if self._planned is None:
            return None
        fixed = [k for k in self._planned if k.split("[")[0] not in self._mapped]
        copies = 0
        for base in self._mapped:
            source = self._sources.get(base)
            if source is None or source[0] not in self._done:
                return None
            copies += len(self._yielded[source])
        return max(len(fixed) + copies, len(self._done))

    def _tell(self) -> None:
        total = self._total()
        # No count before the plan; a count without a total until the total is known.
        done = len(self._done) if self._planned is not None else None
        if self._ended is not None:
            self._reporter.update(self._ended, done, total, "steps")
        elif self._running:
            stage = self._running[-1]
            if len(self._running) > 1:
                stage += f" (+{len(self._running) - 1} running)"
            self._reporter.update(stage, done, total, "steps", self._said.get(self._running[-1]))
        elif done:
            pass  # between two steps, for a moment: the last line stands
        else:
            run = self._instance.get_run_by_id(self._run_id)
            waiting = run is not None and run.status.value == "QUEUED"
            self._reporter.update("queued" if waiting else "starting", done, total, "steps")
