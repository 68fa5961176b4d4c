"""Benchmark the dense embedding path on the demo records: LSA, exact search against faiss,
pynndescent (build, queries, recall) and the size at which ``auto`` should pick it.

Run from the repository root::

    .venv/bin/python benchmarks/dense.py [--records PATH] [--queries 5000] [--dim 256]
                                         [--sizes 30k,60k,130k,1m] [--jit | --jit-only]

Prints one ``name: value`` line per measurement; times are the best of ``--repeat`` runs
(other work on the machine only ever adds time). Sizes beyond the number of records are
synthesised by jittering records' vectors (Gaussian noise of 0.1 per unit vector, then
normalised), which keeps their neighbourhood structure. ``--jit`` also measures numba
compilation in fresh processes with an empty cache folder: the cold warm-up, then what a
user's first command pays afterwards.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
_DEFAULT_RECORDS = _ROOT / "data" / "demo" / "icd10cm_records.parquet"
_JITTER = 0.1


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=Path, default=_DEFAULT_RECORDS)
    parser.add_argument("--queries", type=int, default=5000)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--sizes", default="30k,60k,130k", help="corpus sizes for the crossover")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="search runs; the best is shown")
    parser.add_argument("--probe", type=int, default=1000, help="queries of the recall probe")
    parser.add_argument("--jit", action="store_true", help="also measure numba compilation")
    parser.add_argument(
        "--jit-only", action="store_true", help="only the LSA and the compilation measurements"
    )
    return parser.parse_args()


def _line(name: str, value: object) -> None:
    if isinstance(value, float):
        value = f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"
    print(f"{name}: {value}", flush=True)


def _size(text: str) -> int:
    text = text.strip().lower()
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text.rstrip("km")) * factor)


def _best(run: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result


def _corpus(vectors: Any, size: int, seed: int) -> Any:
    """``size`` unit vectors: a sample of the records' vectors, jittered copies beyond them."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = vectors.shape[0]
    if size <= n:
        return np.ascontiguousarray(vectors[np.sort(rng.choice(n, size, replace=False))])
    extra = vectors[rng.integers(n, size=size - n)]
    extra = extra + np.float32(_JITTER / np.sqrt(vectors.shape[1])) * rng.standard_normal(
        extra.shape, dtype=np.float32
    )
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    return np.ascontiguousarray(np.concatenate([vectors, extra]), dtype=np.float32)


def _power_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(coefficient at x = 1e5, exponent) of a least-squares line through log x, log y."""
    import numpy as np

    slope, intercept = np.polyfit(np.log(np.asarray(xs) / 1e5), np.log(ys), 1)
    return float(np.exp(intercept)), float(slope)


def main() -> None:
    args = _parse_args()
    # faiss runs on OpenMP, whose idle threads spin by default: on a shared 2-core machine
    # they fight the other processes and faiss loses half its speed. Passive waiting gives it
    # its best time here. It must be set before any OpenMP runtime loads (scikit-learn's
    # does, for the LSA).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    sys.path.insert(0, str(_ROOT))
    import numpy as np
    import polars as pl

    from eval_pipelines.core.embeddings.dense import search_dense
    from eval_pipelines.core.embeddings.lsa import lsa_vectors
    from eval_pipelines.core.text.vectorize import fit_transform

    frame = pl.read_parquet(args.records).sort("record_key")
    texts = frame.get_column("text").to_list()
    _line("records", len(texts))
    _, matrix = fit_transform(texts)
    started = time.perf_counter()
    vectors = lsa_vectors(matrix, dim=args.dim, seed=args.seed, n_threads=args.threads)
    _line(f"lsa_dim{args.dim}_s", time.perf_counter() - started)

    rng = np.random.default_rng(args.seed)
    n_queries = min(args.queries, vectors.shape[0])
    queries = np.sort(rng.choice(vectors.shape[0], size=n_queries, replace=False))
    search_dense(vectors, queries[:10], k=5)  # load the kernels from the numba cache

    if not args.jit_only:
        _exact_vs_faiss(args, vectors, queries)
        exact20 = search_dense(vectors, queries, k=20, n_threads=args.threads)
        _pynndescent(args, vectors, queries, exact20)
        _crossover(args, vectors)
    if args.jit or args.jit_only:
        _jit(args, vectors)


def _pynndescent(args: argparse.Namespace, vectors: Any, queries: Any, exact20: Any) -> None:
    """Build time (first in the process, then again), query time and recall at 130k."""
    import numpy as np

    from eval_pipelines.core.embeddings import ann

    n_queries = queries.shape[0]
    # The first build in a process includes compiling NN-descent.
    started = time.perf_counter()
    index = ann.build_ann_index(vectors, seed=args.seed, n_threads=args.threads)
    _line("pynndescent_first_build_s", time.perf_counter() - started)
    build_s, index = _best(
        lambda: ann.build_ann_index(vectors, seed=args.seed, n_threads=args.threads), 1
    )
    _line("pynndescent_build_s", build_s)
    raw_s, _ = _best(lambda: index.nndescent.query_indices(vectors[queries], k=21), args.repeat)
    _line(f"pynndescent_raw_query_{n_queries}_k21_s", raw_s)
    query_s, found = _best(
        lambda: ann.search_ann(index, vectors, queries, k=20, n_threads=args.threads),
        args.repeat,
    )
    _line(f"pynndescent_search_{n_queries}_k20_s", query_s)
    _line("pynndescent_fallback_queries", found.fallback_queries)
    hits = sum(
        np.isin(want, got).sum()
        for got, want in zip(found.result.neighbours, exact20.neighbours, strict=True)
    )
    _line(f"pynndescent_recall_at_20_{n_queries}_queries", hits / exact20.neighbours.size)
    recall = ann.measure_recall(index, vectors, k=20, probe=args.probe, seed=args.seed)
    _line(f"pynndescent_recall_at_20_probe{recall.probe_queries}", recall.recall_at_k)
    _line("end_to_end_pynndescent_s", build_s + query_s)


def _exact_vs_faiss(args: argparse.Namespace, vectors: Any, queries: Any) -> None:
    from eval_pipelines.core.embeddings.dense import search_dense

    faiss: Any
    try:
        import faiss
    except ImportError:
        faiss = None
        _line("faiss", "not installed")
    if faiss is not None:
        faiss.omp_set_num_threads(args.threads)
        flat = faiss.IndexFlatIP(vectors.shape[1])
        flat.add(vectors)
    n = queries.shape[0]
    for k in (20, 64):
        ours = faiss_s = ours_cpu = faiss_cpu = float("inf")
        # Interleaved, so that both see the same background load.
        for _ in range(args.repeat):
            started, started_cpu = time.perf_counter(), time.process_time()
            search_dense(vectors, queries, k=k, n_threads=args.threads)
            ours = min(ours, time.perf_counter() - started)
            ours_cpu = min(ours_cpu, time.process_time() - started_cpu)
            if faiss is not None:
                started, started_cpu = time.perf_counter(), time.process_time()
                flat.search(vectors[queries], k + 1)  # k + 1: the query finds itself
                faiss_s = min(faiss_s, time.perf_counter() - started)
                faiss_cpu = min(faiss_cpu, time.process_time() - started_cpu)
        _line(f"exact_dense_{n}_queries_k{k}_s", ours)
        _line(f"exact_dense_{n}_queries_k{k}_cpu_s", ours_cpu)
        started = time.perf_counter()
        search_dense(vectors, queries, k=k, near_duplicate_threshold=0.98, n_threads=args.threads)
        _line(f"exact_dense_{n}_queries_k{k}_t0.98_s", time.perf_counter() - started)
        if faiss is not None:
            _line(f"faiss_flat_ip_{n}_queries_k{k}_s", faiss_s)
            _line(f"faiss_flat_ip_{n}_queries_k{k}_cpu_s", faiss_cpu)
            _line(f"exact_dense_vs_faiss_k{k}", ours / faiss_s)
    flops = 2.0 * n * vectors.shape[0] * vectors.shape[1]
    _line("exact_dense_gflop", flops / 1e9)


def _crossover(args: argparse.Namespace, vectors: Any) -> None:
    """Exact search vs pynndescent build + queries at several sizes; fitted power laws."""
    import numpy as np

    from eval_pipelines.core.embeddings import ann
    from eval_pipelines.core.embeddings.dense import search_dense

    sizes = sorted(_size(s) for s in args.sizes.split(","))
    exact_s: list[float] = []
    build_s: list[float] = []
    query_s: list[float] = []
    for size in sizes:
        corpus = _corpus(vectors, size, args.seed)
        rng = np.random.default_rng(args.seed)
        queries = np.sort(rng.choice(size, size=min(args.queries, size), replace=False))
        exact, _ = _best(
            functools.partial(search_dense, corpus, queries, k=20, n_threads=args.threads),
            args.repeat,
        )
        build, index = _best(
            functools.partial(ann.build_ann_index, corpus, seed=args.seed, n_threads=args.threads),
            1,
        )
        search, _ = _best(
            functools.partial(ann.search_ann, index, corpus, queries, k=20, n_threads=args.threads),
            args.repeat,
        )
        del index
        tag = f"{size // 1000}k"
        _line(f"crossover_{tag}_exact_s", exact)
        _line(f"crossover_{tag}_pynndescent_build_s", build)
        _line(f"crossover_{tag}_pynndescent_search_s", search)
        exact_s.append(exact / queries.size)
        build_s.append(build)
        query_s.append(search / queries.size)
    if len(sizes) < 2:
        return
    exact_at, exact_exp = _power_fit(sizes, exact_s)
    build_at, build_exp = _power_fit(sizes, build_s)
    query_at, query_exp = _power_fit(sizes, query_s)
    _line("fit_exact_per_query_at_100k_s", exact_at)
    _line("fit_exact_exponent", exact_exp)
    _line("fit_build_at_100k_s", build_at)
    _line("fit_build_exponent", build_exp)
    _line("fit_query_each_at_100k_s", query_at)
    _line("fit_query_exponent", query_exp)

    def gap(n: float, q: float) -> float:
        scale = n / 1e5
        return (build_at * scale**build_exp + q * query_at * scale**query_exp) - (
            q * exact_at * scale**exact_exp
        )

    grid = np.logspace(4, 9, 501)
    wins = [n for n in grid if gap(n, args.queries) < 0]
    _line(
        f"crossover_records_at_{args.queries}_queries",
        f"{wins[0]:.3g}" if wins else "none up to 1e9 (the build never pays)",
    )
    for n in (1e5, 1e6, 1e7):
        scale = n / 1e5
        per_query = exact_at * scale**exact_exp - query_at * scale**query_exp
        needed = build_at * scale**build_exp / per_query if per_query > 0 else float("inf")
        _line(f"crossover_queries_at_{int(n):d}_records", f"{needed:.3g}")


_JIT_SCRIPT = """
import json, pickle, sys, time
started = time.perf_counter()
sys.path.insert(0, {root!r})
import numpy as np
mode, vectors_path, index_path = sys.argv[1:4]
out = {{}}
if mode == "warm_up":
    from eval_pipelines.core.embeddings.warmup import warm_up_dense
    out["warm_up_s"] = warm_up_dense()
else:
    from eval_pipelines.core.embeddings import ann
    vectors = np.load(vectors_path)
    queries = np.sort(np.random.default_rng(0).choice(vectors.shape[0], 5000, replace=False))
    out["import_s"] = time.perf_counter() - started
    t = time.perf_counter()
    if mode == "build":
        index = ann.build_ann_index(vectors, seed=0, n_threads={threads})
        ann.save_ann_index(index, index_path)
        out["build_s"] = time.perf_counter() - t
    else:
        index = ann.load_ann_index(index_path, vectors)
        out["load_s"] = time.perf_counter() - t
    t = time.perf_counter()
    ann.search_ann(index, vectors, queries, k=20, n_threads={threads})
    out["first_search_s"] = time.perf_counter() - t
    t = time.perf_counter()
    ann.search_ann(index, vectors, queries, k=20, n_threads={threads})
    out["second_search_s"] = time.perf_counter() - t
out["process_s"] = time.perf_counter() - started
print(json.dumps(out))
"""


def _jit(args: argparse.Namespace, vectors: Any) -> None:
    """Fresh processes with an empty numba cache: cold warm-up, then a build and a load."""
    import numpy as np

    folder = Path(tempfile.mkdtemp(prefix="dense-jit-"))
    try:
        env = {**os.environ, "NUMBA_CACHE_DIR": str(folder / "numba")}
        vectors_path = folder / "vectors.npy"
        np.save(vectors_path, vectors)
        index_path = folder / "index.pkl"
        script = _JIT_SCRIPT.format(root=str(_ROOT), threads=args.threads)
        for mode in ("warm_up", "build", "load"):
            started = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", script, mode, str(vectors_path), str(index_path)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            wall = time.perf_counter() - started
            for name, value in json.loads(out.stdout.strip().splitlines()[-1]).items():
                _line(f"jit_{mode}_{name}", float(value))
            _line(f"jit_{mode}_wall_s", wall)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
