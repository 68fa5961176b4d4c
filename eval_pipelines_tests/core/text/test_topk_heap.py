"""The shared top-k heap keeps the k best (similarity, id) pairs, ties to the smaller id.

It lives in :mod:`eval_pipelines.core.text.topk_heap`; its tests sit here, beside the sparse search
that leans on it hardest.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from eval_pipelines.core.text.topk_heap import drain_heap, sift_down, sift_up, worse


@numba.njit
def _top_k(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Push every pair through the heap as the search kernels do, then drain it."""
    heap_s = np.empty(k, dtype=np.float32)
    heap_i = np.empty(k, dtype=np.int32)
    size = 0
    for j in range(scores.shape[0]):
        s = scores[j]
        d = ids[j]
        if size < k:
            heap_s[size] = s
            heap_i[size] = d
            sift_up(heap_s, heap_i, size)
            size += 1
        elif worse(heap_s[0], heap_i[0], s, d):
            heap_s[0] = s
            heap_i[0] = d
            sift_down(heap_s, heap_i, size, 0)
    out_i = np.full(k, -1, dtype=np.int32)
    out_s = np.zeros(k, dtype=np.float32)
    drain_heap(heap_s, heap_i, size, out_i, out_s)
    return out_i, out_s


def test_worse_orders_by_similarity_then_larger_id() -> None:
    assert worse(0.1, 1, 0.2, 9)
    assert not worse(0.2, 9, 0.1, 1)
    assert worse(0.5, 7, 0.5, 3)
    assert not worse(0.5, 3, 0.5, 7)
    assert not worse(0.5, 3, 0.5, 3)


@pytest.mark.exhaustive
@pytest.mark.parametrize("k", [1, 2, 7, 50, 120])
def test_heap_keeps_the_k_best_in_order_with_ties_to_smaller_ids(k: int) -> None:
    rng = np.random.default_rng(k)
    n = 100
    # Few distinct scores, so most comparisons are ties; ids arrive in random order.
    scores = rng.integers(0, 6, size=n).astype(np.float32) / 5
    ids = rng.permutation(n).astype(np.int32)
    got_i, got_s = _top_k(scores, ids, k)
    order = np.lexsort((ids, -scores))[:k]
    kept = min(k, n)
    np.testing.assert_array_equal(got_i[:kept], ids[order])
    np.testing.assert_array_equal(got_s[:kept], scores[order])
    # Fewer pairs than k: the rest of the output is left untouched.
    assert (got_i[kept:] == -1).all() and (got_s[kept:] == 0).all()
