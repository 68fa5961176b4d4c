"""Benchmark the holdout evaluation on the demo case (ICD-10-CM, 130,525 records).

Run from the repository root (``make bench`` does)::

    .venv/bin/python benchmarks/holdout.py [--workdir DIR] [--sizes 200,5000]

Prints ``name: value`` lines: text-index build time cold (fresh process, empty numba
cache: includes JIT compilation) and warm, the kernels' warm-up (what ``make install`` runs,
so that the evaluations after it pay no JIT), end-to-end ``eval holdout --wait`` wall time with
two variants per sample size (no daemon runs, as without ``make dev``: the waiting CLI
executes the run in its own process), the retrieval step alone with its
memory-bandwidth floor, peak RSS of the run process, and the recall of the search against
brute force.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import line, memory_bandwidth, timed

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "demo"
BYTES_PER_POSTING = 8  # int32 document id + float32 weight
VARIANTS = [{"name": "baseline"}, {"name": "five-nearest", "config": {"candidates": 5}}]

BUILD_INDEX = """
import time, sys
from pathlib import Path
from eval_pipelines.storage.warehouse import connect
from eval_pipelines.storage.cases import load_case, load_records
from eval_pipelines.stages.text_index import load_or_build_index
with connect(Path(sys.argv[1]), read_only=True) as conn:
    info = load_case(conn, "icd10cm")
    texts = load_records(conn, "icd10cm", info.records_version).get_column("text").to_list()
started = time.perf_counter()
handle = load_or_build_index(Path(sys.argv[2]), "icd10cm", info.records_version, texts)
print(time.perf_counter() - started, handle.built)
"""

RUN_INLINE = """
import sys, json
from eval_pipelines import api
variants = json.loads(sys.argv[1])
started = api.start_holdout_eval("icd10cm", variants, sample_size=int(sys.argv[2]), seed=7,
                                 wait=True)
assert started.status == "complete", started
"""


def peak_rss_mb(command: list[str], env: dict[str, str]) -> float:
    """Peak resident memory of a child process, in MB (Linux reports ru_maxrss in KB)."""
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"{command} failed with status {status}")
    return usage.ru_maxrss / 1024


def retrieval_figures(warehouse: Path, index_dir: Path, queries: int, threads: int) -> None:
    import numpy as np

    from eval_pipelines.core.holdout.grouping import compute_leave_out
    from eval_pipelines.core.holdout.grouping_settings import Grouping
    from eval_pipelines.core.text.retrieval import search, search_brute_force
    from eval_pipelines.stages.text_index import load_or_build_index
    from eval_pipelines.storage.cases import load_case, load_records
    from eval_pipelines.storage.warehouse import connect

    with connect(warehouse, read_only=True) as conn:
        info = load_case(conn, "icd10cm")
        records = load_records(conn, "icd10cm", info.records_version)
    handle = load_or_build_index(
        index_dir, "icd10cm", info.records_version, records.get_column("text").to_list()
    )
    line("index_load_cached_s", handle.seconds)
    index = handle.index
    rng = np.random.default_rng(7)
    positions = rng.choice(index.n_docs, size=queries, replace=False).astype(np.int64)
    keys = records.get_column("record_key").to_list()
    metadata = records.get_column("metadata").to_list()
    search(index, positions[:10], k=20, near_duplicate_threshold=0.98, n_threads=threads)
    started = time.perf_counter()
    compute_leave_out(
        index, keys, metadata, positions, Grouping(), candidates=20, n_threads=threads
    )
    seconds = time.perf_counter() - started
    # The postings of every query feature, in every segment: what a scan without pruning reads.
    features = index.rows(positions).indices
    postings = sum(
        int(np.diff(segment.postings.indptr)[features].sum()) for segment in index.segments
    )
    bandwidth = memory_bandwidth(threads, 3)
    floor = postings * BYTES_PER_POSTING / bandwidth
    line(f"retrieval_{queries}_queries_s", seconds)
    line("retrieval_postings_streamed", postings)
    line(f"memory_bandwidth_gb_per_s_{threads}_threads", bandwidth / 1e9)
    line("retrieval_bandwidth_floor_s", floor)
    line("retrieval_ratio_to_floor", seconds / floor)
    sample = positions[:300]
    fast = search(index, sample, k=20, near_duplicate_threshold=0.98, n_threads=threads)
    exact = search_brute_force(index, sample, k=20, near_duplicate_threshold=0.98)
    hits = sum(
        len(set(a[a >= 0]) & set(b[b >= 0]))
        for a, b in zip(fast.neighbours, exact.neighbours, strict=True)
    )
    total = int((exact.neighbours >= 0).sum())
    line("recall_at_20_vs_brute_force_300_queries", hits / total if total else 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--sizes", default="200,5000")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="eval-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    warehouse, index_dir = workdir / "warehouse.duckdb", workdir / "indexes"
    env = dict(
        os.environ,
        EVAL_PIPELINES_WAREHOUSE=str(warehouse),
        EVAL_PIPELINES_INDEX_DIR=str(index_dir),
        DAGSTER_HOME=str(workdir / "dagster"),
        EVAL_PIPELINES_THREADS=str(args.threads),
        NUMBA_CACHE_DIR=str(workdir / "numba-cache"),
    )
    (workdir / "dagster").mkdir(exist_ok=True)
    python, cli = sys.executable, [sys.executable, "-m", "eval_pipelines.cli.main"]
    line("workdir", workdir)
    line("cpu_count", os.cpu_count() or 0)

    seconds, _ = timed(
        [
            *cli,
            "case",
            "create",
            "icd10cm",
            "--records",
            str(DEMO / "icd10cm_records.parquet"),
            "--tree",
            str(DEMO / "icd10cm_tree.parquet"),
            "--target-depth",
            "3,4",
            "--replace",
        ],
        env,
    )
    line("case_create_s", seconds)
    cold_wall, out = timed([python, "-c", BUILD_INDEX, str(warehouse), str(index_dir)], env)
    line("index_build_cold_s", float(out.split()[0]))
    line("index_build_cold_process_wall_s", cold_wall)
    # Cached indexes are directories of .npy files: removed, the next step builds again.
    for folder in index_dir.glob("*.tfidf"):
        shutil.rmtree(folder)
    warm_wall, out = timed([python, "-c", BUILD_INDEX, str(warehouse), str(index_dir)], env)
    line("index_build_warm_s", float(out.split()[0]))
    line("index_build_warm_process_wall_s", warm_wall)

    # The kernels the evaluations use, compiled into this benchmark's numba cache as
    # `make install` compiles them for a user: no timed command below pays the JIT.
    warmup_wall, _ = timed([python, "-m", "eval_pipelines.core.warmup"], env)
    line("jit_warmup_s", warmup_wall)

    variants = workdir / "variants.json"
    variants.write_text(json.dumps(VARIANTS))
    for size in [int(s) for s in args.sizes.split(",")]:
        seconds, out = timed(
            [
                *cli,
                "eval",
                "holdout",
                "icd10cm",
                "--variants-file",
                str(variants),
                "--sample-size",
                str(size),
                "--seed",
                "7",
                "--wait",
                "--json",
            ],
            env,
        )
        report = json.loads(out)["report"]
        line(f"eval_holdout_wait_{size}x2_s", seconds)
        for variant in report["variants"]:
            value = variant["score"]["targetDepth"]["4"]["value"]
            line(f"accuracy_L4_{size}_{variant['name']}", value)
        rss = peak_rss_mb([python, "-c", RUN_INLINE, json.dumps(VARIANTS), str(size)], env)
        line(f"peak_rss_run_{size}x2_mb", rss)

    retrieval_figures(
        warehouse, index_dir, max(int(s) for s in args.sizes.split(",")), args.threads
    )


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
