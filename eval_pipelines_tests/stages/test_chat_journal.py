"""The chat calls' journal: what a dead batch left is loaded by the next batch on the warehouse
(and not paid for again), a torn last line is skipped, a live batch's journal is left alone,
and the warehouse holds each answer once. Real stand-in server, real DuckDB files, a real
second process holding a journal."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.chat_standin.server import serve_standin
from eval_pipelines.core.chat.request import ChatRequest
from eval_pipelines.core.chat.settings import ChatSettings, parse_chat_settings
from eval_pipelines.stages.chat_calls import run_chat_calls
from eval_pipelines.stages.chat_journal import ChatJournal, journal_directory, load_left_journals
from eval_pipelines.storage.chat_cache import CachedCall, cached_calls, count_calls
from eval_pipelines.storage.warehouse import connect
from eval_pipelines_tests.helpers.chat_batch import batch

ANSWER = '{"code": "47.1", "confidence": 0.75}'


def _settings(base_url: str) -> ChatSettings:
    config: dict[str, Any] = {"options": {"model": "standin-1", "baseUrl": base_url}}
    return parse_chat_settings(config, {})


def _call(request: ChatRequest) -> CachedCall:
    return CachedCall(request.key, request.endpoint, request.model, request.trial, ANSWER, 7, 3)


def _line(call: CachedCall) -> bytes:
    fields = {
        "key": call.key,
        "endpoint": call.endpoint,
        "model": call.model,
        "trial": call.trial,
        "response_text": call.response_text,
        "input_tokens": call.input_tokens,
        "output_tokens": call.output_tokens,
    }
    return json.dumps(fields).encode() + b"\n"


def _left_journal(warehouse: Path, calls: list[CachedCall]) -> Path:
    """A journal as a killed batch leaves it: written, its lock gone, never removed."""
    journal = ChatJournal(warehouse)
    for call in calls:
        journal.append(call)
    journal.leave()
    return journal.path


def _new_warehouse(folder: Path) -> Path:
    """A created warehouse: journals are left beside one that exists (creating a warehouse
    removes what a removed one left beside it)."""
    warehouse = folder / "w.duckdb"
    with connect(warehouse, create=True):
        pass
    return warehouse


def test_a_left_journal_is_loaded_before_the_cache_lookup_and_a_torn_last_line_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    warehouse = _new_warehouse(tmp_path)
    with serve_standin() as server:
        settings = _settings(server.base_url)
        requests = batch(settings, 6)
        path = _left_journal(warehouse, [_call(r) for r in requests[:3]])
        with path.open("ab") as journal:
            journal.write(b"\x00" * 16 + b"\n")  # a line a machine crash can leave
            journal.write(_line(_call(requests[3]))[:40])  # killed while writing it
        with caplog.at_level(logging.INFO):
            result = run_chat_calls(warehouse, settings, requests, environ={})
        prompts = server.prompts()
    # the three journaled answers are not asked again; the torn one is
    assert result.counters.from_cache == 3 and result.counters.answered == 3
    assert len(prompts) == 3
    assert {i for i in range(6) for p in prompts if f"record {i}:" in p} == {3, 4, 5}
    assert [a.content for a in result.answers[:3]] == [ANSWER] * 3
    assert "line 4 is not a cached call" in caplog.text
    assert "skipped its last line" in caplog.text
    assert list(journal_directory(warehouse).iterdir()) == []
    with connect(warehouse, read_only=True) as conn:
        assert count_calls(conn) == 6


def test_a_journal_held_by_a_live_process_is_not_touched(tmp_path: Path) -> None:
    warehouse = _new_warehouse(tmp_path)
    with serve_standin() as server:
        settings = _settings(server.base_url)
        requests = batch(settings, 3)
        holder = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys\n"
                "from pathlib import Path\n"
                "from eval_pipelines.stages.chat_journal import ChatJournal\n"
                "from eval_pipelines.storage.chat_cache import CachedCall\n"
                "journal = ChatJournal(Path(sys.argv[1]))\n"
                "journal.append(CachedCall(*sys.argv[2:6], 1, 'held', 1, 1))\n"
                "print(journal.path, flush=True)\n"
                "sys.stdin.read()\n",
                str(warehouse),
                requests[0].key,
                requests[0].endpoint,
                requests[0].model,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None
            held = Path(holder.stdout.readline().strip())
            before = held.read_bytes()
            result = run_chat_calls(warehouse, settings, requests, environ={})
            assert held.read_bytes() == before and b"held" in before
            assert server.request_count == 3 and result.counters.from_cache == 0
            assert result.answers[0].content != "held"
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait()
    # its process gone, the journal is the next loader's; the warehouse's answer stays as it was
    with connect(warehouse) as conn:
        assert load_left_journals(conn, warehouse) == 1
        assert cached_calls(conn, [requests[0].key])[requests[0].key].response_text != "held"
    assert not held.exists()


def test_the_warehouse_holds_each_answer_once_however_often_a_journal_is_loaded(
    tmp_path: Path,
) -> None:
    """A loader killed after storing a journal and before deleting it leaves it to be loaded
    again; two journals can hold one answer (two batches asked the same request at once)."""
    warehouse = _new_warehouse(tmp_path)
    settings = _settings("http://127.0.0.1:9/v1")
    calls = [_call(r) for r in batch(settings, 4)]
    first = _left_journal(warehouse, calls[:3])
    second = _left_journal(warehouse, calls[1:])
    with connect(warehouse, create=True) as conn:
        assert load_left_journals(conn, warehouse) == 6
        again = _left_journal(warehouse, calls)
        assert load_left_journals(conn, warehouse) == 4
        assert count_calls(conn) == 4
        stored = cached_calls(conn, [call.key for call in calls])
    assert [stored[call.key] for call in calls] == calls
    assert not first.exists() and not second.exists() and not again.exists()


def test_a_batch_leaves_no_journal_and_its_journal_holds_no_api_key(tmp_path: Path) -> None:
    warehouse = tmp_path / "w.duckdb"
    secret = "sk-test-NEVER-IN-A-JOURNAL-81c3"
    seen: list[bytes] = []
    with serve_standin() as server:
        config = {
            "options": {"model": "standin-1", "baseUrl": server.base_url, "apiKeyEnv": "K"},
            "concurrency": 2,
        }
        settings = parse_chat_settings(config, {"K": secret})
        directory = journal_directory(warehouse)

        def look(_: object) -> None:
            seen.extend(path.read_bytes() for path in directory.glob("*.jsonl"))

        result = run_chat_calls(
            warehouse, settings, batch(settings, 6), environ={"K": secret}, progress=look
        )
    assert result.counters.answered == 6
    assert any(seen) and all(secret.encode() not in data for data in seen)
    assert list(directory.iterdir()) == []
