"""A bounded min-heap of (similarity, id) pairs for top-k selection inside numba kernels.

The root is the worst kept pair: lowest similarity, and at equal similarity the larger id, so
draining the heap yields neighbours by descending similarity with ties to the smaller id. The
sparse search (:mod:`eval_pipelines.core.text.retrieval`) and the dense searches
(:mod:`eval_pipelines.core.embeddings`) all keep their top-k here, so they order and break
ties identically.

Only :func:`worse` is inlined by numba. The other helpers stay ordinary calls: forcing them
inline (``inline="always"``) compiled more slowly and measured 2-3% slower on the sparse
search, and no faster on the dense one.

numba's disk cache checks only the source of the file a kernel is defined in, not of the
functions it calls; :mod:`eval_pipelines.core.text.numba_cache` therefore keys the cache folder
by the sources of every kernel module, this one included.
"""

from __future__ import annotations

import numba
import numpy as np

from eval_pipelines.core.text import numba_cache

numba_cache.configure()


@numba.njit(cache=True, inline="always")
def worse(s_a: float, i_a: int, s_b: float, i_b: int) -> bool:
    """Heap order: lower similarity is worse; at equal similarity the larger id is worse."""
    return s_a < s_b or (s_a == s_b and i_a > i_b)


@numba.njit(cache=True)
def sift_down(heap_s: np.ndarray, heap_i: np.ndarray, size: int, pos: int) -> None:
    """Move the pair at ``pos`` down until no child of it is worse (after replacing the root)."""
    s = heap_s[pos]
    i = heap_i[pos]
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        right = child + 1
        if right < size and worse(heap_s[right], heap_i[right], heap_s[child], heap_i[child]):
            child = right
        if not worse(heap_s[child], heap_i[child], s, i):
            break
        heap_s[pos] = heap_s[child]
        heap_i[pos] = heap_i[child]
        pos = child
    heap_s[pos] = s
    heap_i[pos] = i


@numba.njit(cache=True)
def sift_up(heap_s: np.ndarray, heap_i: np.ndarray, pos: int) -> None:
    """Move the pair at ``pos`` up while it is worse than its parent (after appending it)."""
    s = heap_s[pos]
    i = heap_i[pos]
    while pos > 0:
        parent = (pos - 1) // 2
        if not worse(s, i, heap_s[parent], heap_i[parent]):
            break
        heap_s[pos] = heap_s[parent]
        heap_i[pos] = heap_i[parent]
        pos = parent
    heap_s[pos] = s
    heap_i[pos] = i


@numba.njit(cache=True)
def drain_heap(
    heap_s: np.ndarray, heap_i: np.ndarray, size: int, out_i: np.ndarray, out_s: np.ndarray
) -> None:
    """Pop the worst pair to the back until empty: ``out_*[:size]`` ends best-first."""
    while size > 0:
        size -= 1
        out_i[size] = heap_i[0]
        out_s[size] = heap_s[0]
        heap_s[0] = heap_s[size]
        heap_i[0] = heap_i[size]
        sift_down(heap_s, heap_i, size, 0)


@numba.njit(cache=True)
def push_largest(
    heap_s: np.ndarray, heap_i: np.ndarray, size: int, k: int, s: float | np.floating, i: int
) -> int:
    """Keep the k largest pairs seen: add ``(s, i)`` while the heap has room, else replace the
    root if ``s`` is larger (ties keep the pair already held: callers feed ids in ascending
    order, or need only the values). Returns the heap's new size."""
    if size < k:
        heap_s[size] = s
        heap_i[size] = i
        sift_up(heap_s, heap_i, size)
        return size + 1
    if s > heap_s[0]:
        heap_s[0] = s
        heap_i[0] = i
        sift_down(heap_s, heap_i, size, 0)
    return size
