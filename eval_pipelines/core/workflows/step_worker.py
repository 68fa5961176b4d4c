"""Running a step in a worker process with a time limit, so that no step can hang a run.

Python's ``re`` engine holds the GIL while it matches, and a template regex can backtrack
catastrophically (``(a+)+$`` on 40 ``a`` and a ``!``: about 2^40 steps). Matched in a thread
of the run's process, such a pattern freezes the whole process: no other thread runs, no
signal is handled, Terminate cannot stop it. In a worker process it can be killed:

- :func:`run_step` sends ``function(*args)`` to an idle worker (started on demand with
  ``python -m eval_pipelines.core.workflows.step_worker``; up to :data:`MAX_IDLE` are kept
  for later steps) and waits for the answer at most ``seconds``; past that the worker is
  killed and :class:`StepTimedOut` (a :class:`NodeFailed`: that document's failure, not the
  run's) is raised. The time it takes to start a worker and import the function's module is
  not counted.
- While a thread is inside :func:`cancel_on` and the event is set (the run is being
  stopped), a step under way is abandoned the same way and :class:`StepCanceled` is raised:
  not a failure of the document, which is recorded as not reached.
- A worker also caps its own CPU time per step (``RLIMIT_CPU``, twice the limit plus
  :data:`CPU_MARGIN_SECONDS`), so it dies even if the process that started it was killed
  before it could kill the worker.

Arguments and results travel pickled, functions by reference: a function must be importable
at module level, its arguments and result picklable.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from eval_pipelines.core.errors import EvalPipelinesError, InputError
from eval_pipelines.core.workflows.nodes import NodeFailed

DEFAULT_TIME_LIMIT_SECONDS = 30.0  # node key ``time_limit``
MAX_TIME_LIMIT_SECONDS = 3600
MAX_IDLE = 4  # the golden stage runs four cases at a time
START_SECONDS = 120.0  # starting a worker and importing the function's module
POLL_SECONDS = 0.1  # how often a waiting step looks whether it was canceled
CPU_MARGIN_SECONDS = 5.0


def time_limit_of(config: dict[str, Any], where: str) -> float:
    """A node's ``time_limit`` (seconds per step), or :class:`InputError` naming it."""
    value = config["time_limit"]
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= MAX_TIME_LIMIT_SECONDS
    ):
        raise InputError(
            f"{where}.time_limit",
            value,
            f"seconds per step: a number > 0 and at most {MAX_TIME_LIMIT_SECONDS}",
        )
    return float(value)


class StepTimedOut(NodeFailed):
    """The step did not finish within its time limit; its worker was killed.

    Not cached: a busy machine can time out a step that finishes on the next run."""

    def __init__(self, message: str) -> None:
        super().__init__(message, cacheable=False)


class StepCanceled(EvalPipelinesError):
    """The run is being stopped: the step was abandoned and its worker killed."""


_CANCEL: ContextVar[threading.Event | None] = ContextVar("step_cancel", default=None)


@contextlib.contextmanager
def cancel_on(event: threading.Event) -> Iterator[None]:
    """Steps run by this thread inside the block are abandoned once ``event`` is set."""
    token = _CANCEL.set(event)
    try:
        yield
    finally:
        _CANCEL.reset(token)


def cancel_event() -> threading.Event | None:
    """The event of this thread's innermost :func:`cancel_on` (None outside one): a step that
    runs in the thread itself (a ``chat`` node's call) stops when it is set."""
    return _CANCEL.get()


@dataclass
class _Worker:
    process: subprocess.Popen[bytes]
    requests: Connection
    replies: Connection
    modules: set[str] = field(default_factory=set)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.wait()
        for connection in (self.requests, self.replies):
            with contextlib.suppress(OSError):
                connection.close()


_LOCK = threading.Lock()
_IDLE: list[_Worker] = []
_BUSY: set[int] = set()  # pids of workers running a step


def busy_pids() -> list[int]:
    """Process ids of the workers running a step now (for diagnostics and tests)."""
    with _LOCK:
        return sorted(_BUSY)


def idle_pids() -> list[int]:
    """Process ids of the workers waiting for their next step (for diagnostics and tests)."""
    with _LOCK:
        return sorted(worker.process.pid for worker in _IDLE)


REGEX_HINT = (
    "A regular expression that backtracks catastrophically, such as nested quantifiers "
    "like (a+)+, can do this"
)


def run_step(
    function: Callable[..., Any], *args: Any, seconds: float, hint: str = REGEX_HINT
) -> Any:
    """``function(*args)`` in a worker process, within ``seconds``.

    Raises
    ------
    StepTimedOut
        The step did not answer within ``seconds``; its worker was killed.
    StepCanceled
        The thread's :func:`cancel_on` event was set while the step was under way.
    NodeFailed
        The function raised (:class:`NodeFailed` with its own message and ``cacheable``,
        anything else as ``TypeName: message``), or the worker died.

    ``hint`` ends the time-out's message: what can make such a step hang.
    """
    worker = _take()
    pid = worker.process.pid
    with _LOCK:
        _BUSY.add(pid)
    try:
        if function.__module__ not in worker.modules:
            _ask(worker, ("import", function.__module__), START_SECONDS, "starting")
            worker.modules.add(function.__module__)
        reply = _ask(worker, ("call", (function, args, seconds)), seconds, "running", hint)
    except BaseException:
        _drop(worker)
        raise
    finally:
        # Busy until a worker that did not answer is dead and reaped: a caller that sees no
        # busy worker after a cancel must never find it still spinning.
        with _LOCK:
            _BUSY.discard(pid)
    _give_back(worker)
    return reply


def _ask(
    worker: _Worker,
    request: tuple[str, Any],
    seconds: float,
    doing: str,
    hint: str = REGEX_HINT,
) -> Any:
    worker.requests.send(request)
    cancel = _CANCEL.get()
    deadline = time.monotonic() + seconds
    while not worker.replies.poll(min(POLL_SECONDS, max(0.0, deadline - time.monotonic()))):
        if cancel is not None and cancel.is_set():
            raise StepCanceled(f"canceled while {doing} the step")
        if time.monotonic() >= deadline:
            raise StepTimedOut(
                f"timed out after {seconds:g} s ({doing} the step; its worker process was "
                f"stopped). {hint}"
            )
    try:
        outcome, value = worker.replies.recv()
    except (EOFError, OSError):
        code = worker.process.wait()
        raise NodeFailed(
            f"the step's worker process died (exit code {code})", cacheable=False
        ) from None
    if outcome == "failed":  # NodeFailed's message and whether it may be cached
        message, cacheable = value
        raise NodeFailed(message, cacheable=cacheable)
    if outcome != "ok":  # "error": anything else
        raise NodeFailed(value)
    return value


def _take() -> _Worker:
    with _LOCK:
        while _IDLE:
            worker = _IDLE.pop()
            if worker.process.poll() is None:
                return worker
            worker.kill()
    return _start()


def _give_back(worker: _Worker) -> None:
    with _LOCK:
        if len(_IDLE) < MAX_IDLE:
            _IDLE.append(worker)
            return
    worker.kill()


def _drop(worker: _Worker) -> None:
    """A worker whose step timed out, was canceled or failed to answer: never reused."""
    worker.kill()


def _start() -> _Worker:
    # The worker imports this project the way this process does (a source checkout on
    # PYTHONPATH included), not whatever version an installed copy would give.
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    process = subprocess.Popen(
        [sys.executable, "-m", __name__],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=environment,
    )
    assert process.stdin is not None and process.stdout is not None
    requests = Connection(os.dup(process.stdin.fileno()), readable=False)
    replies = Connection(os.dup(process.stdout.fileno()), writable=False)
    process.stdin.close()
    process.stdout.close()
    return _Worker(process, requests, replies)


@atexit.register
def stop_workers() -> None:
    """Kill the idle workers (busy ones are killed by the step that waits for them)."""
    with _LOCK:
        idle = list(_IDLE)
        _IDLE.clear()
    for worker in idle:
        worker.kill()


# --- the worker's side ----------------------------------------------------------------------


def _limit_cpu(seconds: float) -> None:
    """Let the kernel kill this worker should it spin well past the step's limit."""
    try:
        import resource
    except ImportError:  # not POSIX: the parent's kill is the only limit
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    soft = int(used + 2 * seconds + CPU_MARGIN_SECONDS) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _answer(request: tuple[str, Any]) -> tuple[str, Any]:
    kind, payload = request
    if kind == "import":
        importlib.import_module(payload)
        return "ok", None
    function, args, seconds = payload
    _limit_cpu(seconds)
    try:
        return "ok", function(*args)
    except NodeFailed as failure:
        return "failed", (str(failure), failure.cacheable)


def serve() -> None:
    """The worker: answer requests from stdin on a private copy of stdout (whatever the
    step prints goes to stderr) until stdin closes."""
    replies = Connection(os.dup(1), readable=False)
    try:
        os.dup2(2, 1)
    except OSError:  # no stderr (a detached parent): what the step prints is dropped
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    requests = Connection(0, writable=False)
    while True:
        try:
            request = requests.recv()
        except EOFError:
            return
        except Exception as error:  # an argument that cannot be unpickled here
            replies.send(("error", f"{type(error).__name__}: {error}"))
            continue
        try:
            reply = _answer(request)
        except Exception as error:
            reply = ("error", f"{type(error).__name__}: {error}")
        try:
            replies.send(reply)
        except Exception as error:  # a result that cannot be pickled
            replies.send(("error", f"the result cannot be sent back: {error}"))


if __name__ == "__main__":
    serve()
