"""Exact cosine nearest neighbours among the rows of an L2-normalised sparse matrix.

Queries are rows of the corpus itself. For each query the search scores every document by
dot product (cosine, since rows are unit length), collects the query's near-duplicates, masks
the documents the caller leaves out, and keeps the top-k of the rest. Excluded documents are
masked inside the scan rather than over-fetched and filtered afterwards, so a query falls short
of k neighbours only when fewer than k admissible documents share a feature with it.

The fast path (:func:`search`) is a numba inverted-index scan; :func:`search_brute_force` is
the plain scipy/numpy reference it is tested against. Both accumulate the float32 products in
the same order (query features ascending, then posting lists by document), so their scores,
and therefore neighbour orders and near-duplicate sets, agree bit for bit.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from eval_pipelines.core.text import numba_cache
from eval_pipelines.core.text.interrupts import deferred_interrupts

numba_cache.configure()

# Near-duplicate tolerance: float32 rounding puts the self-similarity of an exact duplicate
# a few ulps below 1.0, so a threshold of 1.0 must still catch it.
NEAR_DUPLICATE_TOLERANCE = 1e-5
# Near-duplicates kept per query on the first pass; queries with more are rerun with room for
# all of them, so the cap costs time, never results.
_NEAR_DUPLICATE_CAP = 256
# Queries per kernel call: between calls an interrupt is honoured (about 0.4 s of work on
# 130k records), and per-call overhead stays far below the scan itself.
_QUERIES_PER_CALL = 512
# Queries scored at once by the brute-force reference, to bound its dense score block.
_BRUTE_FORCE_BLOCK = 256


@dataclass(frozen=True)
class TextIndex:
    """Documents and their inverted index.

    Attributes
    ----------
    docs
        ``(n_docs, n_features)`` float32 CSR, L2-normalised rows, sorted int32 indices.
    postings
        ``(n_features, n_docs)`` float32 CSR: the transpose of ``docs``, so row ``f`` is the
        posting list of feature ``f`` as (document, weight) pairs by ascending document.
    n_docs
        Number of documents.
    """

    docs: sp.csr_matrix
    postings: sp.csr_matrix
    n_docs: int


@dataclass(frozen=True)
class SearchResult:
    """Neighbours and near-duplicates of a batch of queries.

    Attributes
    ----------
    neighbours
        int32, ``(n_queries, k)``: document ids by descending similarity, ties by smaller id;
        ``-1`` where fewer than k admissible documents have a positive similarity.
    similarities
        float32, same shape: cosine similarity of each neighbour, 0 where the id is ``-1``.
    near_duplicate_indptr
        int64, ``(n_queries + 1,)``: CSR row pointers into ``near_duplicate_indices``.
    near_duplicate_indices
        int32: per query, ascending ids of every document other than the query whose cosine
        similarity is at least ``threshold - 1e-5``. The tolerance absorbs float32 rounding,
        so a threshold of 1.0 catches exact duplicates. Empty when no threshold was given.
    """

    neighbours: np.ndarray
    similarities: np.ndarray
    near_duplicate_indptr: np.ndarray
    near_duplicate_indices: np.ndarray


# --------------------------------------------------------------------------------------------
# Index construction and storage
# --------------------------------------------------------------------------------------------


def _canonical_csr(matrix: sp.spmatrix | sp.sparray) -> sp.csr_matrix:
    """float32 CSR with int32 indices (when nnz allows), sorted and without duplicates."""
    csr = sp.csr_matrix(matrix, dtype=np.float32)
    if not csr.has_canonical_format:
        csr = csr.copy()
        csr.sum_duplicates()
    if csr.nnz < 2**31 and max(csr.shape) < 2**31:
        csr.indices = csr.indices.astype(np.int32, copy=False)
        csr.indptr = csr.indptr.astype(np.int32, copy=False)
    return csr


def build_text_index(matrix: sp.spmatrix | sp.sparray) -> TextIndex:
    """Index the rows of a TF-IDF matrix for :func:`search`.

    Parameters
    ----------
    matrix
        ``(n_docs, n_features)`` sparse matrix with L2-normalised (or all-zero) rows and
        non-negative weights, e.g. from :func:`eval_pipelines.core.text.vectorize.fit_transform`.

    Returns
    -------
    TextIndex
        The documents and their posting lists.
    """
    docs = _canonical_csr(matrix)
    # csr.T is a CSC view of the same arrays; converting it to CSR builds the posting lists,
    # and scipy's conversion emits each posting list sorted by document.
    postings = _canonical_csr(docs.T.tocsr())
    return TextIndex(docs=docs, postings=postings, n_docs=docs.shape[0])


def save_text_index(index: TextIndex, path: Path) -> None:
    """Write an index as an uncompressed ``.npz``, atomically.

    The arrays go to a temporary file in the same folder, which then replaces ``path``, so a
    crash leaves either the old file or the new one, never half a file.

    Parameters
    ----------
    index
        The index to store.
    path
        Destination file.
    """
    path = Path(path)
    handle = tempfile.NamedTemporaryFile(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
    )
    try:
        with handle:
            np.savez(
                handle,
                docs_data=index.docs.data,
                docs_indices=index.docs.indices,
                docs_indptr=index.docs.indptr,
                postings_data=index.postings.data,
                postings_indices=index.postings.indices,
                postings_indptr=index.postings.indptr,
                shape=np.asarray(index.docs.shape, dtype=np.int64),
            )
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise


def load_text_index(path: Path) -> TextIndex:
    """Read an index written by :func:`save_text_index`.

    Parameters
    ----------
    path
        The ``.npz`` file.

    Returns
    -------
    TextIndex
        The stored index.
    """
    with np.load(Path(path), allow_pickle=False) as arrays:
        n_docs, n_features = (int(v) for v in arrays["shape"])
        docs = sp.csr_matrix(
            (arrays["docs_data"], arrays["docs_indices"], arrays["docs_indptr"]),
            shape=(n_docs, n_features),
            copy=False,
        )
        postings = sp.csr_matrix(
            (arrays["postings_data"], arrays["postings_indices"], arrays["postings_indptr"]),
            shape=(n_features, n_docs),
            copy=False,
        )
    docs.has_sorted_indices = True
    postings.has_sorted_indices = True
    return TextIndex(docs=docs, postings=postings, n_docs=n_docs)


# --------------------------------------------------------------------------------------------
# Argument checks shared by both search paths
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Request:
    queries: npt.NDArray[np.int64]
    k: int
    cut: np.float32  # near-duplicate cut-off, threshold - tolerance, in float32
    use_threshold: bool
    exclude_indptr: npt.NDArray[np.int64]
    exclude_indices: npt.NDArray[np.int32]


def _request(
    index: TextIndex,
    query_docs: npt.ArrayLike,
    k: int,
    near_duplicate_threshold: float | None,
    exclude_indptr: npt.ArrayLike | None,
    exclude_indices: npt.ArrayLike | None,
) -> _Request:
    queries = np.asarray(query_docs)
    if queries.ndim != 1 or (queries.size and not np.issubdtype(queries.dtype, np.integer)):
        raise ValueError(f"query_docs.shape={queries.shape}: must be a 1-d array of integers")
    queries = queries.astype(np.int64, copy=False)
    if queries.size and (queries.min() < 0 or queries.max() >= index.n_docs):
        raise ValueError(f"query_docs: ids must lie in [0, {index.n_docs})")
    if k < 1:
        raise ValueError(f"k={k}: must be at least 1")
    use_threshold = near_duplicate_threshold is not None
    cut = np.float32(np.inf)
    if near_duplicate_threshold is not None:
        if not NEAR_DUPLICATE_TOLERANCE < near_duplicate_threshold <= 1.0:
            raise ValueError(
                f"near_duplicate_threshold={near_duplicate_threshold}: must be in (1e-5, 1]"
            )
        cut = np.float32(near_duplicate_threshold - NEAR_DUPLICATE_TOLERANCE)
    if (exclude_indptr is None) != (exclude_indices is None):
        raise ValueError("exclude_indptr and exclude_indices: give both or neither")
    if exclude_indptr is None or exclude_indices is None:
        excl_indptr = np.zeros(queries.shape[0] + 1, dtype=np.int64)
        excl_indices = np.zeros(0, dtype=np.int32)
    else:
        excl_indptr = np.asarray(exclude_indptr).astype(np.int64, copy=False)
        excl_indices = np.asarray(exclude_indices).astype(np.int32, copy=False)
        if excl_indptr.shape != (queries.shape[0] + 1,):
            raise ValueError(
                f"exclude_indptr.shape={excl_indptr.shape}: must be ({queries.shape[0] + 1},)"
            )
        if (
            excl_indptr[0] != 0
            or np.any(np.diff(excl_indptr) < 0)
            or excl_indptr[-1] > excl_indices.shape[0]
        ):
            raise ValueError("exclude_indptr: must start at 0, not decrease, and fit the indices")
        used = excl_indices[: excl_indptr[-1]]
        if used.size and (used.min() < 0 or used.max() >= index.n_docs):
            raise ValueError(f"exclude_indices: ids must lie in [0, {index.n_docs})")
    return _Request(
        queries=queries,
        k=int(k),
        cut=cut,
        use_threshold=use_threshold,
        exclude_indptr=excl_indptr,
        exclude_indices=excl_indices,
    )


# --------------------------------------------------------------------------------------------
# Fast path
# --------------------------------------------------------------------------------------------


@numba.njit(cache=True, inline="always")
def _worse(s_a: float, i_a: int, s_b: float, i_b: int) -> bool:
    """Heap order: lower similarity is worse; at equal similarity the larger id is worse."""
    return s_a < s_b or (s_a == s_b and i_a > i_b)


@numba.njit(cache=True)
def _sift_down(heap_s: np.ndarray, heap_i: np.ndarray, size: int, pos: int) -> None:
    s = heap_s[pos]
    i = heap_i[pos]
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        right = child + 1
        if right < size and _worse(heap_s[right], heap_i[right], heap_s[child], heap_i[child]):
            child = right
        if not _worse(heap_s[child], heap_i[child], s, i):
            break
        heap_s[pos] = heap_s[child]
        heap_i[pos] = heap_i[child]
        pos = child
    heap_s[pos] = s
    heap_i[pos] = i


@numba.njit(cache=True)
def _sift_up(heap_s: np.ndarray, heap_i: np.ndarray, pos: int) -> None:
    s = heap_s[pos]
    i = heap_i[pos]
    while pos > 0:
        parent = (pos - 1) // 2
        if not _worse(s, i, heap_s[parent], heap_i[parent]):
            break
        heap_s[pos] = heap_s[parent]
        heap_i[pos] = heap_i[parent]
        pos = parent
    heap_s[pos] = s
    heap_i[pos] = i


@numba.njit(cache=True, parallel=True)
def _search_kernel(
    docs_indptr: np.ndarray,
    docs_indices: np.ndarray,
    docs_data: np.ndarray,
    post_indptr: np.ndarray,
    post_indices: np.ndarray,
    post_data: np.ndarray,
    n_docs: int,
    queries: np.ndarray,
    k: int,
    use_threshold: bool,
    cut: np.float32,
    excl_indptr: np.ndarray,
    excl_indices: np.ndarray,
    nd_cap: int,
    n_chunks: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Inverted-index scan: neighbours, similarities, near-duplicate counts and ids per query.

    ``nd_buf[i]`` holds the first ``nd_cap`` near-duplicates of query ``i``; ``nd_counts[i]``
    is the true count, so the caller can tell when the buffer overflowed.
    """
    n_queries = queries.shape[0]
    neighbours = np.full((n_queries, k), -1, dtype=np.int32)
    similarities = np.zeros((n_queries, k), dtype=np.float32)
    nd_counts = np.zeros(n_queries, dtype=np.int64)
    nd_buf = np.empty((n_queries, max(nd_cap, 1)), dtype=np.int32)
    # One chunk per thread; chunk c takes queries c, c + n_chunks, ... so that the cost of
    # expensive queries spreads evenly under prange's static schedule.
    for chunk in numba.prange(n_chunks):
        acc = np.zeros(n_docs, dtype=np.float32)
        excluded = np.zeros(n_docs, dtype=np.bool_)
        heap_s = np.empty(k, dtype=np.float32)
        heap_i = np.empty(k, dtype=np.int32)
        for qi in range(chunk, n_queries, n_chunks):
            q = queries[qi]
            for jj in range(docs_indptr[q], docs_indptr[q + 1]):
                f = docs_indices[jj]
                wq = docs_data[jj]
                for kk in range(post_indptr[f], post_indptr[f + 1]):
                    acc[post_indices[kk]] += wq * post_data[kk]
            # The query is neither its own near-duplicate nor its own neighbour.
            acc[q] = 0.0
            for e in range(excl_indptr[qi], excl_indptr[qi + 1]):
                excluded[excl_indices[e]] = True
            size = 0
            n_nd = 0
            # One pass over the accumulator: read, reset to zero for the next query, route
            # each scored document to the near-duplicates, the mask, or the top-k heap. The
            # reset writes only scored entries; the pass reads all of them anyway for the
            # top-k, and the whole pass is under a tenth of the search time on the demo records.
            for d in range(n_docs):
                s = acc[d]
                if s == 0.0:
                    continue
                acc[d] = 0.0
                if use_threshold and s >= cut:
                    if n_nd < nd_cap:
                        nd_buf[qi, n_nd] = d
                    n_nd += 1
                    continue
                # Only positive similarities are neighbours (negative ones need negative
                # weights, which TF-IDF never has, but must still be reset above).
                if s < 0.0 or excluded[d]:
                    continue
                if size < k:
                    heap_s[size] = s
                    heap_i[size] = d
                    _sift_up(heap_s, heap_i, size)
                    size += 1
                elif s > heap_s[0]:
                    # Documents arrive by ascending id, so an equal score never displaces.
                    heap_s[0] = s
                    heap_i[0] = d
                    _sift_down(heap_s, heap_i, size, 0)
            for e in range(excl_indptr[qi], excl_indptr[qi + 1]):
                excluded[excl_indices[e]] = False
            nd_counts[qi] = n_nd
            # Pop the worst to the back: the heap drains into best-first order.
            while size > 0:
                size -= 1
                neighbours[qi, size] = heap_i[0]
                similarities[qi, size] = heap_s[0]
                heap_s[0] = heap_s[size]
                heap_i[0] = heap_i[size]
                _sift_down(heap_s, heap_i, size, 0)
    return neighbours, similarities, nd_counts, nd_buf


def _unsigned(indices: np.ndarray) -> np.ndarray:
    """Reinterpret non-negative int32 ids as uint32.

    numba guards every signed index against negative (wrap-around) values; unsigned ids skip
    that check in the innermost posting loop, about 13% of the scan time.
    """
    return indices.view(np.uint32) if indices.dtype == np.int32 else indices


def _run_kernel(
    index: TextIndex, req: _Request, nd_cap: int, n_threads: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Call the numba kernel on the index arrays (ids as uint32, see :func:`_unsigned`)."""
    n_chunks = max(1, min(n_threads, req.queries.shape[0]))
    docs = index.docs
    postings = index.postings
    return _search_kernel(
        docs.indptr,
        _unsigned(docs.indices),
        docs.data,
        postings.indptr,
        _unsigned(postings.indices),
        postings.data,
        index.n_docs,
        req.queries,
        req.k,
        req.use_threshold,
        req.cut,
        req.exclude_indptr,
        req.exclude_indices,
        nd_cap,
        n_chunks,
    )


def _subset_request(req: _Request, rows: np.ndarray) -> _Request:
    """The same request restricted to some of its queries."""
    lo = req.exclude_indptr[rows]
    hi = req.exclude_indptr[rows + 1]
    lengths = hi - lo
    indptr = np.zeros(rows.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    take = np.repeat(lo - indptr[:-1], lengths) + np.arange(indptr[-1])
    return _Request(
        queries=req.queries[rows],
        k=req.k,
        cut=req.cut,
        use_threshold=req.use_threshold,
        exclude_indptr=indptr,
        exclude_indices=req.exclude_indices[take],
    )


def search(
    index: TextIndex,
    query_docs: npt.ArrayLike,
    *,
    k: int,
    near_duplicate_threshold: float | None = None,
    exclude_indptr: npt.ArrayLike | None = None,
    exclude_indices: npt.ArrayLike | None = None,
    n_threads: int = 2,
) -> SearchResult:
    """Exact top-k cosine neighbours of corpus documents, with near-duplicates and leave-outs.

    For query ``i`` (document ``query_docs[i]``) every document is scored by dot product.
    The near-duplicates are all documents other than the query with similarity
    ``>= near_duplicate_threshold - 1e-5``; the tolerance absorbs float32 rounding, so a
    threshold of 1.0 catches exact duplicates. The query itself, its near-duplicates and
    ``exclude_indices[exclude_indptr[i]:exclude_indptr[i + 1]]`` are then excluded, and the
    neighbours are the k remaining documents of highest positive similarity.

    Parameters
    ----------
    index
        From :func:`build_text_index`.
    query_docs
        Document ids to query, 1-d integers.
    k
        Neighbours per query.
    near_duplicate_threshold
        Cosine at which a document counts as a near-duplicate of the query, in (1e-5, 1];
        ``None`` for no near-duplicate handling.
    exclude_indptr, exclude_indices
        Optional CSR (``len(query_docs) + 1`` pointers) of documents to leave out per query,
        e.g. records that share a group with it.
    n_threads
        Worker threads (capped by numba's thread pool).

    Returns
    -------
    SearchResult
        Neighbours, similarities and near-duplicate sets, one row per query.
    """
    req = _request(index, query_docs, k, near_duplicate_threshold, exclude_indptr, exclude_indices)
    n_queries = req.queries.shape[0]
    parts: list[SearchResult] = []
    previous_threads = numba.get_num_threads()
    pool_size = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    numba.set_num_threads(max(1, min(n_threads, pool_size)))
    try:
        # Queries go to the kernel in chunks so that an interrupt (a terminated run) is
        # honoured between chunks instead of crashing inside the parallel kernel.
        with deferred_interrupts() as interrupt:
            for start in range(0, max(n_queries, 1), _QUERIES_PER_CALL):
                rows = np.arange(start, min(start + _QUERIES_PER_CALL, n_queries))
                chunk = req if rows.size == n_queries else _subset_request(req, rows)
                parts.append(_search_chunk(index, chunk, n_threads))
                if interrupt.requested:
                    break
    finally:
        numba.set_num_threads(previous_threads)
    return _concatenate(parts)


def _search_chunk(index: TextIndex, req: _Request, n_threads: int) -> SearchResult:
    """One kernel call (and a rerun for queries with more near-duplicates than the cap)."""
    neighbours, similarities, nd_counts, nd_buf = _run_kernel(
        index, req, _NEAR_DUPLICATE_CAP, n_threads
    )
    overflow = np.flatnonzero(nd_counts > _NEAR_DUPLICATE_CAP)
    if overflow.size:
        # Rerun just the overflowing queries with room for every near-duplicate.
        sub = _subset_request(req, overflow)
        big_cap = int(nd_counts[overflow].max())
        sub_nb, sub_sim, _, sub_buf = _run_kernel(index, sub, big_cap, n_threads)
        neighbours[overflow] = sub_nb
        similarities[overflow] = sub_sim

    nd_indptr = np.zeros(req.queries.shape[0] + 1, dtype=np.int64)
    np.cumsum(nd_counts, out=nd_indptr[1:])
    if overflow.size:
        pieces = [nd_buf[qi, :count] for qi, count in enumerate(nd_counts)]
        for pos, qi in enumerate(overflow):
            pieces[qi] = sub_buf[pos, : nd_counts[qi]]
        nd_indices = np.concatenate(pieces)
    else:
        # Row-major boolean selection concatenates each query's kept prefix in query order.
        nd_indices = nd_buf[np.arange(nd_buf.shape[1]) < nd_counts[:, None]]
    return SearchResult(
        neighbours=neighbours,
        similarities=similarities,
        near_duplicate_indptr=nd_indptr,
        near_duplicate_indices=nd_indices,
    )


def _concatenate(parts: list[SearchResult]) -> SearchResult:
    if len(parts) == 1:
        return parts[0]
    counts = np.concatenate([np.diff(p.near_duplicate_indptr) for p in parts])
    indptr = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return SearchResult(
        neighbours=np.concatenate([p.neighbours for p in parts]),
        similarities=np.concatenate([p.similarities for p in parts]),
        near_duplicate_indptr=indptr,
        near_duplicate_indices=np.concatenate([p.near_duplicate_indices for p in parts]),
    )


# --------------------------------------------------------------------------------------------
# Reference
# --------------------------------------------------------------------------------------------


def search_brute_force(
    index: TextIndex,
    query_docs: npt.ArrayLike,
    *,
    k: int,
    near_duplicate_threshold: float | None = None,
    exclude_indptr: npt.ArrayLike | None = None,
    exclude_indices: npt.ArrayLike | None = None,
) -> SearchResult:
    """Reference for :func:`search`: dense scores from a scipy product, then numpy sorting.

    Same parameters and result as :func:`search`; meant for tests and benchmarks (it holds a
    dense ``(256, n_docs)`` block of scores at a time).
    """
    req = _request(index, query_docs, k, near_duplicate_threshold, exclude_indptr, exclude_indices)
    n_queries = req.queries.shape[0]
    neighbours = np.full((n_queries, k), -1, dtype=np.int32)
    similarities = np.zeros((n_queries, k), dtype=np.float32)
    nd_rows: list[np.ndarray] = []
    doc_ids = np.arange(index.n_docs)
    for lo in range(0, n_queries, _BRUTE_FORCE_BLOCK):
        block = req.queries[lo : lo + _BRUTE_FORCE_BLOCK]
        # query rows (CSR) @ postings (CSR) walks each query's features in ascending order and
        # adds float32 products per document, the same order as the fast path.
        scores = (index.docs[block] @ index.postings).toarray()
        for row, q in enumerate(block):
            qi = lo + row
            s = scores[row]
            s[q] = 0.0
            if req.use_threshold:
                near = np.flatnonzero(s >= req.cut).astype(np.int32)
            else:
                near = np.zeros(0, dtype=np.int32)
            nd_rows.append(near)
            s[near] = 0.0
            s[req.exclude_indices[req.exclude_indptr[qi] : req.exclude_indptr[qi + 1]]] = 0.0
            candidates = np.flatnonzero(s > 0.0)
            order = np.lexsort((doc_ids[candidates], -s[candidates]))[:k]
            top = candidates[order]
            neighbours[qi, : top.shape[0]] = top
            similarities[qi, : top.shape[0]] = s[top]
    nd_indptr = np.zeros(n_queries + 1, dtype=np.int64)
    np.cumsum([row.shape[0] for row in nd_rows], out=nd_indptr[1:])
    nd_indices = np.concatenate(nd_rows) if nd_rows else np.zeros(0, dtype=np.int32)
    return SearchResult(
        neighbours=neighbours,
        similarities=similarities,
        near_duplicate_indptr=nd_indptr,
        near_duplicate_indices=nd_indices.astype(np.int32, copy=False),
    )
