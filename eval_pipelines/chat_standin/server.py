"""A local stand-in for an OpenAI-compatible Chat Completions endpoint, for tests and demos.

``POST /v1/chat/completions`` takes and returns JSON shaped like the real API (``choices``,
``message.content``, ``usage`` with ``prompt_tokens``/``completion_tokens``). Its answer is a
deterministic function of the prompt, so a test knows it in advance: the rule is documented in
:mod:`eval_pipelines.chat_standin.answers`.

Faults are injected by request number (``schedule``, 1-based in arrival order) or by a
substring of the prompt (``rules``, each for a bounded number of matching requests): a 429
with ``Retry-After``, a 500, a slow answer (past the client's timeout), malformed JSON content
(the answer cut short), a code outside the candidates, a dropped connection, or a fixed
answer (``content``: the answer table a test writes, keyed by a prompt substring). Every
request is recorded in :attr:`StandinServer.requests`.

Run it from a test with ``with serve_standin(...) as server: server.base_url`` or from a shell
with ``python -m eval_pipelines.chat_standin --port 8199 --latency-ms 200``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from eval_pipelines.chat_standin.answers import choose, completion, extract

FAULT_KINDS = ("429", "500", "slow", "malformed", "outside", "drop", "content")


@dataclass(frozen=True)
class Fault:
    """One injected fault: ``kind`` is one of ``FAULT_KINDS``; ``retry_after`` is the
    ``Retry-After`` header of a 429 (None: no header); ``delay_s`` how long a slow answer waits;
    ``content`` the answer's text of a ``content`` fault."""

    kind: str
    retry_after: str | None = "1"
    delay_s: float = 2.0
    content: str = ""

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"kind={self.kind!r}: one of {', '.join(FAULT_KINDS)}")


@dataclass
class FaultRule:
    """``fault`` for requests whose prompt contains ``contains``, at most ``times`` of them
    (None: every one)."""

    contains: str
    fault: Fault
    times: int | None = None
    used: int = 0


@dataclass(frozen=True)
class RecordedRequest:
    number: int
    model: str
    prompt: str
    fault: str | None
    authorization: str


@dataclass
class StandinServer:
    """The running server: its address, its request log and its fault plan."""

    host: str
    port: int
    latency_s: float = 0.0
    schedule: dict[int, Fault] = field(default_factory=dict)
    rules: list[FaultRule] = field(default_factory=list)
    requests: list[RecordedRequest] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0  # the most requests it was answering at once
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def take_peak(self) -> int:
        """The most requests answered at once since the last call (or the start); starts
        counting again from those in flight now."""
        with self._lock:
            peak, self.max_in_flight = self.max_in_flight, self.in_flight
            return peak

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def prompts(self) -> list[str]:
        with self._lock:
            return [request.prompt for request in self.requests]

    def _admit(self, model: str, prompt: str, authorization: str) -> Fault | None:
        with self._lock:
            number = len(self.requests) + 1
            fault = self.schedule.get(number)
            if fault is None:
                for rule in self.rules:
                    if rule.contains in prompt and (rule.times is None or rule.used < rule.times):
                        rule.used += 1
                        fault = rule.fault
                        break
            self.requests.append(
                RecordedRequest(number, model, prompt, fault.kind if fault else None, authorization)
            )
            return fault


def _handler(server_state: StandinServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        counted = False  # this request is in server_state.in_flight

        def setup(self) -> None:
            super().setup()
            # headers and body go out as two writes: without this, Nagle's algorithm and the
            # client's delayed ACK hold back every answer on a kept-alive connection
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # the request log is server_state.requests, not stderr

        def _counted_out(self) -> None:
            if self.counted:
                self.counted = False
                server_state._leave()

        def _send(self, status: int, body: Mapping[str, Any], headers: Mapping[str, str]) -> None:
            data = json.dumps(body).encode()
            # Counted out before the answer goes out: a client frees its slot only once it has
            # the answer, so the request it sends next is never counted beside this one.
            self._counted_out()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up (its timeout)

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                return
            try:
                body = json.loads(raw)
                messages = body["messages"]
                model = str(body["model"])
                prompt = "\n".join(str(message.get("content", "")) for message in messages)
            except (ValueError, KeyError, TypeError, AttributeError):
                self._send(400, {"error": {"message": "expected model and messages"}}, {})
                return
            fault = server_state._admit(model, prompt, self.headers.get("Authorization", ""))
            server_state._enter()
            self.counted = True
            try:
                self._answer(fault, model, prompt)
            finally:
                self._counted_out()

        def _answer(self, fault: Fault | None, model: str, prompt: str) -> None:
            if server_state.latency_s:
                time.sleep(server_state.latency_s)
            number = server_state.request_count
            kind = fault.kind if fault else None
            if fault is not None and kind == "drop":
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if fault is not None and kind == "429":
                headers = {} if fault.retry_after is None else {"Retry-After": fault.retry_after}
                error = {"message": "rate limited", "type": "rate_limit_exceeded"}
                self._send(429, {"error": error}, headers)
                return
            if kind == "500":
                self._send(500, {"error": {"message": "internal error"}}, {})
                return
            if fault is not None and kind == "slow":
                time.sleep(fault.delay_s)
            extracted = extract(prompt)
            answer = choose(prompt) if extracted is None else extracted
            if fault is not None and kind == "content":
                content = fault.content
            elif kind == "malformed" and extracted is not None:
                content = json.dumps(extracted)[: len(json.dumps(extracted)) // 2]
            elif kind == "malformed":
                content = '{"code": "' + answer["code"] + '", "confidence":'
            elif kind == "outside":
                content = json.dumps({"code": "NOT-A-CANDIDATE", "confidence": 0.9})
            else:
                content = json.dumps(answer)
            self._send(200, completion(model, content, prompt, number), {})

    return Handler


@contextmanager
def serve_standin(
    *,
    port: int = 0,
    latency_ms: float = 0.0,
    schedule: Mapping[int, Fault] | None = None,
    rules: Sequence[FaultRule] = (),
) -> Iterator[StandinServer]:
    """Run the stand-in on 127.0.0.1 (``port=0``: a free port) in a thread for the ``with``."""
    state = StandinServer(
        host="127.0.0.1",
        port=0,
        latency_s=latency_ms / 1000.0,
        schedule=dict(schedule or {}),
        rules=list(rules),
    )
    httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(state))
    httpd.daemon_threads = True
    state.port = int(httpd.server_address[1])
    thread = threading.Thread(target=httpd.serve_forever, name="chat-standin", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
