"""Holding Ctrl-C (SIGINT) while numba's parallel kernels run.

An interrupt that arrives while a ``parallel=True`` kernel is running surfaces on numba's
return path with an exception already set, and the process dies with SIGSEGV instead of
raising ``KeyboardInterrupt`` (seen when a Dagster run is terminated: Dagster sends SIGINT to
the run process). :func:`deferred_interrupts` records the signal instead; callers check
:attr:`Deferred.requested` between kernel calls and stop, and on leaving the block the
original handler receives the signal, so the interrupt still happens, a moment later.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Deferred:
    """Whether an interrupt arrived inside :func:`deferred_interrupts`."""

    def __init__(self) -> None:
        self.frame: FrameType | None = None
        self.requested = False

    def record(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        self.frame = frame


@contextmanager
def deferred_interrupts() -> Iterator[Deferred]:
    """Record SIGINT instead of raising inside the block; deliver it to the previous handler
    on the way out. Outside the main thread (where handlers cannot be set), or when SIGINT is
    ignored, nothing changes."""
    deferred = Deferred()
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    ):
        # An ignored SIGINT (e.g. inherited from a parent that ignores it) stays ignored:
        # recording it would stop the caller's loop early with nothing raised afterwards.
        yield deferred
        return
    previous = signal.signal(signal.SIGINT, deferred.record)
    try:
        yield deferred
    finally:
        signal.signal(signal.SIGINT, previous)
        if deferred.requested:
            if callable(previous):
                previous(signal.SIGINT, deferred.frame)
            elif previous == signal.SIG_DFL:
                raise KeyboardInterrupt
