"""The numba kernel of the exact sparse search's plain scan (:func:`search_kernel`,
``prune=False``: every posting of every query feature), and the posting-list lookup it shares
with the pruned search (:mod:`eval_pipelines.core.text.pruned_search`).
:mod:`eval_pipelines.core.text.retrieval` checks the arguments and drives them."""

from __future__ import annotations

import numba
import numpy as np

from eval_pipelines.core.text import numba_cache
from eval_pipelines.core.text.topk_heap import drain_heap, push_largest

numba_cache.configure()


@numba.njit(cache=True)
def _lower_bound(ids: np.ndarray, start: int, stop: int, value: int) -> int:
    """First position in the sorted ``ids[start:stop]`` holding an id >= ``value``."""
    while start < stop:
        mid = (start + stop) // 2
        if ids[mid] < value:
            start = mid + 1
        else:
            stop = mid
    return start


@numba.njit(cache=True)
def posting_span(
    post_indptr: np.ndarray, post_indices: np.ndarray, f: int, lo: int, hi: int, whole: bool
) -> tuple[int, int]:
    """The part of feature ``f``'s posting list whose documents lie in ``[lo, hi)``.

    Lists are sorted by document, so two binary searches find it; ``whole`` skips them when
    the range is every document.
    """
    start = int(post_indptr[f])
    stop = int(post_indptr[f + 1])
    if whole:
        return start, stop
    first = _lower_bound(post_indices, start, stop, lo)
    return first, _lower_bound(post_indices, first, stop, hi)


@numba.njit(cache=True, parallel=True)
def search_kernel(
    docs_indptr: np.ndarray,
    docs_indices: np.ndarray,
    docs_data: np.ndarray,
    post_indptr: np.ndarray,
    post_indices: np.ndarray,
    post_data: np.ndarray,
    lo: int,
    hi: int,
    whole: bool,
    q_indptr: np.ndarray,
    q_indices: np.ndarray,
    q_data: np.ndarray,
    q_self: np.ndarray,
    k: int,
    use_threshold: bool,
    cut: np.float32,
    excl_indptr: np.ndarray,
    excl_indices: np.ndarray,
    nd_cap: int,
    n_chunks: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Inverted-index scan of documents ``[lo, hi)``: every posting of every query feature.

    Query ``i`` is row ``i`` of the CSR ``(q_indptr, q_indices, q_data)``; ``q_self[i]`` is
    its id among this index's documents (outside ``[lo, hi)`` when it is not one of them), so
    that it is never its own neighbour. Returns neighbours, similarities, near-duplicate
    counts and ids, and postings read per query. ``nd_buf[i]`` holds the first ``nd_cap``
    near-duplicates of query ``i``; ``nd_counts[i]`` is the true count, so the caller can tell
    when the buffer overflowed.
    """
    n_queries = q_self.shape[0]
    n_range = hi - lo
    # Posting ids are uint32 (see _unsigned): subtracting an unsigned offset keeps the local
    # id unsigned, so numba needs no negative-index check in the innermost loop.
    lo_u = np.uint64(lo)
    neighbours = np.full((n_queries, k), -1, dtype=np.int32)
    similarities = np.zeros((n_queries, k), dtype=np.float32)
    nd_counts = np.zeros(n_queries, dtype=np.int64)
    nd_buf = np.empty((n_queries, max(nd_cap, 1)), dtype=np.int32)
    reads = np.zeros(n_queries, dtype=np.int64)
    # One chunk per thread; chunk c takes queries c, c + n_chunks, ... so that the cost of
    # expensive queries spreads evenly under prange's static schedule.
    for chunk in numba.prange(n_chunks):
        acc = np.zeros(n_range, dtype=np.float32)
        excluded = np.zeros(n_range, dtype=np.bool_)
        heap_s = np.empty(k, dtype=np.float32)
        heap_i = np.empty(k, dtype=np.int32)
        for qi in range(chunk, n_queries, n_chunks):
            q = q_self[qi]
            read = 0
            for jj in range(q_indptr[qi], q_indptr[qi + 1]):
                wq = q_data[jj]
                start, stop = posting_span(post_indptr, post_indices, q_indices[jj], lo, hi, whole)
                read += stop - start
                for kk in range(start, stop):
                    acc[post_indices[kk] - lo_u] += wq * post_data[kk]
            reads[qi] = read
            # The query is neither its own near-duplicate nor its own neighbour.
            if lo <= q < hi:
                acc[q - lo] = 0.0
            for e in range(excl_indptr[qi], excl_indptr[qi + 1]):
                d = excl_indices[e]
                if lo <= d < hi:
                    excluded[d - lo] = True
            size = 0
            n_nd = 0
            # One pass over the accumulator: read, reset to zero for the next query, route
            # each scored document to the near-duplicates, the mask, or the top-k heap.
            for local in range(n_range):
                s = acc[local]
                if s == 0.0:
                    continue
                acc[local] = 0.0
                d = local + lo
                if use_threshold and s >= cut:
                    if n_nd < nd_cap:
                        nd_buf[qi, n_nd] = d
                    n_nd += 1
                    continue
                # Only positive similarities are neighbours (negative ones need negative
                # weights, which TF-IDF never has, but must still be reset above).
                if s < 0.0 or excluded[local]:
                    continue
                # Most documents fall below the heap's minimum: test before the call.
                # Documents arrive by ascending id, so an equal score never displaces.
                if size < k or s > heap_s[0]:
                    size = push_largest(heap_s, heap_i, size, k, s, d)
            for e in range(excl_indptr[qi], excl_indptr[qi + 1]):
                d = excl_indices[e]
                if lo <= d < hi:
                    excluded[d - lo] = False
            nd_counts[qi] = n_nd
            drain_heap(heap_s, heap_i, size, neighbours[qi], similarities[qi])
    return neighbours, similarities, nd_counts, nd_buf, reads
