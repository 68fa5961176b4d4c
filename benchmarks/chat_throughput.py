"""Benchmark the chat client's throughput against the local stand-in server.

Run from the repository root::

    .venv/bin/python benchmarks/chat_throughput.py [--calls 64] [--latency-ms 200]
        [--levels 1,4,16]

Starts the stand-in (``eval_pipelines.chat_standin``) on 127.0.0.1 with the given latency,
then for each concurrency level answers ``--calls`` distinct requests with
``eval_pipelines.stages.chat_calls.run_chat_calls`` into a fresh DuckDB file (nothing from
cache; the file is created and migrated before the clock starts), and prints the calls per
second against the ideal ``concurrency / latency`` and their ratio (what the SDK, the thread
pool and the cache writes cost).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from eval_pipelines.chat_standin.server import serve_standin
from eval_pipelines.core.chat.request import build_request, classification_messages
from eval_pipelines.core.chat.settings import parse_chat_settings
from eval_pipelines.stages.chat_calls import run_chat_calls
from eval_pipelines.storage.warehouse import connect

CANDIDATES = [("01.1", "Growing of cereals"), ("47.1", "Retail sale in stores")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--levels", default="1,4,16")
    args = parser.parse_args()
    levels = [int(level) for level in args.levels.split(",")]
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    with serve_standin(latency_ms=args.latency_ms) as server, tempfile.TemporaryDirectory() as d:
        for level in levels:
            config = {
                "options": {"model": "standin-1", "baseUrl": server.base_url},
                "concurrency": level,
            }
            settings = parse_chat_settings(config, {})
            requests = [
                build_request(
                    settings,
                    classification_messages(settings, f"level {level} record {i}", CANDIDATES),
                )
                for i in range(args.calls)
            ]
            warehouse = Path(d) / f"level{level}.duckdb"
            with connect(warehouse, create=True):
                pass  # the migrations are not part of the calls' throughput
            started = time.perf_counter()
            result = run_chat_calls(warehouse, settings, requests, environ={})
            seconds = time.perf_counter() - started
            assert result.counters.answered == args.calls, result.counters
            rate = args.calls / seconds
            ideal = level / (args.latency_ms / 1000.0)
            print(
                f"concurrency {level:>2}: {args.calls} calls in {seconds:.2f} s = "
                f"{rate:.1f} calls/s, ideal {ideal:.1f} calls/s ({rate / ideal:.0%} of ideal)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
