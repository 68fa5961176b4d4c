"""A local stand-in for an OpenAI-compatible Chat Completions endpoint, for tests and demos.

``POST /v1/chat/completions`` takes and returns JSON shaped like the real API (``choices``,
``message.content``, ``usage`` with ``prompt_tokens``/``completion_tokens``). Its answer is a
deterministic function of the prompt, so a test knows it in advance:

- the prompt (all message contents, joined) lists the candidates as lines ``- CODE: title``
  after a line ``Candidates:``, and the record after a line ``Record:`` (the layout
  :func:`eval_pipelines.core.chat.request.classification_prompt` writes);
- the answer is the JSON object ``{"code": C, "confidence": p}`` where ``C`` is the candidate
  whose title shares the most distinct lower-cased words (``\\w+``) with the record text (the
  first listed wins a tie; with no candidates the code is ``""``), and ``p`` is the number of
  shared words over the number of distinct words in that title (0 when it shares none);
- tokens are counted as whitespace-separated words: ``prompt_tokens`` over every message's
  content, ``completion_tokens`` over the answer's content.

An extraction prompt (a line ``Fields:`` followed by ``- key (type): display name`` lines, a
table's columns indented under it, and the document after a line ``Document:``: the layout
:func:`eval_pipelines.core.chat.extract.extraction_prompt` writes) is answered by
:func:`extract`'s documented rule instead: one JSON object with every field's key, each value
read from the document's text by its display name (null when not found), each table's rows
read under the line that holds its columns' names.

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

import argparse
import json
import re
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WORD = re.compile(r"\w+")
CANDIDATE_LINE = re.compile(r"^- (?P<code>[^:\s]+): ?(?P<title>.*)$")
FAULT_KINDS = ("429", "500", "slow", "malformed", "outside", "drop", "content")
FIELD_LINE = re.compile(r"^(?P<indent>\s*)- (?P<key>\S+) \((?P<type>[^)]*)\): ?(?P<name>.*)$")
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")
CELL_SEPARATOR = re.compile(r"\s{2,}")


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


def words(text: str) -> list[str]:
    return text.split()


def parse_prompt(prompt: str) -> tuple[list[tuple[str, str]], str]:
    """``([(code, title), ...], record_text)`` read from a prompt laid out as documented."""
    candidates: list[tuple[str, str]] = []
    record: list[str] = []
    section = None
    for line in prompt.splitlines():
        stripped = line.strip()
        if stripped == "Candidates:":
            section = "candidates"
            continue
        if stripped == "Record:":
            section = "record"
            continue
        if section == "candidates":
            found = CANDIDATE_LINE.match(stripped)
            if found:
                candidates.append((found["code"], found["title"]))
            elif stripped:
                section = None
        elif section == "record":
            record.append(line)
    return candidates, "\n".join(record).strip()


def choose(prompt: str) -> dict[str, Any]:
    """The stand-in's answer to ``prompt``: the documented word-overlap rule."""
    candidates, record = parse_prompt(prompt)
    record_words = {word.lower() for word in WORD.findall(record)}
    best_code, best_shared, best_size = "", -1, 1
    for code, title in candidates:
        title_words = {word.lower() for word in WORD.findall(title)}
        shared = len(title_words & record_words)
        if shared > best_shared:
            best_code, best_shared, best_size = code, shared, max(1, len(title_words))
    confidence = round(max(0, best_shared) / best_size, 4)
    return {"code": best_code, "confidence": confidence}


@dataclass(frozen=True)
class _Wanted:
    key: str
    kind: str  # the prompt's type word: text, number, date ..., true/false, table
    name: str
    columns: list[_Wanted] = field(default_factory=list)


def parse_extraction_prompt(prompt: str) -> tuple[list[_Wanted], str] | None:
    """``(fields, document text)`` of an extraction prompt; None when it is not one."""
    lines = prompt.splitlines()
    stripped = [line.strip() for line in lines]
    if "Fields:" not in stripped or "Document:" not in stripped:
        return None
    start, document_at = stripped.index("Fields:"), stripped.index("Document:")
    fields: list[_Wanted] = []
    for line in lines[start + 1 : document_at]:
        found = FIELD_LINE.fullmatch(line)
        if found is None:
            continue
        wanted = _Wanted(found["key"], found["type"], found["name"].strip())
        if found["indent"] and fields and fields[-1].kind == "table":
            fields[-1].columns.append(wanted)
        else:
            fields.append(wanted)
    return fields, "\n".join(lines[document_at + 1 :])


def _typed(text: str | None, kind: str) -> Any:
    if text is None:
        return None
    text = text.strip()
    if kind == "number":
        numbers = NUMBER.findall(text)
        if not numbers:
            return None
        value = numbers[-1].replace(",", "")
        return float(value) if "." in value else int(value)
    if kind == "true/false":
        return {"yes": True, "true": True, "no": False, "false": False}.get(text.lower())
    return text or None


def _header_value(name: str, lines: list[str]) -> str | None:
    pattern = re.compile(rf"{re.escape(name)}[.:]?\s+(?P<value>\S.*)", re.IGNORECASE)
    for line in lines:
        found = pattern.fullmatch(line.strip())
        if found:
            return found["value"]
    return None


def _table_rows(columns: list[_Wanted], lines: list[str]) -> list[dict[str, Any]]:
    heading = re.compile(
        r"\s*" + r"\s+".join(re.escape(c.name) for c in columns) + r"\s*", re.IGNORECASE
    )
    for at, line in enumerate(lines):
        if columns and heading.fullmatch(line):
            rows = []
            for row_line in lines[at + 1 :]:
                cells = CELL_SEPARATOR.split(row_line.strip())
                if len(cells) != len(columns):
                    break
                rows.append(
                    {c.key: _typed(cell, c.kind) for c, cell in zip(columns, cells, strict=True)}
                )
            return rows
    return []


def extract(prompt: str) -> dict[str, Any] | None:
    """The stand-in's answer to an extraction prompt (None: not one), by this rule:

    - a header field's value is what follows its display name (case-insensitive) on the
      first document line that starts with it, after an optional ``.`` or ``:`` and spaces
      (``Invoice no. HLP-1001`` for the name ``Invoice no``); a ``number`` is the last number
      in it (``,`` thousands separators dropped; an integer without a ``.``), a ``true/false``
      is yes/true/no/false; null when no line starts with the name;
    - a table's rows are the lines after the first line made of exactly its columns' display
      names in order (separated by spaces), each split at runs of two or more spaces into as
      many cells as there are columns, typed the same way; the first line that does not split
      so ends the table (no heading line: no rows).
    """
    parsed = parse_extraction_prompt(prompt)
    if parsed is None:
        return None
    fields, document = parsed
    lines = document.splitlines()
    return {
        f.key: _table_rows(f.columns, lines)
        if f.kind == "table"
        else _typed(_header_value(f.name, lines), f.kind)
        for f in fields
    }


def completion(model: str, content: str, prompt: str, number: int) -> dict[str, Any]:
    prompt_tokens = len(words(prompt))
    completion_tokens = len(words(content))
    return {
        "id": f"chatcmpl-standin-{number}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _handler(server_state: StandinServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # headers and body go out as two writes: without this, Nagle's algorithm and the
            # client's delayed ACK hold back every answer on a kept-alive connection
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # the request log is server_state.requests, not stderr

        def _send(self, status: int, body: Mapping[str, Any], headers: Mapping[str, str]) -> None:
            data = json.dumps(body).encode()
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
            try:
                self._answer(fault, model, prompt)
            finally:
                server_state._leave()

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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval_pipelines.chat_standin",
        description="A local OpenAI-compatible Chat Completions stand-in (deterministic answers).",
    )
    parser.add_argument("--port", type=int, default=8199, help="port on 127.0.0.1 (0: free)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay of every answer")
    args = parser.parse_args(argv)
    with serve_standin(port=args.port, latency_ms=args.latency_ms) as server:
        print(f"chat stand-in at {server.base_url} (latency {args.latency_ms:g} ms)", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
