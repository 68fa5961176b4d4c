"""Chat calls through the real openai SDK over real HTTP to the stand-in server, with the cache
in a real DuckDB file: the tests count the server's requests and record the waits between
retries (a recorder instead of time.sleep, so nothing here depends on the clock)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.chat_standin.server import Fault, FaultRule, serve_standin
from eval_pipelines.core.chat.answer import parse_answer
from eval_pipelines.core.chat.settings import ChatSettings, parse_chat_settings
from eval_pipelines.core.ports import free_port
from eval_pipelines.stages.chat_calls import run_chat_calls
from eval_pipelines.stages.chat_journal import journal_directory
from eval_pipelines.storage.chat_cache import count_calls
from eval_pipelines.storage.warehouse import connect
from eval_pipelines_tests.helpers.chat_batch import answers_kept, batch, holding, until_stalled

SECRET = "sk-test-NEVER-STORE-4f2a9c"
ENV = {"CHAT_TEST_KEY": SECRET}


def _config(base_url: str, **top: Any) -> dict[str, Any]:
    options = {"model": "standin-1", "baseUrl": base_url, "apiKeyEnv": "CHAT_TEST_KEY"}
    options.update(top.pop("options", {}))
    return {"options": options, "prices": {"standin-1": {"input": 2, "output": 8}}, **top}


def _settings(base_url: str, **top: Any) -> ChatSettings:
    return parse_chat_settings(_config(base_url, **top), ENV)


class Waits(list[float]):
    """Records the waits asked for instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_a_second_run_is_served_from_the_cache_and_pays_nothing(tmp_path: Path) -> None:
    warehouse = tmp_path / "w.duckdb"
    with serve_standin() as server:
        settings = _settings(server.base_url, trials=2)
        requests = batch(settings, 5, trials=2)
        first = run_chat_calls(warehouse, settings, requests, environ=ENV)
        assert server.request_count == 10  # 5 records x 2 trials: distinct keys
        second = run_chat_calls(warehouse, settings, requests, environ=ENV)
        assert server.request_count == 10
    assert (first.counters.answered, first.counters.from_cache) == (10, 0)
    assert (second.counters.answered, second.counters.from_cache) == (0, 10)
    assert first.counters.requests_sent == 10 and first.counters.failed == 0
    assert [a.content for a in first.answers] == [a.content for a in second.answers]
    codes = [parse_answer(a.content).code for a in first.answers]
    assert codes == ["47.1", "47.1", "01.1", "01.1"] * 2 + ["47.1", "47.1"]
    # tokens as the server reported them (words), cost from the price table
    prompt_words = sum(len(r.prompt.split()) for r in requests)
    assert first.counters.input_tokens == prompt_words
    output = first.counters.output_tokens
    assert first.counters.cost == pytest.approx((prompt_words * 2 + output * 8) / 1e6)
    assert second.counters.input_tokens == 0 and second.counters.cost == 0.0
    with connect(warehouse, read_only=True) as conn:
        assert count_calls(conn) == 10


def test_a_429_waits_the_retry_after_the_server_sent(tmp_path: Path) -> None:
    waits = Waits()
    rule = FaultRule("record 1:", Fault("429", retry_after="0.25"), times=2)
    with serve_standin(rules=[rule]) as server:
        settings = _settings(server.base_url, maxRetries=4)
        result = run_chat_calls(
            tmp_path / "w.duckdb", settings, batch(settings, 3), environ=ENV, sleep=waits
        )
        assert server.request_count == 5
    assert waits == [0.25, 0.25] and result.waits == (0.25, 0.25)
    assert result.counters.retries == 2 and result.counters.requests_sent == 5
    assert result.counters.failed == 0 and result.answers[1].retries == 2


def test_without_retry_after_the_wait_is_exponential_backoff_with_jitter(tmp_path: Path) -> None:
    waits = Waits()
    with serve_standin(schedule={1: Fault("429", retry_after=None), 2: Fault("500")}) as server:
        settings = _settings(server.base_url, concurrency=1)
        result = run_chat_calls(
            tmp_path / "w.duckdb", settings, batch(settings, 1), environ=ENV, sleep=waits
        )
    assert result.counters.failed == 0 and result.counters.retries == 2
    # attempt 0: 0.5 s, attempt 1: 1 s, each less up to 25 % jitter
    assert 0.375 <= waits[0] <= 0.5 and 0.75 <= waits[1] <= 1.0


def test_a_row_that_still_fails_is_a_failure_with_its_reason_not_an_exception(
    tmp_path: Path,
) -> None:
    waits = Waits()
    rule = FaultRule("record 2:", Fault("500"))
    with serve_standin(rules=[rule]) as server:
        settings = _settings(server.base_url, maxRetries=2)
        result = run_chat_calls(
            tmp_path / "w.duckdb", settings, batch(settings, 4), environ=ENV, sleep=waits
        )
        assert server.request_count == 3 + 3  # three good rows, one row tried 1 + 2 times
        no_retry = _settings(server.base_url, maxRetries=0, options={"temperature": 0.5})
        once = run_chat_calls(
            tmp_path / "w.duckdb", no_retry, batch(no_retry, 4), environ=ENV, sleep=waits
        )
        assert server.request_count == 6 + 4
    failed = result.answers[2]
    assert failed.failure == "HTTP 500 from the endpoint: internal error (after 3 attempts)"
    assert [a.failure is None for a in result.answers] == [True, True, False, True]
    assert result.counters.failed == 1 and result.counters.answered == 3
    assert once.answers[2].failure == "HTTP 500 from the endpoint: internal error (after 1 attempt)"
    # a failure is not cached (the next run tries that row again)
    with connect(tmp_path / "w.duckdb", read_only=True) as conn:
        assert count_calls(conn) == 3 + 3


def test_timeouts_and_dropped_connections_are_retried(tmp_path: Path) -> None:
    waits = Waits()
    schedule = {1: Fault("slow", delay_s=1.0), 2: Fault("drop")}
    with serve_standin(schedule=schedule) as server:
        settings = _settings(server.base_url, concurrency=1, options={"timeout": 0.2}, maxRetries=3)
        result = run_chat_calls(
            tmp_path / "w.duckdb", settings, batch(settings, 1), environ=ENV, sleep=waits
        )
        assert server.request_count == 3
    assert result.answers[0].failure is None and result.answers[0].retries == 2
    assert len(waits) == 2


def test_malformed_answers_and_codes_outside_are_answers_the_parser_refuses(
    tmp_path: Path,
) -> None:
    with serve_standin(schedule={1: Fault("malformed"), 2: Fault("outside")}) as server:
        settings = _settings(server.base_url, concurrency=1)
        result = run_chat_calls(tmp_path / "w.duckdb", settings, batch(settings, 2), environ=ENV)
    allowed = {"01.1", "47.1"}
    reasons = [parse_answer(a.content, allowed=allowed).failure or "" for a in result.answers]
    assert reasons[0].startswith("answer is not JSON")
    assert reasons[1] == "answer's code is not among the codes allowed: 'NOT-A-CANDIDATE'"


def test_an_endpoint_that_is_down_fails_every_row_fast_with_the_reason(tmp_path: Path) -> None:
    waits = Waits()
    settings = _settings(f"http://127.0.0.1:{free_port()}/v1", concurrency=2, maxRetries=4)
    result = run_chat_calls(
        tmp_path / "w.duckdb", settings, batch(settings, 20), environ=ENV, sleep=waits
    )
    assert all(
        (a.failure or "").startswith(
            "endpoint unreachable: connection refused at http://127.0.0.1:"
        )
        for a in result.answers
    )
    assert waits == [] and result.counters.failed == 20
    assert result.counters.requests_sent <= 2  # the calls in flight when it was found down


def test_the_api_key_reaches_the_endpoint_and_nowhere_else(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    warehouse = tmp_path / "w.duckdb"
    with caplog.at_level(logging.DEBUG):
        with serve_standin(rules=[FaultRule("record 0:", Fault("429", "0"), times=1)]) as server:
            settings = _settings(server.base_url)
            result = run_chat_calls(
                warehouse, settings, batch(settings, 3), environ=ENV, sleep=Waits()
            )
            assert {r.authorization for r in server.requests} == {f"Bearer {SECRET}"}
    assert result.counters.retries == 1
    assert SECRET not in caplog.text and "chat call retry" in caplog.text
    assert SECRET not in json.dumps(result.to_json()) and SECRET not in repr(settings)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_a_run_killed_halfway_pays_again_only_for_the_calls_in_flight(tmp_path: Path) -> None:
    """The batch runs in a process killed with SIGKILL while another process (this test) holds
    the warehouse, as a reader does for a moment: answers that arrived were journaled before
    their thread sent another request, and the re-run loads the journal before it looks up
    the cache, so it pays again at most for the calls that were in flight (concurrency),
    however long the writes had to wait."""
    warehouse = tmp_path / "w.duckdb"
    n, concurrency = 40, 2
    # slow enough that the batch is still calling when this process has opened the warehouse
    with serve_standin(latency_ms=200) as server:
        config = _config(server.base_url, concurrency=concurrency)
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "eval_pipelines_tests.helpers.chat_batch",
                str(warehouse),
                json.dumps(config),
                str(n),
            ],
            env={**os.environ, **ENV},
        )
        deadline = time.monotonic() + 60
        while server.request_count < 6 and process.poll() is None:
            assert time.monotonic() < deadline, "the batch never got going"
            time.sleep(0.01)
        with holding(warehouse):  # the batch's writes wait for this process's lock
            held_at = server.request_count
            until_stalled(lambda: server.request_count, held_at + 4 * concurrency)
            # the calls do not wait for the warehouse: their answers go to the journal
            sent = server.request_count
            assert sent >= held_at + 4 * concurrency, (held_at, sent)
            process.send_signal(signal.SIGKILL)
            process.wait()
        stored = answers_kept(warehouse, secret=SECRET)
        before = server.request_count
        settings = parse_chat_settings(config, ENV)
        again = run_chat_calls(warehouse, settings, batch(settings, n), environ=ENV)
        paid_again = server.request_count - before
    assert 0 < stored < n
    assert paid_again == n - stored
    assert again.counters.from_cache == stored and again.counters.answered == n - stored
    # sent and not stored at the kill: the calls in flight, never an answer received
    assert before - stored <= concurrency, (before, stored)
    assert server.request_count == n + (before - stored)
    assert list(journal_directory(warehouse).iterdir()) == []
    with connect(warehouse, read_only=True) as conn:
        assert count_calls(conn) == n


def test_a_429_storm_still_completes(tmp_path: Path) -> None:
    waits = Waits()
    # every one of the 12 records is refused three times before it is answered
    rules = [FaultRule(f"record {i}:", Fault("429", retry_after="1"), times=3) for i in range(12)]
    with serve_standin(rules=rules) as server:
        settings = _settings(server.base_url, concurrency=4, maxRetries=3)
        result = run_chat_calls(
            tmp_path / "w.duckdb", settings, batch(settings, 12), environ=ENV, sleep=waits
        )
        assert server.request_count == 12 * 4
    assert result.counters.answered == 12 and result.counters.failed == 0
    assert result.counters.retries == 36 and waits == [1.0] * 36


def test_a_stop_ends_the_batch_keeping_what_was_answered(tmp_path: Path) -> None:
    stop = threading.Event()
    with serve_standin(latency_ms=20) as server:
        settings = _settings(server.base_url, concurrency=1)

        watcher_done = threading.Event()

        def watch() -> None:
            deadline = time.monotonic() + 60
            while server.request_count < 3 and time.monotonic() < deadline:
                time.sleep(0.005)
            stop.set()
            watcher_done.set()

        threading.Thread(target=watch, daemon=True).start()
        result = run_chat_calls(
            tmp_path / "w.duckdb", settings, batch(settings, 30), environ=ENV, stop=stop
        )
        watcher_done.wait(60)
        sent = server.request_count
    stopped = [a for a in result.answers if a.failure == "stopped before the call was made"]
    answered = [a for a in result.answers if a.failure is None]
    assert len(stopped) + len(answered) == 30 and stopped and answered
    assert len(answered) == sent == result.counters.requests_sent
    with connect(tmp_path / "w.duckdb", read_only=True) as conn:
        assert count_calls(conn) == len(answered)
