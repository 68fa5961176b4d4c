"""Calls to an OpenAI-compatible chat endpoint, through the ``openai`` SDK, with the DuckDB cache.

:func:`run_chat_calls` answers a list of requests: those already in the warehouse's
``chat_calls`` cache are read from it (they cost nothing), the rest are called with at most
``settings.concurrency`` in flight to the endpoint (a thread pool, and a slot per request
shared with every other batch on the machine calling the same endpoint:
:mod:`~eval_pipelines.stages.endpoint_slots`), and each answer is appended to the batch's
journal (:mod:`~eval_pipelines.stages.chat_journal`) before its thread sends another request, so
a run killed halfway and started again pays again only for the calls that were in flight (at
most ``concurrency``): the next batch on the warehouse loads a dead batch's journal before it
looks up the cache. One writer thread stores the journaled answers in the cache behind the
calls, every answer that arrived meanwhile in one short connection (the warehouse lock is held
only while writing), and the batch ends once all are stored. A call that still fails after its
retries is returned as a failure with its reason; one row never raises.

Retries are ours, around the SDK with ``max_retries=0``: the SDK's own retry does honour
``Retry-After`` (a test checks it against the stand-in server), but it also retries a refused
connection with backoff (an endpoint that is down would take the whole backoff for every
row) and does not say how many retries a call took. Here a 408, 409, 429, 5xx, a timeout or a
dropped connection is retried up to ``settings.max_retries`` times, waiting the server's
``Retry-After`` (or ``retry-after-ms``) when it sends one of at most two minutes, else
``min(0.5 * 2**attempt, 8)`` seconds less up to 25 % jitter; a refused connection fails at
once and marks the endpoint down, so every row not yet started fails fast with that reason.

The API key is read from the environment variable the settings name and handed to the SDK;
it is not part of any request key, cached row, result, reason or log line.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import queue
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipelines.core.chat.cost import call_cost
from eval_pipelines.core.chat.request import ChatRequest
from eval_pipelines.core.chat.settings import ChatSettings, api_key
from eval_pipelines.core.results import JsonResult
from eval_pipelines.settings import WarehouseLocation
from eval_pipelines.stages.chat_journal import ChatJournal, load_left_journals
from eval_pipelines.stages.endpoint_slots import EndpointSlots
from eval_pipelines.storage.chat_cache import CachedCall, cached_calls, store_calls
from eval_pipelines.storage.warehouse import connect

if TYPE_CHECKING:
    # Imported where a call is made: the SDK takes about a second to import, which every run,
    # CLI command and code server paid for through the definitions, chat variant or not.
    import httpx2
    import openai

log = logging.getLogger(__name__)

INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
MAX_RETRY_AFTER = 120.0
RETRY_STATUSES = frozenset({408, 409, 429})
WRITE_GAP_SECONDS = 0.25  # the writer's pause between two writes to the warehouse
NO_KEY = "no-key"  # the SDK needs some key; endpoints without auth ignore it


@dataclasses.dataclass(frozen=True)
class ChatAnswer(JsonResult):
    """The answer to one request: the model's text and the tokens the endpoint reported, or
    ``failure`` (why there is no answer)."""

    key: str
    trial: int
    content: str | None
    input_tokens: int
    output_tokens: int
    from_cache: bool
    retries: int = 0
    failure: str | None = None


@dataclasses.dataclass(frozen=True)
class ChatCounters(JsonResult):
    """What a batch of calls did: ``requests_sent`` counts every HTTP request (retries
    included), ``answered`` the calls the endpoint answered now, ``from_cache`` the answers
    read from the cache; tokens and ``cost`` are those of the calls answered now (``cost`` is
    None when the price table has no price for the model)."""

    requests: int
    answered: int
    from_cache: int
    failed: int
    requests_sent: int
    retries: int
    input_tokens: int
    output_tokens: int
    cost: float | None


@dataclasses.dataclass(frozen=True)
class ChatCallsResult(JsonResult):
    answers: tuple[ChatAnswer, ...]
    counters: ChatCounters
    waits: tuple[float, ...] = ()


@dataclasses.dataclass(frozen=True)
class ChatProgress:
    """Where a batch of calls is: ``done`` of ``total`` distinct calls answered or failed
    (``from_cache`` of them read from the cache), the tokens of the calls answered so far
    (cache included) and ``seconds`` since the batch started."""

    done: int
    total: int
    from_cache: int
    failed: int
    tokens: int
    seconds: float

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the pace of the calls made so far (None before one was made)."""
        made = self.done - self.from_cache
        if made <= 0 or self.seconds <= 0:
            return None
        return (self.total - self.done) * self.seconds / made


@dataclasses.dataclass
class _Outcome:
    answer: ChatAnswer
    sent: int
    waits: list[float]


class _CacheWriter:
    """Journals each answer at once and stores the journaled answers in the warehouse's cache
    on one thread, in batches, behind the calls.

    :meth:`store` appends the answer to the batch's journal
    (:mod:`~eval_pipelines.stages.chat_journal`: one write, no warehouse lock) and hands it to
    the thread, which stores every answer handed over since its last write in one connection,
    and pauses ``WRITE_GAP_SECONDS`` after each write. The connection is opened per write, not
    held for the batch: DuckDB lets one process at a time hold the file, and readers and
    writers in other processes wait for it (the pause lets them in). :meth:`close` waits until
    every answer is stored, then deletes the journal; if a write failed, it keeps the journal
    (the next batch on the warehouse loads it) and raises what the write raised.
    """

    def __init__(self, warehouse: WarehouseLocation) -> None:
        self._warehouse = warehouse
        self._journal = ChatJournal(warehouse)
        self._handed: queue.SimpleQueue[CachedCall | None] = queue.SimpleQueue()
        self._failure: BaseException | None = None
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._write, name="chat-cache-writer", daemon=True)
        self._thread.start()

    def store(self, call: CachedCall) -> None:
        self._journal.append(call)
        self._handed.put(call)

    def close(self) -> None:
        """Stop the thread once the answers already handed over are stored."""
        self._closing.set()
        self._handed.put(None)
        self._thread.join()
        if self._failure is not None:
            self._journal.leave()
            raise self._failure
        self._journal.remove()

    def _write(self) -> None:
        closing = False
        while not closing:
            first = self._handed.get()
            if first is None:
                return
            batch = [first]
            while True:
                try:
                    item = self._handed.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    closing = True
                    break
                batch.append(item)
            if self._failure is not None:
                continue  # journaled: the next batch stores them
            try:
                with connect(self._warehouse, wait_seconds=None) as conn:
                    store_calls(conn, batch)
            except BaseException as error:
                self._failure = error
            # The answers are safe in the journal: leave the warehouse free for a moment, for
            # other processes to read or write it, rather than take it back at once.
            self._closing.wait(WRITE_GAP_SECONDS)


def retry_after_seconds(headers: Mapping[str, str] | httpx2.Headers | None) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, else ``Retry-After`` in seconds."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue  # an HTTP date: the backoff is used instead
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None


def backoff_seconds(attempt: int, rng: random.Random) -> float:
    """Exponential backoff with jitter: ``min(0.5 * 2**attempt, 8)`` less up to 25 %."""
    return min(INITIAL_RETRY_DELAY * 2.0 ** min(attempt, 30), MAX_RETRY_DELAY) * (
        1 - 0.25 * rng.random()
    )


def _refused(error: BaseException) -> bool:
    import httpx2

    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, httpx2.ConnectError | ConnectionRefusedError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _call_one(
    client: openai.OpenAI,
    request: ChatRequest,
    *,
    max_retries: int,
    sleep: Callable[[float], None],
    rng: random.Random,
    down: threading.Event,
    down_reason: list[str],
    stop: threading.Event,
    slots: EndpointSlots,
) -> _Outcome:
    import openai

    waits: list[float] = []
    sent = 0
    attempt = 0

    def failed(reason: str) -> _Outcome:
        answer = ChatAnswer(request.key, request.trial, None, 0, 0, False, attempt, reason)
        return _Outcome(answer, sent, waits)

    while True:
        if down.is_set():
            return failed(down_reason[0] if down_reason else "endpoint unreachable")
        if stop.is_set():
            return failed("stopped before the call was made")
        wait_for: float | None = None
        try:
            with slots.slot(give_up=lambda: stop.is_set() or down.is_set()) as holding:
                if not holding:
                    continue  # stopped or down while waiting: said at the top of the loop
                sent += 1
                reply = client.chat.completions.create(**request.create_arguments())
        except openai.APITimeoutError:
            reason = "the endpoint did not answer within the timeout"
        except openai.APIConnectionError as error:
            if _refused(error):
                reason = f"endpoint unreachable: connection refused at {request.endpoint}"
                down_reason.append(reason)
                down.set()
                return failed(reason)
            reason = f"connection lost before an answer: {error}"
        except openai.APIStatusError as error:
            status = error.status_code
            body = error.body
            detail = body.get("message") if isinstance(body, dict) else None
            reason = f"HTTP {status} from the endpoint: {detail or error.message}"
            if status not in RETRY_STATUSES and status < 500:
                return failed(reason)
            wait_for = retry_after_seconds(error.response.headers)
            if wait_for is not None and wait_for > MAX_RETRY_AFTER:
                return failed(f"{reason} (Retry-After {wait_for:g} s is more than 120 s)")
        except openai.OpenAIError as error:
            return failed(f"the client refused the answer: {error}")
        else:
            choice = reply.choices[0] if reply.choices else None
            content = choice.message.content if choice is not None else None
            usage = reply.usage
            answer = ChatAnswer(
                request.key,
                request.trial,
                content,
                usage.prompt_tokens if usage else 0,
                usage.completion_tokens if usage else 0,
                False,
                attempt,
            )
            return _Outcome(answer, sent, waits)
        if attempt >= max_retries:
            tries = "1 attempt" if attempt == 0 else f"{attempt + 1} attempts"
            return failed(f"{reason} (after {tries})")
        delay = wait_for if wait_for is not None else backoff_seconds(attempt, rng)
        waits.append(delay)
        log.info("chat call retry %d of %d in %.3f s: %s", attempt + 1, max_retries, delay, reason)
        sleep(delay)
        attempt += 1


def run_chat_calls(
    warehouse: WarehouseLocation,
    settings: ChatSettings,
    requests: Sequence[ChatRequest],
    *,
    environ: Mapping[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    seed: int = 0,
    stop: threading.Event | None = None,
    progress: Callable[[ChatProgress], None] | None = None,
    slots_root: Path | None = None,
) -> ChatCallsResult:
    """Answer ``requests`` (in their order): from the cache where it has them, else from the
    endpoint, storing each answer in ``warehouse``'s cache as it arrives.

    ``environ`` (default ``os.environ``) holds the API key variable; ``sleep`` waits between
    retries (tests pass a recorder); ``seed`` seeds the jitter; ``stop``, once set, makes the
    calls not yet started fail as stopped; ``progress`` hears where the batch is after the
    cache lookup and after each answer (or group of answers) arrives; ``slots_root`` is
    where the endpoint's slot files are (default: the system's temp folder; see
    :mod:`~eval_pipelines.stages.endpoint_slots`). Ctrl-C cancels the
    calls not yet started and re-raises, after the answers already received are stored.
    """
    environment = os.environ if environ is None else environ
    started = time.monotonic()
    keys = list(dict.fromkeys(request.key for request in requests))
    with connect(warehouse, create=True) as conn:
        load_left_journals(conn, warehouse)  # answers a killed batch received are not paid again
        cached = cached_calls(conn, keys)
    answers: dict[str, ChatAnswer] = {
        key: ChatAnswer(
            key, call.trial, call.response_text, call.input_tokens, call.output_tokens, True
        )
        for key, call in cached.items()
    }
    to_call = list({r.key: r for r in requests if r.key not in cached}.values())
    sent = 0
    waits: list[float] = []

    # Running totals for ``progress`` (kept as answers arrive: summing them anew each time
    # would be quadratic in the calls).
    tally = {"failed": 0, "tokens": sum(a.input_tokens + a.output_tokens for a in answers.values())}

    def tell() -> None:
        if progress is not None:
            progress(
                ChatProgress(
                    done=len(answers),
                    total=len(keys),
                    from_cache=len(cached),
                    failed=tally["failed"],
                    tokens=tally["tokens"],
                    seconds=time.monotonic() - started,
                )
            )

    tell()
    if to_call:
        import openai

        client = openai.OpenAI(
            base_url=settings.base_url,
            api_key=api_key(settings, environment) or NO_KEY,
            max_retries=0,
            timeout=settings.timeout,
        )
        down = threading.Event()
        down_reason: list[str] = []
        stopping = stop or threading.Event()
        jitter = random.Random(seed)  # its random() is one C call: safe across the threads
        slots = EndpointSlots(settings.endpoint, settings.concurrency, root=slots_root)
        pool = ThreadPoolExecutor(max_workers=settings.concurrency, thread_name_prefix="chat")
        writer = _CacheWriter(warehouse)
        pending: set[Future[_Outcome]] = set()

        def call_and_store(request: ChatRequest) -> _Outcome:
            outcome = _call_one(
                client,
                request,
                max_retries=settings.max_retries,
                sleep=sleep,
                rng=jitter,
                down=down,
                down_reason=down_reason,
                stop=stopping,
                slots=slots,
            )
            answer = outcome.answer
            if answer.failure is None:
                # Journaled before this thread takes its next request: a kill then loses at
                # most the calls in flight.
                writer.store(
                    CachedCall(
                        answer.key,
                        request.endpoint,
                        request.model,
                        request.trial,
                        answer.content,
                        answer.input_tokens,
                        answer.output_tokens,
                    )
                )
            return outcome

        try:
            pending = {pool.submit(call_and_store, request) for request in to_call}
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    outcome = future.result()
                    answer = outcome.answer
                    answers[answer.key] = answer
                    tally["failed"] += answer.failure is not None
                    tally["tokens"] += answer.input_tokens + answer.output_tokens
                    sent += outcome.sent
                    waits.extend(outcome.waits)
                    if answer.failure is not None:
                        log.warning("chat call failed: %s", answer.failure)
                tell()
        except BaseException:
            # Ctrl-C or a terminated step: no new call starts, and closing the client's
            # connections ends the calls in flight instead of waiting out their timeout (the
            # answers already received are journaled, and stored before this re-raises).
            stopping.set()
            pool.shutdown(wait=False, cancel_futures=True)
            client.close()
            raise
        finally:
            pool.shutdown(wait=True)
            writer.close()
            client.close()
    ordered = tuple(answers[request.key] for request in requests)
    made = [answer for key, answer in answers.items() if not answer.from_cache]
    good = [answer for answer in made if answer.failure is None]
    input_tokens = sum(answer.input_tokens for answer in good)
    output_tokens = sum(answer.output_tokens for answer in good)
    counters = ChatCounters(
        requests=len(requests),
        answered=len(good),
        from_cache=sum(1 for answer in answers.values() if answer.from_cache),
        failed=len(made) - len(good),
        requests_sent=sent,
        retries=sum(answer.retries for answer in made),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost=call_cost(settings.prices, settings.model, input_tokens, output_tokens),
    )
    return ChatCallsResult(ordered, counters, tuple(waits))
