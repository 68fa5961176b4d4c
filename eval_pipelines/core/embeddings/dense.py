"""Exact cosine nearest neighbours among L2-normalised dense vectors.

Same question and same :class:`~eval_pipelines.core.text.search_result.SearchResult` as the exact
sparse search in :mod:`eval_pipelines.core.text.retrieval`: queries are rows of the corpus,
the query itself is never its own neighbour or near-duplicate, near-duplicates are the other
documents with similarity ``>= threshold - 1e-5`` (reported whether or not they are also
excluded), and the neighbours are the k best of the remaining, non-excluded documents by
descending similarity, ties by smaller id.

One difference, deliberate: dense cosines can be negative, and a negative similarity is still
an ordering, so every admissible document can be a neighbour. ``-1`` (similarity 0) therefore
marks a missing neighbour only when fewer than k documents are admissible at all, not when
fewer than k have a positive similarity as in the sparse search.

The fast path (:func:`search_dense`) multiplies blocks of queries by blocks of documents with
BLAS and streams each block of scores through a fused numba top-k heap, so no score matrix is
ever sorted or partitioned. :func:`search_dense_brute_force` is the plain numpy reference it is
tested against.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from eval_pipelines.core.embeddings._arguments import unit_vectors
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.search_request import SearchRequest, check_request, subset_request
from eval_pipelines.core.text import numba_cache
from eval_pipelines.core.text.search_result import (
    SearchResult,
    brute_force_result,
    ranked_candidates,
)
from eval_pipelines.core.text.topk_heap import drain_heap, push_largest

numba_cache.configure()

__all__ = ["search_dense", "search_dense_brute_force"]

# Queries per BLAS product. Each worker thread owns one block of queries at a time and runs it
# against every document block, so its heaps stay hot; 256 queries x 256 dims is 256 KiB.
_QUERY_BLOCK = 256
# Documents per BLAS product: a 256 x 2048 float32 score block is 2 MiB, which stays in the
# 1-2 MiB per-core L2 / shared L3 between the product that writes it and the scan that reads it.
_DOC_BLOCK = 2048
# Near-duplicates kept per query on the first pass; queries with more are rerun with room for
# all of them, so the cap costs time, never results.
_NEAR_DUPLICATE_CAP = 256
# Queries scored at once by the brute-force reference, to bound its dense score block.
_BRUTE_FORCE_BLOCK = 256


@numba.njit(cache=True, nogil=True)
def _scan_block(
    scores: np.ndarray,
    doc_start: int,
    queries: np.ndarray,
    heap_s: np.ndarray,
    heap_i: np.ndarray,
    sizes: np.ndarray,
    use_threshold: bool,
    cut: np.float32,
    excl_indptr: np.ndarray,
    excl_indices: np.ndarray,
    excl_pos: np.ndarray,
    nd_buf: np.ndarray,
    nd_counts: np.ndarray,
) -> None:
    """Route one ``(queries, documents)`` block of scores into the per-query heaps.

    Row ``r`` holds the scores of query ``queries[r]`` against documents ``doc_start + j``.
    ``excl_pos[r]`` walks query ``r``'s ascending exclusions (from ``excl_indptr[r]`` to
    ``excl_indptr[r + 1]``) as documents arrive in id order, across calls.
    """
    n_rows, n_cols = scores.shape
    k = heap_s.shape[1]
    nd_cap = nd_buf.shape[1]
    for r in range(n_rows):
        row = scores[r]
        q = queries[r]
        hs = heap_s[r]
        hi = heap_i[r]
        size = sizes[r]
        # A score matters if it can enter the heap (above its minimum once full) or is a
        # near-duplicate; everything below both is skipped with one comparison.
        floor = hs[0] if size == k else np.float32(-np.inf)
        gate = min(floor, cut)
        ep = excl_pos[r]
        e_end = excl_indptr[r + 1]
        for j in range(n_cols):
            s = row[j]
            if s < gate:
                continue
            d = doc_start + j
            if d == q:
                continue
            if use_threshold and s >= cut:
                n = nd_counts[r]
                if n < nd_cap:
                    nd_buf[r, n] = d
                nd_counts[r] = n + 1
                continue
            while ep < e_end and excl_indices[ep] < d:
                ep += 1
            if ep < e_end and excl_indices[ep] == d:
                continue
            if size < k or s > floor:
                # Documents arrive by ascending id, so an equal score never displaces.
                size = push_largest(hs, hi, size, k, s, d)
                if size == k:
                    floor = hs[0]
                    gate = min(floor, cut)
        sizes[r] = size
        excl_pos[r] = ep


@numba.njit(cache=True, nogil=True)
def _drain(
    heap_s: np.ndarray,
    heap_i: np.ndarray,
    sizes: np.ndarray,
    neighbours: np.ndarray,
    similarities: np.ndarray,
) -> None:
    """Pop each heap's worst to the back, leaving rows best-first (``-1`` / 0 padded)."""
    for r in range(heap_s.shape[0]):
        drain_heap(heap_s[r], heap_i[r], sizes[r], neighbours[r], similarities[r])


@dataclass(frozen=True)
class _Block:
    """What one block of queries produced: rows ``start:stop`` of the request."""

    start: int
    neighbours: np.ndarray
    similarities: np.ndarray
    nd_counts: np.ndarray
    nd_buf: np.ndarray


def _search_block(
    vectors: np.ndarray, req: SearchRequest, start: int, stop: int, nd_cap: int, scratch: np.ndarray
) -> _Block:
    """Queries ``start:stop`` against every document block; ``scratch`` holds one score block."""
    n_rows = stop - start
    k = req.k
    queries = req.queries[start:stop]
    query_vectors = vectors[queries]
    heap_s = np.empty((n_rows, k), dtype=np.float32)
    heap_i = np.empty((n_rows, k), dtype=np.int32)
    sizes = np.zeros(n_rows, dtype=np.int64)
    # Exclusion pointers relative to this block's rows.
    excl_indptr = req.exclude_indptr[start : stop + 1]
    excl_pos = excl_indptr[:-1].copy()
    nd_buf = np.empty((n_rows, max(nd_cap, 1)), dtype=np.int32)
    nd_counts = np.zeros(n_rows, dtype=np.int64)
    n_docs = vectors.shape[0]
    for doc_start in range(0, n_docs, _DOC_BLOCK):
        docs = vectors[doc_start : doc_start + _DOC_BLOCK]
        scores = scratch[: n_rows * docs.shape[0]].reshape(n_rows, docs.shape[0])
        np.matmul(query_vectors, docs.T, out=scores)
        _scan_block(
            scores,
            doc_start,
            queries,
            heap_s,
            heap_i,
            sizes,
            req.use_threshold,
            req.cut,
            excl_indptr,
            req.exclude_indices,
            excl_pos,
            nd_buf,
            nd_counts,
        )
    neighbours = np.full((n_rows, k), -1, dtype=np.int32)
    similarities = np.zeros((n_rows, k), dtype=np.float32)
    _drain(heap_s, heap_i, sizes, neighbours, similarities)
    return _Block(start, neighbours, similarities, nd_counts, nd_buf)


def _search_threaded(
    vectors: np.ndarray,
    req: SearchRequest,
    bounds: list[tuple[int, int]],
    nd_cap: int,
    scratch_size: int,
    workers: int,
) -> list[_Block]:
    """Run the query blocks on ``workers`` threads, each taking the next unclaimed block."""
    lock = threading.Lock()
    claimed = iter(bounds)
    stop = threading.Event()

    def work() -> list[_Block]:
        scratch = np.empty(scratch_size, dtype=np.float32)
        done: list[_Block] = []
        while not stop.is_set():
            with lock:
                lo_hi = next(claimed, None)
            if lo_hi is None:
                break
            done.append(_search_block(vectors, req, lo_hi[0], lo_hi[1], nd_cap, scratch))
        return done

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dense-search") as pool:
        futures = [pool.submit(work) for _ in range(workers)]
        try:
            return [block for future in futures for block in future.result()]
        except BaseException:
            # An interrupt (a terminated run) lands here in the main thread: the workers
            # finish the block in hand, well under a second, and stop.
            stop.set()
            raise


def _search(vectors: np.ndarray, req: SearchRequest, n_threads: int, nd_cap: int) -> SearchResult:
    """Blocks of queries spread over worker threads; one result row per query."""
    n_queries = req.queries.shape[0]
    bounds = [(lo, min(lo + _QUERY_BLOCK, n_queries)) for lo in range(0, n_queries, _QUERY_BLOCK)]
    scratch_size = _QUERY_BLOCK * min(_DOC_BLOCK, vectors.shape[0])
    # Each worker runs its own single-threaded BLAS product and then its own scan, both
    # without the GIL: independent pipelines keep the cores busy with no barrier between a
    # multi-threaded product and a multi-threaded scan, and no BLAS threads spinning while
    # the scan runs.
    with threadpool_limits(limits=1, user_api="blas"):
        workers = max(1, min(n_threads, len(bounds)))
        if workers == 1:
            scratch = np.empty(scratch_size, dtype=np.float32)
            blocks = [_search_block(vectors, req, lo, hi, nd_cap, scratch) for lo, hi in bounds]
        else:
            blocks = _search_threaded(vectors, req, bounds, nd_cap, scratch_size, workers)
    blocks.sort(key=lambda block: block.start)

    neighbours = np.full((n_queries, req.k), -1, dtype=np.int32)
    similarities = np.zeros((n_queries, req.k), dtype=np.float32)
    nd_counts = np.zeros(n_queries, dtype=np.int64)
    pieces: list[np.ndarray] = []
    for b in blocks:
        rows = slice(b.start, b.start + b.neighbours.shape[0])
        neighbours[rows] = b.neighbours
        similarities[rows] = b.similarities
        nd_counts[rows] = b.nd_counts
        # Row-major boolean selection concatenates each query's kept prefix in query order.
        pieces.append(b.nd_buf[np.arange(b.nd_buf.shape[1]) < b.nd_counts[:, None]])
    nd_indptr = np.zeros(n_queries + 1, dtype=np.int64)
    np.cumsum(nd_counts, out=nd_indptr[1:])
    nd_indices = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int32)

    overflow = np.flatnonzero(nd_counts > nd_cap)
    if overflow.size:
        # Rerun just the overflowing queries with room for every near-duplicate; their
        # neighbours are the same, their near-duplicate lists now complete.
        rerun = _search(
            vectors, subset_request(req, overflow), n_threads, int(nd_counts[overflow].max())
        )
        kept = np.minimum(nd_counts, nd_cap)
        kept_indptr = np.zeros(n_queries + 1, dtype=np.int64)
        np.cumsum(kept, out=kept_indptr[1:])
        rows_nd = [nd_indices[kept_indptr[q] : kept_indptr[q + 1]] for q in range(n_queries)]
        for pos, q in enumerate(overflow):
            lo, hi = rerun.near_duplicate_indptr[pos], rerun.near_duplicate_indptr[pos + 1]
            rows_nd[q] = rerun.near_duplicate_indices[lo:hi]
        nd_indices = np.concatenate(rows_nd)
    return SearchResult(
        neighbours=neighbours,
        similarities=similarities,
        near_duplicate_indptr=nd_indptr,
        near_duplicate_indices=nd_indices.astype(np.int32, copy=False),
    )


def search_dense(
    vectors: npt.ArrayLike,
    query_docs: npt.ArrayLike,
    *,
    k: int,
    near_duplicate_threshold: float | None = None,
    exclude_indptr: npt.ArrayLike | None = None,
    exclude_indices: npt.ArrayLike | None = None,
    n_threads: int = 2,
) -> SearchResult:
    """Exact top-k cosine neighbours of corpus rows, with near-duplicates and leave-outs.

    For query ``i`` (row ``query_docs[i]``) every row of ``vectors`` is scored by dot product
    (cosine, since rows have unit length). The near-duplicates are all rows other than the
    query with similarity ``>= near_duplicate_threshold - 1e-5``; the tolerance absorbs
    float32 rounding, so a threshold of 1.0 catches exact duplicates. The query itself, its
    near-duplicates and ``exclude_indices[exclude_indptr[i]:exclude_indptr[i + 1]]`` are then
    excluded, and the neighbours are the k remaining rows of highest similarity, negative
    similarities included.

    Parameters
    ----------
    vectors
        ``(n_docs, dim)`` float matrix with L2-normalised rows (see
        :func:`~eval_pipelines.core.embeddings.vectors.check_embeddings`).
    query_docs
        Row ids to query, 1-d integers.
    k
        Neighbours per query.
    near_duplicate_threshold
        Cosine at which a row counts as a near-duplicate of the query, in (1e-5, 1];
        ``None`` for no near-duplicate handling.
    exclude_indptr, exclude_indices
        Optional CSR (``len(query_docs) + 1`` pointers) of rows to leave out per query, e.g.
        records that share a group with it.
    n_threads
        Worker threads; each runs a single-threaded BLAS product and the top-k scan.

    Returns
    -------
    SearchResult
        Neighbours, similarities and near-duplicate sets, one row per query. A neighbour is
        ``-1`` (similarity 0) only when fewer than k rows are admissible.

    Notes
    -----
    Scores come from float32 BLAS products of blocks; the reduction order inside a product may
    differ from a single product over all rows by a few ulps, so neighbours whose similarities
    agree to about 1e-6 may swap places relative to :func:`search_dense_brute_force`.
    """
    array = unit_vectors(vectors)
    req = check_request(
        array.shape[0], query_docs, k, near_duplicate_threshold, exclude_indptr, exclude_indices
    )
    if isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1:
        raise InputError("n_threads", n_threads, "must be an integer of at least 1")
    return _search(array, req, n_threads, _NEAR_DUPLICATE_CAP)


def search_dense_brute_force(
    vectors: npt.ArrayLike,
    query_docs: npt.ArrayLike,
    *,
    k: int,
    near_duplicate_threshold: float | None = None,
    exclude_indptr: npt.ArrayLike | None = None,
    exclude_indices: npt.ArrayLike | None = None,
) -> SearchResult:
    """Reference for :func:`search_dense`: one numpy product per query block, then lexsort.

    Same parameters (bar ``n_threads``) and result as :func:`search_dense`; meant for tests
    and benchmarks (it sorts every score).
    """
    array = unit_vectors(vectors)
    req = check_request(
        array.shape[0], query_docs, k, near_duplicate_threshold, exclude_indptr, exclude_indices
    )
    n_queries = req.queries.shape[0]
    neighbours = np.full((n_queries, req.k), -1, dtype=np.int32)
    similarities = np.zeros((n_queries, req.k), dtype=np.float32)
    nd_rows: list[np.ndarray] = []
    for lo in range(0, n_queries, _BRUTE_FORCE_BLOCK):
        block = req.queries[lo : lo + _BRUTE_FORCE_BLOCK]
        scores = array[block] @ array.T
        for row, q in enumerate(block):
            qi = lo + row
            s = scores[row]
            admissible = np.ones(array.shape[0], dtype=bool)
            admissible[q] = False
            if req.use_threshold:
                near = np.flatnonzero(admissible & (s >= req.cut)).astype(np.int32)
            else:
                near = np.zeros(0, dtype=np.int32)
            nd_rows.append(near)
            admissible[near] = False
            admissible[req.exclude_indices[req.exclude_indptr[qi] : req.exclude_indptr[qi + 1]]] = (
                False
            )
            candidates = np.flatnonzero(admissible)
            top = ranked_candidates(s, candidates, req.k)
            neighbours[qi, : top.shape[0]] = top
            similarities[qi, : top.shape[0]] = s[top]
    return brute_force_result(neighbours, similarities, nd_rows)
