"""The calls in flight to one endpoint are bounded across batches, threads and processes: the
stand-in server counts the most requests it answered at once (real HTTP, real slot files)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from eval_pipelines.chat_standin.server import serve_standin
from eval_pipelines.core.chat.settings import parse_chat_settings
from eval_pipelines.stages.chat_calls import ChatCallsResult, run_chat_calls
from eval_pipelines.stages.endpoint_slots import EndpointSlots
from eval_pipelines.storage.warehouse import connect
from eval_pipelines_tests.helpers.chat_batch import batch


def _migrated(path: Path) -> Path:
    with connect(path, create=True):
        pass
    return path


def test_two_batches_in_one_process_share_the_endpoints_limit(tmp_path: Path) -> None:
    # Each batch alone may have 2 in flight; the two at once would have had 4 before the
    # slots (one pool of 2 threads each), and must have 2.
    with serve_standin(latency_ms=150) as server:
        settings = parse_chat_settings(
            {"options": {"model": "m", "baseUrl": server.base_url}, "concurrency": 2}, {}
        )
        results: list[ChatCallsResult] = []

        def one(name: str) -> None:
            warehouse = _migrated(tmp_path / f"{name}.duckdb")
            results.append(run_chat_calls(warehouse, settings, batch(settings, 6), environ={}))

        threads = [threading.Thread(target=one, args=(name,)) for name in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert server.request_count == 12
        assert server.max_in_flight == 2
    assert [r.counters.answered for r in results] == [6, 6]


def _batch_process(
    name: Path, config: dict[str, object], requests: int, *, temporary: Path | None = None
) -> subprocess.Popen[bytes]:
    """A process calling the endpoint ``requests`` times as one batch, with its own warehouse
    ``<name>.duckdb`` (and its own temporary folder, as on another host, when given)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eval_pipelines_tests.helpers.chat_batch",
            str(_migrated(name.with_suffix(".duckdb"))),
            json.dumps(config),
            str(requests),
        ],
        env=None if temporary is None else os.environ | {"TMPDIR": str(temporary)},
    )


def test_two_processes_share_the_endpoints_limit(tmp_path: Path) -> None:
    # Two run workers (or a multiprocess executor's two variant steps): separate processes,
    # each with its own warehouse, calling one endpoint with concurrency 3.
    with serve_standin(latency_ms=150) as server:
        config = {"options": {"model": "m", "baseUrl": server.base_url}, "concurrency": 3}
        workers = [_batch_process(tmp_path / name, config, 12) for name in ("a", "b")]
        assert [worker.wait(120) for worker in workers] == [0, 0]
        assert server.request_count == 24
        assert server.max_in_flight == 3


def test_processes_of_two_machines_each_have_their_own_slots(tmp_path: Path) -> None:
    # The slots are files under the temporary folder, so they are per machine (docs/models.md):
    # two processes with their own TMPDIR, as on two hosts, each keep concurrency 3, and the
    # endpoint sees up to 6.
    with serve_standin(latency_ms=200) as server:
        config = {"options": {"model": "m", "baseUrl": server.base_url}, "concurrency": 3}
        workers = []
        for name in ("a", "b"):
            temporary = tmp_path / f"tmp_{name}"
            temporary.mkdir()
            workers.append(_batch_process(tmp_path / name, config, 60, temporary=temporary))
        assert [worker.wait(120) for worker in workers] == [0, 0]
        assert server.request_count == 120
        # Each process alone has at most 3 in flight: more means the two did not share slots
        # (each batch runs 4 s, so the two overlap although they start apart).
        assert 4 <= server.max_in_flight <= 6
        assert all(
            list((tmp_path / f"tmp_{name}").glob("eval_pipelines-endpoint-slots/*"))
            for name in "ab"
        )


def test_callers_with_different_limits_each_keep_their_own(tmp_path: Path) -> None:
    wide = EndpointSlots("http://127.0.0.1:1/v1", 3, root=tmp_path)
    narrow = EndpointSlots("http://127.0.0.1:1/v1", 1, root=tmp_path)
    with wide.slot() as first, narrow.slot(give_up=lambda: True) as second:
        # The narrow caller's only slot (0) is the wide one's first: it must wait.
        assert (first, second) == (True, False)
    with narrow.slot() as first, wide.slot() as second, wide.slot() as third:
        assert (first, second, third) == (True, True, True)
        with wide.slot(give_up=lambda: True) as fourth:
            assert fourth is False  # three in flight: the widest limit


def test_a_slot_held_by_a_killed_process_is_free_at_once(tmp_path: Path) -> None:
    endpoint = "http://127.0.0.1:2/v1"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path\n"
            "from eval_pipelines.stages.endpoint_slots import EndpointSlots\n"
            f"slots = EndpointSlots({endpoint!r}, 1, root=Path({str(tmp_path)!r}))\n"
            "with slots.slot():\n"
            "    print('holding', flush=True)\n"
            "    time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        slots = EndpointSlots(endpoint, 1, root=tmp_path)
        deadline = time.monotonic() + 0.3
        with slots.slot(give_up=lambda: time.monotonic() > deadline) as taken:
            assert taken is False  # the other process holds it
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(30)
        with slots.slot(give_up=lambda: True) as taken:
            assert taken is True  # the kernel released the dead process's lock
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)


def test_a_stop_while_waiting_for_a_slot_fails_the_calls_not_made(tmp_path: Path) -> None:
    with serve_standin() as server:
        settings = parse_chat_settings(
            {"options": {"model": "m", "baseUrl": server.base_url}, "concurrency": 1}, {}
        )
        stop = threading.Event()
        blocker = EndpointSlots(settings.endpoint, 1)
        with blocker.slot():
            # The one slot is held elsewhere, so the batch waits; the stop ends the wait.
            timer = threading.Timer(0.2, stop.set)
            timer.start()
            result = run_chat_calls(
                _migrated(tmp_path / "w.duckdb"), settings, batch(settings, 3), stop=stop
            )
            timer.join()
        assert server.request_count == 0
    assert result.counters.failed == 3
    assert {a.failure for a in result.answers} == {"stopped before the call was made"}


def test_a_process_keeps_no_slot_file_open_once_its_calls_are_done(tmp_path: Path) -> None:
    # One process calling many endpoints (a test worker, a notebook) must not keep their slot
    # files open: with 1,024 descriptors, 4 per endpoint would run out after 256 endpoints.
    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = open_descriptors()
    for port in range(50):
        slots = EndpointSlots(f"http://127.0.0.1:{port}/v1", 4, root=tmp_path)
        with slots.slot() as first, slots.slot() as second:
            assert (first, second) == (True, True)
    assert open_descriptors() == before
