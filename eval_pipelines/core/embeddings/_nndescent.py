"""The two calls into pynndescent: build a prepared index, and fetch candidate ids.

Kept apart so that :mod:`eval_pipelines.core.embeddings.ann` holds no pynndescent details,
and pynndescent (whose import loads hundreds of compiled functions, seconds even from the
cache) is imported on first use only.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from eval_pipelines.core.text import numba_cache
from eval_pipelines.core.text.interrupts import deferred_interrupts

# Before pynndescent is imported: its cached functions go to the same folder as ours.
numba_cache.configure()


def build(vectors: np.ndarray, *, seed: int, n_threads: int) -> Any:
    """A prepared ``NNDescent`` over unit vectors (metric ``"dot"``)."""
    import pynndescent

    previous = numba.get_num_threads()
    # The build runs numba's parallel kernels, where an interrupt (how Dagster terminates a
    # run) would crash the process instead of raising: it is delivered once the build ends.
    with deferred_interrupts():
        try:
            index = pynndescent.NNDescent(
                vectors, metric="dot", random_state=seed, n_jobs=n_threads, compressed=False
            )
            index.prepare()
        finally:
            # pynndescent restores the thread count on success, not on an exception.
            numba.set_num_threads(previous)
    return index


def query(index: Any, query_vectors: np.ndarray, fetch: int) -> np.ndarray:
    """int32 ``(n_queries, fetch)`` candidate ids (``-1`` where the graph search found fewer)."""
    ids = index.query_indices(
        np.ascontiguousarray(query_vectors, dtype=np.float32), k=fetch, pre_normalized=True
    )
    return np.ascontiguousarray(ids, dtype=np.int32)
