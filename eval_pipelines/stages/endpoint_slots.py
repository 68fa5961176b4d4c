"""Calls in flight per endpoint, counted across every thread and process on this machine.

A chat setting's ``concurrency`` limits the calls in flight to one endpoint, not to one batch:
two chat variants of an evaluation are two steps, which the multiprocess and Dask executors run
at once in two processes; a golden run runs four cases at a time in threads; two evaluations
may run at once. So each HTTP request holds one of ``concurrency`` slots of its endpoint while
it is in flight. A slot is an exclusive ``flock`` on a file named by the endpoint's hash, under
``<tmp>/eval_pipelines-endpoint-slots/``: the kernel releases it when its process ends, even by
``kill -9``, so a crash never leaves a slot taken.

Callers naming different limits for one endpoint share the lowest slots: a caller with limit
*c* takes only slots ``0 .. c-1``, so each has at most its own limit in flight and the endpoint
at most the largest limit among them. The slots are per machine: Dask workers on other hosts
each have their own (docs/models.md).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

POLL_SECONDS = 0.01
DIRECTORY_NAME = "eval_pipelines-endpoint-slots"

_REGISTRY_LOCK = threading.Lock()
_REGISTRY: dict[tuple[int, Path], _SlotFiles] = {}


class _SlotFiles:
    """One process's open slot files of one endpoint and which of them its threads hold.

    A ``flock`` belongs to an open file description, which the threads of a process share, so
    the threads take turns through ``held`` and the condition; the lock on the file is what
    other processes see.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.fds: dict[int, int] = {}
        self.held: set[int] = set()
        self.changed = threading.Condition()

    def _fd(self, slot: int) -> int:
        fd = self.fds.get(slot)
        if fd is None:
            fd = os.open(self.directory / f"slot-{slot}.lock", os.O_RDWR | os.O_CREAT, 0o666)
            self.fds[slot] = fd
        return fd

    def try_take(self, limit: int) -> int | None:
        for slot in range(limit):
            if slot in self.held:
                continue
            try:
                fcntl.flock(self._fd(slot), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # another process holds it
            self.held.add(slot)
            return slot
        return None

    def give_back(self, slot: int) -> None:
        fcntl.flock(self.fds[slot], fcntl.LOCK_UN)
        self.held.discard(slot)
        if not self.held:
            # No thread holds a slot: close the files rather than keep up to ``limit``
            # descriptors open per endpoint for the life of the process (a test worker or a
            # notebook calls many endpoints). Reopening costs microseconds, not a call.
            for fd in self.fds.values():
                os.close(fd)
            self.fds.clear()


def slots_directory(endpoint: str, root: Path | None = None) -> Path:
    """Where ``endpoint``'s slot files are (``root`` defaults to the system's temp folder)."""
    base = Path(tempfile.gettempdir()) if root is None else root
    digest = hashlib.sha256(endpoint.encode()).hexdigest()[:24]
    return base / DIRECTORY_NAME / digest


def _slot_files(directory: Path) -> _SlotFiles:
    # Keyed by the process id too: a forked child must open its own files, since a lock taken
    # through an inherited description would be its parent's lock.
    key = (os.getpid(), directory)
    with _REGISTRY_LOCK:
        files = _REGISTRY.get(key)
        if files is None:
            directory.mkdir(parents=True, exist_ok=True)
            files = _REGISTRY[key] = _SlotFiles(directory)
        return files


class EndpointSlots:
    """At most ``limit`` calls in flight to ``endpoint`` from this caller, and at most the
    largest limit of any caller on the machine."""

    def __init__(self, endpoint: str, limit: int, *, root: Path | None = None) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self._files = _slot_files(slots_directory(endpoint, root))

    @contextmanager
    def slot(self, give_up: Callable[[], bool] = lambda: False) -> Iterator[bool]:
        """Hold a slot for the block; yields False, holding none, when ``give_up()`` turns
        true before one is free (a stopped run, an endpoint found down)."""
        files = self._files
        with files.changed:
            while True:
                taken = files.try_take(self.limit)
                if taken is not None or give_up():
                    break
                # A slot freed by this process wakes the waiters at once; one freed by another
                # process is seen at the next poll.
                files.changed.wait(POLL_SECONDS)
        if taken is None:
            yield False
            return
        try:
            yield True
        finally:
            with files.changed:
                files.give_back(taken)
                files.changed.notify()
