"""Benchmark a whole holdout evaluation with a knn-vote and a ``chat`` variant against the
local stand-in server.

Run from the repository root::

    .venv/bin/python benchmarks/chat_holdout.py [--sample-size 200] [--latency-ms 200]
        [--concurrency 4]

Creates the four-chapter ICD-10-CM case of the tests (3,049 records from ``data/demo``) in a
fresh warehouse and Dagster home under a temporary folder, starts the stand-in
(``eval_pipelines.chat_standin``) with the given latency, runs the evaluation in process
(``api.start_holdout_eval(..., wait=True)``) and prints: the chat step's seconds against the
ideal ``records x latency / concurrency``, the estimate made before the run against the
tokens the stand-in reported (whitespace words), and the requests a re-run sends (0: every
answer from the cache).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"
CHAPTERS = ["3", "8", "10", "16"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample-size", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        os.environ["EVAL_PIPELINES_WAREHOUSE"] = str(root / "warehouse.duckdb")
        os.environ["EVAL_PIPELINES_INDEX_DIR"] = str(root / "indexes")
        os.environ["DAGSTER_HOME"] = str(root / "dagster_home")
        (root / "dagster_home").mkdir()
        from eval_pipelines import api
        from eval_pipelines.chat_standin.server import serve_standin

        for name in ("records", "tree"):
            frame = pl.read_parquet(DEMO / f"icd10cm_{name}.parquet")
            frame.filter(pl.col("chapter").is_in(CHAPTERS)).write_parquet(root / f"{name}.parquet")
        api.create_case(
            "small",
            api.CaseSource(
                root / "records.parquet", tree_path=root / "tree.parquet", target_depth=[3, 4]
            ),
        )
        with serve_standin(latency_ms=args.latency_ms) as server:
            config = {
                "classifier": "chat",
                "candidates": 10,
                "concurrency": args.concurrency,
                "options": {"model": "standin", "baseUrl": server.base_url},
            }
            variants = [{"name": "baseline"}, {"name": "chat", "config": config}]
            started = time.perf_counter()
            launched = api.start_holdout_eval(
                "small",
                variants,
                api.HoldoutOptions(sample_size=args.sample_size, seed=12),
                wait=True,
            )
            seconds = time.perf_counter() - started
            report = api.get_holdout_eval("small", launched.eval_id).report
            assert report is not None
            usage = report["variants"][1]["usage"]
            ideal = usage["classifyCalls"] * args.latency_ms / 1000 / args.concurrency
            estimate = usage["chat"]["estimate"]
            print(f"evaluation: {seconds:.1f} s in all (case created before the clock)")
            print(
                f"chat step: {usage['seconds']:.1f} s for {usage['classifyCalls']} calls, ideal "
                f"{ideal:.1f} s ({ideal / usage['seconds']:.0%} of ideal)"
            )
            print(
                f"tokens: estimated {estimate['tokens']:,} (input {estimate['inputTokens']:,}), "
                f"reported {usage['tokens']:,} (input {usage['inputTokens']:,}): "
                f"{estimate['tokens'] / usage['tokens']:.2f}x, input "
                f"{estimate['inputTokens'] / usage['inputTokens']:.2f}x"
            )
            before = server.request_count
            api.rerun_holdout_eval("small", launched.eval_id, wait=True)
            print(f"re-run: {server.request_count - before} requests sent")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
