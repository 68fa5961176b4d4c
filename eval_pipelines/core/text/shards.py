"""Neighbour search split by document range, and the exact merge of the parts.

A shard is a contiguous range ``[lo, hi)`` of document ids.
:func:`~eval_pipelines.core.text.retrieval.search` with ``doc_range=(lo, hi)`` searches only the
documents of one shard; queries are still global document ids (a query's vector is its row of
the full matrix) and so are leave-out lists and every id in the result. Because the query
itself, its near-duplicates and its leave-outs are masked inside each shard, every shard's top-k
is the exact top-k of that shard's admissible documents; the global top-k is therefore among the
shards' top-k, and :func:`~eval_pipelines.core.text.search_result.merge_shard_results` recovers
exactly the result of an unsharded :func:`~eval_pipelines.core.text.retrieval.search`: the
neighbours by (similarity descending, id ascending), the near-duplicate sets as the union of the
shards'.
"""

from __future__ import annotations

import numpy.typing as npt

from eval_pipelines.core.text.inverted_index import SearchIndex
from eval_pipelines.core.text.retrieval import search
from eval_pipelines.core.text.search_result import SearchResult, merge_shard_results

__all__ = ["merge_shard_results", "search_sharded", "shard_ranges"]


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


def search_sharded(
    index: SearchIndex,
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
