"""The stand-in Chat Completions server, over real HTTP through the real openai SDK."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading

import openai
import pytest

from eval_pipelines.chat_standin.answers import choose
from eval_pipelines.chat_standin.server import Fault, FaultRule, serve_standin

PROMPT = (
    "Classify the record.\n"
    "Candidates:\n"
    "- 01.1: Growing of cereals\n"
    "- 47.1: Retail sale in stores\n"
    "Record:\n"
    "A retail shop: sale of groceries in stores\n"
)


def _client(base_url: str, **options: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="sk-test", **options)  # type: ignore[arg-type]


def _ask(client: openai.OpenAI, prompt: str = PROMPT) -> openai.types.chat.ChatCompletion:
    return client.chat.completions.create(
        model="standin-1", messages=[{"role": "user", "content": prompt}], temperature=0
    )


def test_the_answer_is_the_candidate_sharing_most_title_words_with_the_record() -> None:
    with serve_standin() as server:
        reply = _ask(_client(server.base_url, max_retries=0))
    answer = json.loads(reply.choices[0].message.content or "")
    # "retail", "sale", "in", "stores" are shared: 4 of the title's 4 distinct words
    assert answer == {"code": "47.1", "confidence": 1.0}
    assert reply.usage is not None
    assert reply.usage.prompt_tokens == len(PROMPT.split())
    assert reply.usage.completion_tokens == len(reply.choices[0].message.content.split())
    assert server.request_count == 1 and server.requests[0].model == "standin-1"
    assert server.requests[0].authorization == "Bearer sk-test"


def test_a_tie_goes_to_the_first_candidate_and_no_overlap_has_confidence_zero() -> None:
    prompt = "Candidates:\n- A: alpha\n- B: beta\nRecord:\nnothing shared\n"
    assert choose(prompt) == {"code": "A", "confidence": 0.0}
    assert choose("Record:\nno candidates") == {"code": "", "confidence": 0.0}


def test_the_peak_in_flight_is_taken_once_and_counts_again_from_those_still_in_flight() -> None:
    with serve_standin(latency_ms=300) as server:
        client = _client(server.base_url, max_retries=0)
        threads = [threading.Thread(target=_ask, args=(client,)) for _ in range(3)]
        for thread in threads:
            thread.start()
        while server.in_flight < 3:
            threading.Event().wait(0.01)
        assert server.take_peak() == 3
        # Taken again while the three are still answered: they are the peak of the new count.
        assert server.take_peak() == 3
        for thread in threads:
            thread.join(10)
        # A request is counted out before its answer is sent: none is left once clients have
        # their answers.
        assert server.in_flight == 0
        assert server.take_peak() == 3  # nothing more came since; the last count still held 3
        assert server.take_peak() == 0
        _ask(client)
        assert server.take_peak() == 1


def test_faults_by_schedule_malformed_and_outside_contents() -> None:
    schedule = {1: Fault("malformed"), 2: Fault("outside")}
    with serve_standin(schedule=schedule) as server:
        client = _client(server.base_url, max_retries=0)
        first = _ask(client).choices[0].message.content or ""
        second = _ask(client).choices[0].message.content or ""
        third = _ask(client).choices[0].message.content or ""
    with pytest.raises(ValueError):
        json.loads(first)
    assert json.loads(second)["code"] == "NOT-A-CANDIDATE"
    assert json.loads(third)["code"] == "47.1"
    assert [request.fault for request in server.requests] == ["malformed", "outside", None]


def test_a_500_and_a_dropped_connection_reach_the_client_as_errors() -> None:
    with serve_standin(schedule={1: Fault("500"), 2: Fault("drop")}) as server:
        client = _client(server.base_url, max_retries=0)
        with pytest.raises(openai.InternalServerError):
            _ask(client)
        with pytest.raises(openai.APIConnectionError):
            _ask(client)
        assert server.request_count == 2


def test_a_slow_answer_past_the_timeout_is_a_timeout() -> None:
    with serve_standin(schedule={1: Fault("slow", delay_s=1.0)}) as server:
        client = _client(server.base_url, max_retries=0, timeout=0.2)
        with pytest.raises(openai.APITimeoutError):
            _ask(client)


def test_the_sdk_retries_a_429_waiting_the_retry_after_the_server_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Verified, not assumed: openai's own retry reads Retry-After (it logs the wait it sleeps)."""
    rule = FaultRule("retail", Fault("429", retry_after="0.05"), times=2)
    with serve_standin(rules=[rule]) as server:
        client = _client(server.base_url, max_retries=3)
        with caplog.at_level(logging.INFO, logger="openai"):
            reply = _ask(client)
    assert json.loads(reply.choices[0].message.content or "")["code"] == "47.1"
    assert server.request_count == 3
    waits = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Retrying")]
    assert waits == [
        "Retrying request in 0.050000 seconds (retry 1 of 3)",
        "Retrying request in 0.050000 seconds (retry 2 of 3)",
    ]


def test_the_module_runs_from_a_shell_and_prints_its_address() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "eval_pipelines.chat_standin", "--port", "0", "--latency-ms", "1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("chat stand-in at http://127.0.0.1:")
        base_url = line.split()[3]
        reply = _ask(_client(base_url, max_retries=0))
        assert json.loads(reply.choices[0].message.content or "")["code"] == "47.1"
    finally:
        process.terminate()
        process.wait()
