"""The checked arguments of a neighbour search, shared by the sparse (TF-IDF) and the dense
(embedding) searches, exact and approximate: the query ids, k, the near-duplicate cut and
each query's leave-out list. Each public search validates once, here, and hands the checked
request to its kernels (and to a fallback or a rerun on some of its queries)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from eval_pipelines.core.csr_rows import subset_csr_rows
from eval_pipelines.core.errors import InputError

# Near-duplicate tolerance: float32 rounding puts the self-similarity of an exact duplicate
# a few ulps below 1.0, so a threshold of 1.0 must still catch it.
NEAR_DUPLICATE_TOLERANCE = 1e-5


@dataclass(frozen=True)
class SearchRequest:
    """A checked search request.

    Attributes
    ----------
    queries
        int64 document ids, one per query.
    k
        Neighbours per query.
    cut
        float32 near-duplicate cut-off, ``threshold - 1e-5``; ``+inf`` without a threshold.
    use_threshold
        Whether near-duplicates are collected.
    exclude_indptr
        int64 CSR pointers, ``(n_queries + 1,)``.
    exclude_indices
        int32 ids, ascending within each query (sorted here, so kernels can merge them with
        documents arriving in id order).
    """

    queries: npt.NDArray[np.int64]
    k: int
    cut: np.float32
    use_threshold: bool
    exclude_indptr: npt.NDArray[np.int64]
    exclude_indices: npt.NDArray[np.int32]


def check_request(
    n_docs: int,
    query_docs: npt.ArrayLike,
    k: int,
    near_duplicate_threshold: float | None,
    exclude_indptr: npt.ArrayLike | None,
    exclude_indices: npt.ArrayLike | None,
) -> SearchRequest:
    """Check the query ids, k, the threshold and the exclusion CSR against ``n_docs``."""
    queries = np.asarray(query_docs)
    if queries.ndim != 1 or (queries.size and not np.issubdtype(queries.dtype, np.integer)):
        raise InputError("query_docs.shape", queries.shape, "must be a 1-d array of integers")
    queries = queries.astype(np.int64, copy=False)
    if queries.size and (queries.min() < 0 or queries.max() >= n_docs):
        raise InputError("query_docs", queries, f"ids must lie in [0, {n_docs})")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise InputError("k", k, "must be an integer of at least 1")
    cut = np.float32(np.inf)
    if near_duplicate_threshold is not None:
        if not NEAR_DUPLICATE_TOLERANCE < near_duplicate_threshold <= 1.0:
            raise InputError(
                "near_duplicate_threshold", near_duplicate_threshold, "must be in (1e-5, 1]"
            )
        cut = np.float32(near_duplicate_threshold - NEAR_DUPLICATE_TOLERANCE)
    n_queries = queries.shape[0]
    if (exclude_indptr is None) != (exclude_indices is None):
        raise InputError(
            "exclude_indptr", exclude_indptr, "give exclude_indices with it (give both or neither)"
        )
    if exclude_indptr is None or exclude_indices is None:
        indptr = np.zeros(n_queries + 1, dtype=np.int64)
        indices = np.zeros(0, dtype=np.int32)
    else:
        indptr = np.asarray(exclude_indptr).astype(np.int64, copy=False)
        indices = np.asarray(exclude_indices).astype(np.int64, copy=False)
        if indptr.shape != (n_queries + 1,):
            raise InputError("exclude_indptr.shape", indptr.shape, f"must be ({n_queries + 1},)")
        if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] > indices.shape[0]:
            raise InputError(
                "exclude_indptr", indptr, "must start at 0, not decrease, and fit the indices"
            )
        indices = indices[: indptr[-1]]
        if indices.size and (indices.min() < 0 or indices.max() >= n_docs):
            raise InputError("exclude_indices", indices, f"ids must lie in [0, {n_docs})")
        # Ascending within each query: the scan walks a query's exclusions alongside the
        # documents, which arrive in id order.
        rows = np.repeat(np.arange(n_queries), np.diff(indptr))
        indices = indices[np.lexsort((indices, rows))].astype(np.int32)
    return SearchRequest(
        queries=queries,
        k=int(k),
        cut=cut,
        use_threshold=near_duplicate_threshold is not None,
        exclude_indptr=indptr,
        exclude_indices=indices,
    )


R = TypeVar("R", bound=SearchRequest)


def subset_request(req: R, rows: npt.NDArray[np.int64]) -> R:
    """The same request restricted to some of its queries (``rows`` index the queries)."""
    indptr, indices = subset_csr_rows(req.exclude_indptr, req.exclude_indices, rows)
    return dataclasses.replace(
        req, queries=req.queries[rows], exclude_indptr=indptr, exclude_indices=indices
    )
