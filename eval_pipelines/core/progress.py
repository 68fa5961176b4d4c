"""Progress of long work as lines on stderr, for a person at a terminal::

    [eval holdout] evidence_index 1/14 steps, 12.4 s: text index of 130,525 records: segm...

The stage, how much of it is done (when known), the seconds since the command started, and
the latest thing the stage said (cut to fit). Nothing here knows Dagster: whoever does the
work feeds :func:`report` (a stage's own callback) or a :class:`Reporter` directly (a run's
events, read by :mod:`eval_pipelines.runs.progress`). With no reporter active, :func:`report`
does nothing.

Shown only to a person: :func:`wanted` is false when stderr is not a terminal and with
``--json``; ``EVAL_PIPELINES_PROGRESS=1`` shows it on any stderr (as if a terminal),
``EVAL_PIPELINES_PROGRESS=0`` never.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TextIO

#: The environment variable that forces progress on (``1``) or off (``0``).
ENV = "EVAL_PIPELINES_PROGRESS"
#: A line unchanged this long is printed again, with the time moved on.
HEARTBEAT_SECONDS = 10.0
#: A command that has said nothing this long says it is working (a quick one says nothing).
QUIET_SECONDS = 3.0
#: The latest message is cut to this many characters.
DETAIL_CHARS = 120

_ON = ("1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")


def wanted(stream: TextIO, *, as_json: bool, environ: Mapping[str, str] | None = None) -> bool:
    """Whether to show progress on ``stream``: never with ``--json``; with ``ENV`` set to 1
    or 0 as it says; otherwise when ``stream`` is a terminal."""
    if as_json:
        return False
    forced = (os.environ if environ is None else environ).get(ENV, "").strip().lower()
    if forced in _ON:
        return True
    if forced in _OFF:
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


class Reporter:
    """Prints a progress line whenever what it would say changes, and again after
    ``heartbeat`` seconds of the same (when :meth:`tick` or :meth:`update` is called).

    Thread-safe: a run's events are read by another thread than the one doing the work.
    """

    def __init__(
        self,
        label: str,
        stream: TextIO,
        *,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: float = HEARTBEAT_SECONDS,
    ) -> None:
        self.label = label
        self.stream = stream
        self._clock = clock
        self._heartbeat = heartbeat
        self._started = clock()
        self._started_quiet = self._started  # since when nothing has been said
        self._lock = threading.Lock()
        self._said: tuple[str, str] | None = None
        self._said_at = 0.0
        self._closers: list[Callable[[], None]] = []
        self._paused = 0

    def update(
        self,
        stage: str,
        done: int | None = None,
        total: int | None = None,
        unit: str = "",
        detail: str | None = None,
    ) -> None:
        """Say where the work is: ``stage``, ``done`` of ``total`` ``unit``, ``detail``."""
        text = stage
        if done is not None:
            text += f" {done}/{total}" if total is not None else f" {done}"
            text += f" {unit}" if unit else ""
        if detail:
            detail = " ".join(detail.split())
            if len(detail) > DETAIL_CHARS:
                detail = detail[: DETAIL_CHARS - 3] + "..."
        with self._lock:
            now = self._clock()
            said = (text, detail or "")
            if self._paused or (said == self._said and now - self._said_at < self._heartbeat):
                return
            self._say(said, now)

    def tick(self) -> None:
        """Print the last line again if it has stood for ``heartbeat`` seconds; ``working``
        if nothing has been said after :data:`QUIET_SECONDS`."""
        with self._lock:
            now = self._clock()
            if self._paused:
                return
            if self._said is None:
                if now - self._started_quiet >= QUIET_SECONDS:
                    self._say(("working", ""), now)
            elif now - self._said_at >= self._heartbeat:
                self._say(self._said, now)

    def _say(self, said: tuple[str, str], now: float) -> None:
        self._said, self._said_at = said, now
        text, detail = said
        line = f"[{self.label}] {text}, {now - self._started:.1f} s"
        if detail:
            line += f": {detail}"
        try:
            print(line, file=self.stream, flush=True)
        except (OSError, ValueError):
            pass  # the terminal went away: progress is never worth failing for

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Print nothing in the block (a question waits for an answer on the terminal)."""
        with self._lock:
            self._paused += 1
        try:
            yield
        finally:
            with self._lock:
                self._paused -= 1
                self._said_at = self._clock()  # the heartbeat counts from the answer
                if self._said is None:
                    self._started_quiet = self._said_at

    def on_close(self, closer: Callable[[], None]) -> None:
        """Call ``closer`` when the reporter is closed (a thread feeding it stops)."""
        with self._lock:
            self._closers.append(closer)

    def close(self) -> None:
        with self._lock:
            closers, self._closers = self._closers, []
        for closer in closers:
            closer()


_active: Reporter | None = None


def active() -> Reporter | None:
    """The reporter of the command running, if progress is shown."""
    return _active


@contextmanager
def reporting(reporter: Reporter | None) -> Iterator[Reporter | None]:
    """Make ``reporter`` the active one (None: progress off) for the block, with a thread
    that repeats a line standing for its heartbeat (a long stage shows the time going on);
    closed after."""
    global _active
    previous, _active = _active, reporter
    stop = threading.Event()
    if reporter is not None:

        def beat() -> None:
            while not stop.wait(1.0):
                reporter.tick()

        threading.Thread(target=beat, name="progress-heartbeat", daemon=True).start()
    try:
        yield reporter
    finally:
        stop.set()
        _active = previous
        if reporter is not None:
            reporter.close()


@contextmanager
def paused() -> Iterator[None]:
    """The active reporter, if any, prints nothing in the block (see
    :meth:`Reporter.paused`)."""
    reporter = _active
    if reporter is None:
        yield
        return
    with reporter.paused():
        yield


def report(
    stage: str,
    done: int | None = None,
    total: int | None = None,
    unit: str = "",
    detail: str | None = None,
) -> None:
    """Tell the active reporter, if any, where the work is (see :meth:`Reporter.update`)."""
    reporter = _active
    if reporter is not None:
        reporter.update(stage, done, total, unit, detail)
