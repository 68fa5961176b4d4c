"""Compile and cache the dense-search kernels and pynndescent once (``make install``).

What this buys (measured by ``benchmarks/dense.py --jit``; figures in docs/benchmarks.md): a
new process loads an index and runs its queries with nothing compiled. Building an index still
compiles pynndescent's NN-descent in every process, because those kernels take the distance
function as an argument and call ``numba.get_num_threads()``, which numba cannot cache; builds
are therefore cached on disk per embedding set.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def warm_up_dense() -> float:
    """Run every compiled path of the dense search on tiny data; returns the seconds taken.

    Covers the exact search (blocked scan, drain), the LSA projection, the embedding checks,
    and pynndescent's build, preparation, query, pickle round trip and the exact rescoring
    of its candidates, with the same array types as real data (float32, C order), so the
    specialisations compiled here are the ones real runs load from the cache.
    """
    from eval_pipelines.core.embeddings.ann import (
        build_ann_index,
        load_ann_index,
        measure_recall,
        save_ann_index,
        search_ann,
    )
    from eval_pipelines.core.embeddings.dense import search_dense
    from eval_pipelines.core.embeddings.lsa import lsa_vectors
    from eval_pipelines.core.embeddings.vectors import check_embeddings
    from eval_pipelines.core.text.vectorize import fit_transform

    started = time.perf_counter()
    words = "warm up the dense kernels with a few short texts about fractures and burns".split()
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, size=5)) for _ in range(300)]
    keys = [f"r{i}" for i in range(len(texts))]
    vectors = check_embeddings(keys, keys, lsa_vectors(fit_transform(texts)[1], dim=8, seed=0))
    queries = np.arange(20)
    exclude_indptr = np.arange(21, dtype=np.int64)
    exclude_indices = np.arange(1, 21, dtype=np.int32)
    options: dict[str, Any] = dict(
        k=5,
        near_duplicate_threshold=0.99,
        exclude_indptr=exclude_indptr,
        exclude_indices=exclude_indices,
    )
    search_dense(vectors, queries, **options)
    index = build_ann_index(vectors, seed=0, n_threads=2)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "warm_up.pkl"
        save_ann_index(index, path)
        index = load_ann_index(path, vectors)
    # Searches read vectors memory-mapped read-only from the index folder, a distinct array
    # type for numba: compile that specialisation too.
    frozen = vectors.copy()
    frozen.flags.writeable = False
    for array in (vectors, frozen):
        search_ann(index, array, queries, **options)
    search_dense(frozen, queries, **options)
    measure_recall(index, vectors, k=5, probe=20, seed=0)
    return time.perf_counter() - started
