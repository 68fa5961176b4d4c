"""Benchmark the hashed TF-IDF vectoriser and the exact neighbour search on the demo records.

Run from the repository root::

    .venv/bin/python benchmarks/retrieval.py [--queries 5000] [--records PATH]

Prints one ``name: value`` line per measurement. "Cold" timings are the first call in this
process, so they include numba compilation or loading its on-disk cache; pass
``--no-jit-cache`` to force a full compilation into a throwaway cache folder.
"""

from __future__ import annotations

import argparse
import atexit
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
_DEFAULT_RECORDS = _ROOT / "data" / "demo" / "icd10cm_records.parquet"
# Sustained memory bandwidth of this machine, used for the lower bound of the search time.
_BANDWIDTH_BYTES_PER_S = 22.6e9
# Each streamed posting is a 4-byte document id plus a 4-byte float32 weight.
_BYTES_PER_POSTING = 8


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, default=_DEFAULT_RECORDS)
    parser.add_argument("--queries", type=int, default=5000)
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--recall-queries", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2, help="search runs; the best is shown")
    parser.add_argument(
        "--no-jit-cache",
        action="store_true",
        help="compile the numba kernels from scratch (throwaway NUMBA_CACHE_DIR)",
    )
    return parser.parse_args()


def _line(name: str, value: object) -> None:
    if isinstance(value, float):
        value = f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"
    print(f"{name}: {value}", flush=True)


def main() -> None:
    args = _parse_args()
    if args.no_jit_cache:
        # Must happen before numba is imported: it reads the cache folder once.
        cache_dir = tempfile.mkdtemp(prefix="numba-cold-")
        atexit.register(shutil.rmtree, cache_dir, ignore_errors=True)
        os.environ["NUMBA_CACHE_DIR"] = cache_dir
    sys.path.insert(0, str(_ROOT))

    started = time.perf_counter()
    import numpy as np
    import polars as pl

    from eval_pipelines.core.text import retrieval, vectorize

    _line("import_s", time.perf_counter() - started)

    frame = pl.read_parquet(args.records)
    texts = frame.get_column("text").to_list()
    _line("texts", len(texts))
    _line("mean_text_chars", sum(map(len, texts)) / max(1, len(texts)))

    started = time.perf_counter()
    _, matrix = vectorize.fit_transform(texts)
    vectorise_cold = time.perf_counter() - started
    started = time.perf_counter()
    _, matrix = vectorize.fit_transform(texts)
    vectorise_warm = time.perf_counter() - started
    _line("vectorise_cold_s", vectorise_cold)
    _line("vectorise_warm_s", vectorise_warm)
    _line("vectorise_warm_texts_per_s", len(texts) / vectorise_warm)
    _line("nnz", matrix.nnz)
    _line("nnz_per_text", matrix.nnz / max(1, len(texts)))

    started = time.perf_counter()
    index = retrieval.build_text_index(matrix)
    build_cold = time.perf_counter() - started
    started = time.perf_counter()
    index = retrieval.build_text_index(matrix)
    build_warm = time.perf_counter() - started
    _line("index_build_cold_s", build_cold)
    _line("index_build_warm_s", build_warm)
    _line("vectorise_plus_build_cold_s", vectorise_cold + build_cold)

    rng = np.random.default_rng(args.seed)
    n_queries = min(args.queries, index.n_docs)
    queries = rng.choice(index.n_docs, size=n_queries, replace=False)

    started = time.perf_counter()
    retrieval.search(index, queries[:1], k=args.k, near_duplicate_threshold=0.98)
    _line("search_first_call_s", time.perf_counter() - started)

    # Every query streams the posting list of each of its features once.
    posting_lengths = np.diff(index.postings.indptr)
    streamed = int(posting_lengths[index.docs[queries].indices].sum())
    floor = streamed * _BYTES_PER_POSTING / _BANDWIDTH_BYTES_PER_S
    _line(f"postings_streamed_{n_queries}_queries", streamed)
    _line("postings_streamed_per_query", streamed / max(1, n_queries))
    _line("bandwidth_floor_s", floor)

    for threshold in (0.98, 0.93):
        # Best of --repeat runs: other work on the machine only ever adds time.
        wall: list[float] = []
        cpu: list[float] = []
        for _ in range(args.repeat):
            started, started_cpu = time.perf_counter(), time.process_time()
            result = retrieval.search(
                index, queries, k=args.k, near_duplicate_threshold=threshold, n_threads=args.threads
            )
            wall.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
        tag = f"{n_queries}_queries_t{threshold}"
        _line(f"search_{tag}_s", min(wall))
        _line(f"search_{tag}_cpu_s", min(cpu))
        _line(f"search_{tag}_vs_floor", min(wall) / floor if floor else float("nan"))
        _line(
            f"near_duplicates_per_query_t{threshold}",
            result.near_duplicate_indices.size / n_queries,
        )
        _line(f"short_queries_t{threshold}", int((result.neighbours[:, -1] < 0).sum()))

    if "group_key" in frame.columns:
        # Leave-one-group-out, as the holdout evaluation asks: exclude records of the same group.
        groups = frame.get_column("group_key").cast(pl.Categorical).to_physical().to_numpy()
        order = np.argsort(groups, kind="stable")
        bounds = np.searchsorted(groups[order], groups[queries], side="left")
        ends = np.searchsorted(groups[order], groups[queries], side="right")
        lengths = ends - bounds
        exclude_indptr = np.concatenate([[0], np.cumsum(lengths)])
        exclude_indices = order[
            np.repeat(bounds - exclude_indptr[:-1], lengths) + np.arange(exclude_indptr[-1])
        ]
        started = time.perf_counter()
        retrieval.search(
            index,
            queries,
            k=args.k,
            near_duplicate_threshold=0.98,
            exclude_indptr=exclude_indptr,
            exclude_indices=exclude_indices,
            n_threads=args.threads,
        )
        _line(f"search_{n_queries}_queries_t0.98_group_excluded_s", time.perf_counter() - started)
        _line("excluded_per_query", exclude_indptr[-1] / n_queries)

    n_check = min(args.recall_queries, n_queries)
    check = queries[:n_check]
    fast = retrieval.search(index, check, k=args.k, near_duplicate_threshold=0.98)
    started = time.perf_counter()
    slow = retrieval.search_brute_force(index, check, k=args.k, near_duplicate_threshold=0.98)
    _line(f"brute_force_{n_check}_queries_s", time.perf_counter() - started)
    found = sum(
        np.isin(slow.neighbours[i][slow.neighbours[i] >= 0], fast.neighbours[i]).sum()
        for i in range(n_check)
    )
    wanted = int((slow.neighbours >= 0).sum())
    _line(f"recall_vs_brute_force_{n_check}_queries", found / wanted if wanted else 1.0)
    _line("identical_order", bool(np.array_equal(fast.neighbours, slow.neighbours)))
    _line(
        "identical_near_duplicates",
        bool(
            np.array_equal(fast.near_duplicate_indptr, slow.near_duplicate_indptr)
            and np.array_equal(fast.near_duplicate_indices, slow.near_duplicate_indices)
        ),
    )

    # ru_maxrss is in KiB on Linux.
    _line("peak_rss_mb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


if __name__ == "__main__":
    main()
