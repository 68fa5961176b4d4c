"""Compile and cache the numeric kernels once (``make install`` runs this), so the first
evaluation does not pay the JIT cost."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np


def _warm_sparse_search() -> None:
    """The vectoriser and the sparse neighbour search, pruned and plain.

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


def main() -> None:
    from eval_pipelines.core.embeddings.warmup import warm_up_dense

    started = time.perf_counter()
    _warm_sparse_search()
    # The dense search and pynndescent (a build, queries, save and load): pynndescent's own
    # kernels take minutes to compile cold, which a user's first command must never pay.
    warm_up_dense()
    print(f"numeric kernels ready in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
