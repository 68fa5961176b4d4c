"""A bounded min-heap of (similarity, id) pairs for top-k selection inside numba kernels.

The root is the worst kept pair: lowest similarity, and at equal similarity the larger id, so
draining the heap yields neighbours by descending similarity with ties to the smaller id.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def worse(s_a: float, i_a: int, s_b: float, i_b: int) -> bool:
    """Heap order: lower similarity is worse; at equal similarity the larger id is worse."""
    return s_a < s_b or (s_a == s_b and i_a > i_b)


@numba.njit(cache=True, inline="always")
def sift_down(heap_s: np.ndarray, heap_i: np.ndarray, size: int, pos: int) -> None:
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


@numba.njit(cache=True, inline="always")
def sift_up(heap_s: np.ndarray, heap_i: np.ndarray, pos: int) -> None:
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


@numba.njit(cache=True, inline="always")
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
