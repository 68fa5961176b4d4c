"""What a neighbour search returns, and the exact merge of results over disjoint document sets.

Shared by the sparse search (one index, its segments, or document ranges searched as shards)
and the dense searches, which return the same shape of result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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


def ranked_candidates(scores: np.ndarray, candidates: np.ndarray, k: int) -> np.ndarray:
    """The best ``k`` of ``candidates`` (document ids) by descending ``scores[id]``, ties by the
    smaller id: the order of :attr:`SearchResult.neighbours`, as the brute-force references
    sort it."""
    return candidates[np.lexsort((candidates, -scores[candidates]))[:k]]


def brute_force_result(
    neighbours: np.ndarray, similarities: np.ndarray, near_duplicates: list[np.ndarray]
) -> SearchResult:
    """The result of a brute-force reference from its neighbour arrays and each query's
    near-duplicate ids (ascending), which become the CSR rows."""
    indptr = np.zeros(len(near_duplicates) + 1, dtype=np.int64)
    np.cumsum([row.shape[0] for row in near_duplicates], out=indptr[1:])
    indices = np.concatenate(near_duplicates) if near_duplicates else np.zeros(0, dtype=np.int32)
    return SearchResult(
        neighbours=neighbours,
        similarities=similarities,
        near_duplicate_indptr=indptr,
        near_duplicate_indices=indices.astype(np.int32, copy=False),
    )


def concatenate_results(parts: list[SearchResult]) -> SearchResult:
    """Results of consecutive batches of queries, as one result (queries in order)."""
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


def shift_ids(result: SearchResult, offset: int) -> SearchResult:
    """The same result with every document id moved by ``offset`` (padding stays -1)."""
    if offset == 0:
        return result
    return SearchResult(
        neighbours=np.where(result.neighbours >= 0, result.neighbours + offset, -1).astype(
            np.int32
        ),
        similarities=result.similarities,
        near_duplicate_indptr=result.near_duplicate_indptr,
        near_duplicate_indices=(result.near_duplicate_indices + offset).astype(np.int32),
    )


def merge_shard_results(parts: list[SearchResult], *, k: int) -> SearchResult:
    """Merge results for the same queries over disjoint document sets into one result.

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
