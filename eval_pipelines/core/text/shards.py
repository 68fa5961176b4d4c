"""Neighbour search split by document range, and the exact merge of the parts.

A shard is a contiguous range ``[lo, hi)`` of document ids.
:func:`~eval_pipelines.core.text.retrieval.search` with ``doc_range=(lo, hi)`` searches only
the documents of one shard; queries are still global document ids (a query's vector is
its row of the full matrix) and so are leave-out lists and every id in the result. Because
the query itself, its near-duplicates and its leave-outs are masked inside each shard, every
shard's top-k is the exact top-k of that shard's admissible documents; the global top-k is
therefore among the shards' top-k, and :func:`merge_shard_results` recovers exactly the
result of an unsharded :func:`~eval_pipelines.core.text.retrieval.search`: the neighbours by
(similarity descending, id ascending), the near-duplicate sets as the union of the shards'.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from eval_pipelines.core.text.retrieval import SearchResult, TextIndex, search


def shard_ranges(n_docs: int, shards: int) -> list[tuple[int, int]]:
    """Split ``[0, n_docs)`` into ``shards`` contiguous ranges of near-equal size.

    Parameters
    ----------
    n_docs
        Number of documents.
    shards
        Number of ranges, at least 1. Ranges are empty when there are more shards than
        documents.

    Returns
    -------
    list of tuple of int
        ``(lo, hi)`` per shard, in order, covering every document once.
    """
    if shards < 1:
        raise ValueError(f"shards={shards}: must be at least 1")
    if n_docs < 0:
        raise ValueError(f"n_docs={n_docs}: must not be negative")
    bounds = [n_docs * i // shards for i in range(shards + 1)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def merge_shard_results(parts: list[SearchResult], *, k: int) -> SearchResult:
    """Merge the shards' results for the same queries into the unsharded result.

    Parameters
    ----------
    parts
        One result per shard, for the same queries in the same order, with disjoint
        document ranges (in any order).
    k
        Neighbours per query in the merged result.

    Returns
    -------
    SearchResult
        Per query the k best neighbours of all parts by (similarity descending, id
        ascending), padded with -1 and 0, and the union of the near-duplicate sets in
        ascending id order.
    """
    if not parts:
        raise ValueError("parts: need at least one shard result")
    if k < 1:
        raise ValueError(f"k={k}: must be at least 1")
    n_queries = parts[0].neighbours.shape[0]
    if any(p.neighbours.shape[0] != n_queries for p in parts):
        raise ValueError("parts: every result must hold the same queries")

    ids = np.concatenate([p.neighbours for p in parts], axis=1).astype(np.int64)
    sims = np.concatenate([p.similarities for p in parts], axis=1)
    # Padding (-1) sorts last: neighbours have positive similarity, padding gets -inf.
    keys = np.where(ids >= 0, sims.astype(np.float64), -np.inf)
    tie = np.where(ids >= 0, ids, np.iinfo(np.int64).max)
    rows = np.repeat(np.arange(n_queries), ids.shape[1]).reshape(ids.shape)
    order = np.lexsort((tie.ravel(), -keys.ravel(), rows.ravel())).reshape(ids.shape)
    order = order[:, :k] - (np.arange(n_queries) * ids.shape[1])[:, None]
    neighbours = np.full((n_queries, k), -1, dtype=np.int32)
    similarities = np.zeros((n_queries, k), dtype=np.float32)
    width = min(k, ids.shape[1])
    taken = np.take_along_axis(ids, order[:, :width], axis=1)
    neighbours[:, :width] = np.where(taken >= 0, taken, -1)
    similarities[:, :width] = np.where(
        taken >= 0, np.take_along_axis(sims, order[:, :width], axis=1), 0.0
    )

    counts = np.stack([np.diff(p.near_duplicate_indptr) for p in parts], axis=1)
    indptr = np.zeros(n_queries + 1, dtype=np.int64)
    np.cumsum(counts.sum(axis=1), out=indptr[1:])
    # Each part's sets in query order; a stable sort by (query, id) interleaves them.
    owner = np.concatenate(
        [np.repeat(np.arange(n_queries), counts[:, i]) for i in range(len(parts))]
    )
    members = np.concatenate([p.near_duplicate_indices for p in parts]).astype(np.int32)
    nd_order = np.lexsort((members, owner))
    return SearchResult(
        neighbours=neighbours,
        similarities=similarities,
        near_duplicate_indptr=indptr,
        near_duplicate_indices=members[nd_order],
    )


def search_sharded(
    index: TextIndex,
    query_docs: npt.ArrayLike,
    *,
    shards: int,
    k: int,
    near_duplicate_threshold: float | None = None,
    exclude_indptr: npt.ArrayLike | None = None,
    exclude_indices: npt.ArrayLike | None = None,
    n_threads: int = 2,
) -> SearchResult:
    """Search every shard in turn and merge: the same result as an unsharded search.

    Parameters
    ----------
    index, query_docs, k, near_duplicate_threshold, exclude_indptr, exclude_indices, n_threads
        As in :func:`~eval_pipelines.core.text.retrieval.search`.
    shards
        Number of document ranges (see :func:`shard_ranges`).

    Returns
    -------
    SearchResult
        Identical to ``search(index, query_docs, k=k, ...)``.
    """
    parts = [
        search(
            index,
            query_docs,
            doc_range=doc_range,
            k=k,
            near_duplicate_threshold=near_duplicate_threshold,
            exclude_indptr=exclude_indptr,
            exclude_indices=exclude_indices,
            n_threads=n_threads,
        )
        for doc_range in shard_ranges(index.n_docs, shards)
    ]
    return merge_shard_results(parts, k=k)
