"""Exact cosine nearest neighbours among the rows of an L2-normalised sparse matrix.

Queries are rows of the corpus itself. For each query the search scores documents by dot
product (cosine, since rows are unit length), collects the query's near-duplicates, masks the
documents the caller leaves out, and keeps the top-k of the rest. Excluded documents are
masked inside the scan rather than over-fetched and filtered afterwards, so a query falls short
of k neighbours only when fewer than k admissible documents share a feature with it. A search
may be limited to a range of documents (a shard, see :mod:`eval_pipelines.core.text.shards`);
queries and leave-out lists still use global document ids.

The fast path (:func:`search`) is a numba inverted-index search; :func:`search_brute_force`
is the plain scipy/numpy reference it is tested against. Every reported score is the float32
sum of the products in the same order on both paths (query features ascending), so scores,
neighbour orders and near-duplicate sets agree bit for bit.

By default the fast path prunes (MaxScore): it reads posting lists in descending order of
their contribution bound per posting, stops taking in new documents once those it has not
seen can no longer reach the top-k or the near-duplicate cut, keeps reading only the lists
that help to rule out seen documents, and rescores the few that remain from their document
rows, in ascending feature order, so the scores are the exact ones. ``prune=False`` keeps
the plain scan of every posting list; both return the same results.

The index is :mod:`eval_pipelines.core.text.inverted_index`; it is stored and memory-mapped by
:mod:`eval_pipelines.core.text.index_files`; the kernels are in
:mod:`eval_pipelines.core.text.search_kernels` (the plain scan) and
:mod:`eval_pipelines.core.text.pruned_search` (MaxScore). This module checks the arguments,
drives the kernels over shards and segments, and holds the brute-force reference.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import NamedTuple

import numba
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.search_request import SearchRequest, check_request, subset_request
from eval_pipelines.core.text.interrupts import Deferred, deferred_interrupts
from eval_pipelines.core.text.inverted_index import (
    SearchIndex,
    SegmentedIndex,
    TextIndex,
    build_text_index,
    feature_bounds,
)
from eval_pipelines.core.text.pruned_search import RESCORE_COST, pruned_kernel
from eval_pipelines.core.text.search_kernels import search_kernel
from eval_pipelines.core.text.search_result import (
    SearchResult,
    brute_force_result,
    concatenate_results,
    merge_shard_results,
    ranked_candidates,
    shift_ids,
)

# Near-duplicates kept per query on the first pass; queries with more are rerun with room for
# all of them, so the cap costs time, never results.
_NEAR_DUPLICATE_CAP = 256
# Queries per kernel call: between calls an interrupt is honoured, and per-call overhead stays
# far below the search itself.
_QUERIES_PER_CALL = 512
# Queries scored at once by the brute-force reference, to bound its dense score block.
_BRUTE_FORCE_BLOCK = 256


@dataclass
class SearchStats:
    """Work counters that :func:`search` adds to when given one (for benchmarks).

    Attributes
    ----------
    queries
        Queries searched.
    postings_read
        Posting entries read, including a pruned query's fallback rescan.
    postings_total
        Posting entries of the queries' features within the searched range: what the
        unpruned scan reads.
    rescored_documents
        Documents the pruned search scored exactly from their rows (theta candidates and
        the final survivors; each at most once per query).
    rescored_entries
        Document-row entries read for those scores.
    """

    queries: int = 0
    postings_read: int = 0
    postings_total: int = 0
    rescored_documents: int = 0
    rescored_entries: int = 0


# --------------------------------------------------------------------------------------------
# Argument checks shared by both search paths
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Request(SearchRequest):
    """A checked request and the documents it searches: ``[lo, hi)``."""

    lo: int
    hi: int


def _request(
    n_docs: int,
    query_docs: npt.ArrayLike,
    k: int,
    near_duplicate_threshold: float | None,
    exclude_indptr: npt.ArrayLike | None,
    exclude_indices: npt.ArrayLike | None,
    doc_range: tuple[int, int] | None = None,
) -> _Request:
    checked = check_request(
        n_docs, query_docs, k, near_duplicate_threshold, exclude_indptr, exclude_indices
    )
    lo, hi = (0, n_docs) if doc_range is None else (int(doc_range[0]), int(doc_range[1]))
    if not 0 <= lo <= hi <= n_docs:
        raise InputError("doc_range", (lo, hi), f"must satisfy 0 <= lo <= hi <= {n_docs}")
    return _Request(**{f.name: getattr(checked, f.name) for f in fields(checked)}, lo=lo, hi=hi)


# --------------------------------------------------------------------------------------------
# Fast path: driver
# --------------------------------------------------------------------------------------------


def _kernel_array(array: np.ndarray, ids: bool = False) -> np.ndarray:
    """A read-only plain-ndarray view; with ``ids``, int32 ids reinterpreted as uint32.

    numba compiles one specialisation per argument type and treats writable and read-only
    arrays (like the memory maps of a loaded index) as different types; handing the kernels
    read-only views always means one compiled (and cached) version serves built and loaded
    indexes alike. Ids are non-negative, and as uint32 they spare numba's negative-index
    check in the innermost posting loop (about 13% of the scan time).
    """
    view = np.asarray(array).view(np.ndarray)
    if ids and view.dtype == np.int32:
        view = view.view(np.uint32)
    view.flags.writeable = False
    return view


def _run_kernel(
    index: TextIndex,
    req: _Request,
    queries: _Queries,
    nd_cap: int,
    n_threads: int,
    prune: bool,
) -> tuple[np.ndarray, ...]:
    """Call the pruned or the plain kernel on the index arrays (see :func:`_kernel_array`).

    Returns neighbours, similarities, near-duplicate counts and buffer, then per query the
    postings read, the postings of the query's features in range (what the plain scan reads),
    and the documents and row entries rescored (zeros for the plain scan).
    """
    n_queries = req.queries.shape[0]
    n_chunks = max(1, min(n_threads, n_queries))
    docs = index.docs
    postings = index.postings
    rows = queries.rows
    common = (
        _kernel_array(docs.indptr),
        _kernel_array(docs.indices, ids=True),
        _kernel_array(docs.data),
        _kernel_array(postings.indptr),
        _kernel_array(postings.indices, ids=True),
        _kernel_array(postings.data),
    )
    whole = req.lo == 0 and req.hi == index.n_docs
    # One dtype per argument whatever the source, so one compiled kernel serves them all.
    query_args = (
        _kernel_array(rows.indptr.astype(np.int64, copy=False)),
        _kernel_array(rows.indices.astype(np.int32, copy=False), ids=True),
        _kernel_array(rows.data.astype(np.float32, copy=False)),
        _kernel_array(req.queries),
    )
    if not prune or not index.nonnegative:
        zeros = np.zeros(n_queries, dtype=np.int64)
        nb, sims, nd_counts, nd_buf, reads = search_kernel(
            *common,
            req.lo,
            req.hi,
            whole,
            *query_args,
            req.k,
            req.use_threshold,
            req.cut,
            req.exclude_indptr,
            req.exclude_indices,
            nd_cap,
            n_chunks,
        )
        return nb, sims, nd_counts, nd_buf, reads, reads, zeros, zeros
    mean_row = docs.nnz / max(1, index.n_docs)
    return pruned_kernel(
        *common,
        _kernel_array(feature_bounds(index)),
        req.lo,
        req.hi,
        whole,
        *query_args,
        req.k,
        req.use_threshold,
        req.cut,
        req.exclude_indptr,
        req.exclude_indices,
        nd_cap,
        n_chunks,
        mean_row * RESCORE_COST,
        _kernel_array(queries.theta_floor),
    )


def search(
    index: SearchIndex,
    query_docs: npt.ArrayLike,
    *,
    k: int,
    near_duplicate_threshold: float | None = None,
    exclude_indptr: npt.ArrayLike | None = None,
    exclude_indices: npt.ArrayLike | None = None,
    n_threads: int = 2,
    doc_range: tuple[int, int] | None = None,
    prune: bool = True,
    stats: SearchStats | None = None,
) -> SearchResult:
    """Exact top-k cosine neighbours of corpus documents, with near-duplicates and leave-outs.

    For query ``i`` (document ``query_docs[i]``) every document is scored by dot product.
    The near-duplicates are all documents other than the query with similarity
    ``>= near_duplicate_threshold - 1e-5``; the tolerance absorbs float32 rounding, so a
    threshold of 1.0 catches exact duplicates. The query itself, its near-duplicates and
    ``exclude_indices[exclude_indptr[i]:exclude_indptr[i + 1]]`` are then excluded, and the
    neighbours are the k remaining documents of highest positive similarity.

    A :class:`SegmentedIndex` is searched a segment at a time and the parts merged exactly;
    each segment starts pruning from the k-th neighbour score found in the segments before it
    (a document below it cannot enter the top k), so later segments read far fewer postings.

    Parameters
    ----------
    index
        From :func:`build_text_index` or :func:`load_text_index`, or a
        :class:`SegmentedIndex` (ids are then global: segment offsets are added).
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
    doc_range
        ``(lo, hi)``: score only documents ``lo <= id < hi`` (a shard); neighbours and
        near-duplicates then come from that range only. Query and leave-out ids stay global.
        ``None`` searches every document.
    prune
        Skip the postings that provably cannot change the result (MaxScore, the default;
        indexes with negative weights are always scanned in full); ``False`` reads every
        posting of every query feature. Both give identical results.
    stats
        When given, the work done is added to its counters.

    Returns
    -------
    SearchResult
        Neighbours, similarities and near-duplicate sets, one row per query.
    """
    req = _request(
        index.n_docs,
        query_docs,
        k,
        near_duplicate_threshold,
        exclude_indptr,
        exclude_indices,
        doc_range,
    )
    n_queries = req.queries.shape[0]
    queries = _Queries(index.rows(req.queries), np.zeros(n_queries, dtype=np.float32))
    spans = _spans(index, req.lo, req.hi)
    merged: SearchResult | None = None
    previous_threads = numba.get_num_threads()
    pool_size = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    numba.set_num_threads(max(1, min(n_threads, pool_size)))
    try:
        with deferred_interrupts() as interrupt:
            for offset, part, lo, hi in spans:
                if merged is not None:
                    queries = _Queries(queries.rows, _kth_scores(merged, req.k))
                found = _search_part(
                    part, _shifted(req, offset, lo, hi), queries, n_threads, prune, stats, interrupt
                )
                if len(spans) > 1:
                    # Hold one segment's pages at a time; with one part there is nothing to
                    # gain, and the next search would fault every page in again.
                    part.release_pages()
                result = shift_ids(found, offset)
                merged = result if merged is None else merge_shard_results([merged, result], k=k)
                if interrupt.requested:
                    break
    finally:
        numba.set_num_threads(previous_threads)
    assert merged is not None
    return merged


def _search_part(
    index: TextIndex,
    req: _Request,
    queries: _Queries,
    n_threads: int,
    prune: bool,
    stats: SearchStats | None,
    interrupt: Deferred,
) -> SearchResult:
    """Every query against one index, a kernel call per chunk of queries, so that an
    interrupt (a terminated run) is honoured between chunks instead of crashing inside the
    parallel kernel: the search stops after the chunk in which it arrived."""
    n_queries = req.queries.shape[0]
    found = []
    for start in range(0, max(n_queries, 1), _QUERIES_PER_CALL):
        rows = np.arange(start, min(start + _QUERIES_PER_CALL, n_queries))
        if rows.size == n_queries:
            found.append(_search_chunk(index, req, queries, n_threads, prune, stats))
        else:
            chunk = subset_request(req, rows)
            found.append(_search_chunk(index, chunk, queries.subset(rows), n_threads, prune, stats))
        if interrupt.requested:
            break
    return concatenate_results(found)


class _Queries(NamedTuple):
    """The queries' rows (CSR, one per query, whatever index they come from) and, per query,
    a known lower bound of its k-th neighbour score (0 when none is known)."""

    rows: sp.csr_matrix
    theta_floor: npt.NDArray[np.float32]

    def subset(self, rows: npt.NDArray[np.int64]) -> _Queries:
        return _Queries(self.rows[rows], self.theta_floor[rows])


def _spans(index: SearchIndex, lo: int, hi: int) -> list[tuple[int, TextIndex, int, int]]:
    """``(offset, segment, local lo, local hi)`` of each part of ``index`` that holds some of
    the documents ``[lo, hi)``; one (empty) part when none does."""
    if isinstance(index, TextIndex):
        return [(0, index, lo, hi)]
    spans = []
    for position, segment in enumerate(index.segments):
        start = int(index.starts[position])
        first, last = max(lo, start), min(hi, start + segment.n_docs)
        if first < last:
            spans.append((start, segment, first - start, last - start))
    return spans or [(0, index.segments[0], 0, 0)]


def _shifted(req: _Request, offset: int, lo: int, hi: int) -> _Request:
    """The request in the ids of a part that starts at document ``offset``: queries and
    leave-outs outside the part fall outside ``[lo, hi)`` and are ignored there."""
    if offset == 0:
        return dataclasses.replace(req, lo=lo, hi=hi)
    return dataclasses.replace(
        req,
        queries=req.queries - offset,
        exclude_indices=(req.exclude_indices.astype(np.int64) - offset).astype(np.int32),
        lo=lo,
        hi=hi,
    )


def _kth_scores(result: SearchResult, k: int) -> npt.NDArray[np.float32]:
    """Each query's k-th neighbour score so far, 0 where it has fewer than k."""
    last = result.neighbours[:, k - 1]
    return np.where(last >= 0, result.similarities[:, k - 1], 0.0).astype(np.float32)


def _search_chunk(
    index: TextIndex,
    req: _Request,
    queries: _Queries,
    n_threads: int,
    prune: bool,
    stats: SearchStats | None,
) -> SearchResult:
    """One kernel call (and a rerun for queries with more near-duplicates than the cap)."""
    (neighbours, similarities, nd_counts, nd_buf, reads, totals, docs_rescored, entries) = (
        _run_kernel(index, req, queries, _NEAR_DUPLICATE_CAP, n_threads, prune)
    )
    if stats is not None:
        stats.queries += req.queries.shape[0]
        stats.postings_read += int(reads.sum())
        stats.postings_total += int(totals.sum())
        stats.rescored_documents += int(docs_rescored.sum())
        stats.rescored_entries += int(entries.sum())
    overflow = np.flatnonzero(nd_counts > _NEAR_DUPLICATE_CAP)
    if overflow.size:
        # Rerun just the overflowing queries with room for every near-duplicate.
        sub = subset_request(req, overflow)
        big_cap = int(nd_counts[overflow].max())
        sub_nb, sub_sim, _, sub_buf, *_ = _run_kernel(
            index, sub, queries.subset(overflow), big_cap, n_threads, prune
        )
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


# --------------------------------------------------------------------------------------------
# Reference
# --------------------------------------------------------------------------------------------


def search_brute_force(
    index: SearchIndex,
    query_docs: npt.ArrayLike,
    *,
    k: int,
    near_duplicate_threshold: float | None = None,
    exclude_indptr: npt.ArrayLike | None = None,
    exclude_indices: npt.ArrayLike | None = None,
    doc_range: tuple[int, int] | None = None,
) -> SearchResult:
    """Reference for :func:`search`: dense scores from a scipy product, then numpy sorting.

    Same parameters (but no tuning ones) and result as :func:`search`; meant for tests and
    benchmarks (it holds a dense ``(256, n_docs)`` block of scores at a time; a
    :class:`SegmentedIndex` is first joined into one index).
    """
    if isinstance(index, SegmentedIndex):
        index = build_text_index(index.matrix())
    req = _request(
        index.n_docs,
        query_docs,
        k,
        near_duplicate_threshold,
        exclude_indptr,
        exclude_indices,
        doc_range,
    )
    n_queries = req.queries.shape[0]
    neighbours = np.full((n_queries, k), -1, dtype=np.int32)
    similarities = np.zeros((n_queries, k), dtype=np.float32)
    nd_rows: list[np.ndarray] = []
    doc_ids = np.arange(index.n_docs)
    outside = (doc_ids < req.lo) | (doc_ids >= req.hi)
    for lo in range(0, n_queries, _BRUTE_FORCE_BLOCK):
        block = req.queries[lo : lo + _BRUTE_FORCE_BLOCK]
        # query rows (CSR) @ postings (CSR) walks each query's features in ascending order and
        # adds float32 products per document, the same order as the fast path.
        scores = (index.docs[block] @ index.postings).toarray()
        scores[:, outside] = 0.0
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
            top = ranked_candidates(s, candidates, k)
            neighbours[qi, : top.shape[0]] = top
            similarities[qi, : top.shape[0]] = s[top]
    return brute_force_result(neighbours, similarities, nd_rows)
