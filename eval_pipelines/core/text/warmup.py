"""Compile and cache the sparse-search kernels once (``make install``, through
:mod:`eval_pipelines.core.warmup`), so the first evaluation does not pay the JIT cost."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np


def warm_up_sparse() -> float:
    """Run the vectoriser and the sparse neighbour search, pruned and plain, on tiny data;
    returns the seconds taken.

    numba compiles one version per argument type, and read-only arrays are a type of their
    own: the search hands its kernels read-only views either way, but the index is also
    saved and searched memory-mapped, as the stages use it, so that exactly their calls are
    compiled and cached here.
    """
    from eval_pipelines.core.text.inverted_index import build_text_index
    from eval_pipelines.core.text.retrieval import search
    from eval_pipelines.core.text.segments import load_segmented_index, write_segmented_index
    from eval_pipelines.core.text.shards import search_sharded
    from eval_pipelines.core.text.vectorize import fit_transform

    started = time.perf_counter()
    texts = ["warm up the kernels", "warm the kernels up", "another text", "kernels"]
    built = build_text_index(fit_transform(texts)[1])
    queries = np.arange(len(texts))
    with tempfile.TemporaryDirectory(prefix="eval-pipelines-warmup-") as folder:
        path = Path(folder) / "warmup.tfidf"
        # Two segments, as a large case's index has them.
        write_segmented_index(texts, path, segment_docs=2)
        loaded = load_segmented_index(path)
        for index in (built, loaded):
            for prune in (True, False):
                search(index, queries, k=2, near_duplicate_threshold=0.9, prune=prune)
        search_sharded(loaded, queries, shards=2, k=2, near_duplicate_threshold=0.9)
    return time.perf_counter() - started
