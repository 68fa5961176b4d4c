"""Argument checks shared by the exact and the approximate dense search.

Both public search functions validate here, once, and hand the checked request to their
private kernels, so a fallback from one path to the other never validates twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from eval_pipelines.core.csr_rows import subset_csr_rows
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.text.retrieval import NEAR_DUPLICATE_TOLERANCE

# How far a row norm may stray from 1 before the vectors count as not normalised: float32
# normalisation leaves errors near 1e-7, so this only catches vectors nobody normalised.
_UNIT_NORM_TOLERANCE = 1e-3
# Rows whose norms are checked per step, to bound the float32 temporaries on 1M-row inputs.
_NORM_CHECK_ROWS = 65_536


@dataclass(frozen=True)
class DenseRequest:
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


def unit_vectors(vectors: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """The vectors as a C-contiguous float32 matrix, refused unless rows have unit length.

    Parameters
    ----------
    vectors
        ``(n_docs, dim)`` real matrix with L2-normalised rows.

    Returns
    -------
    numpy.ndarray
        The same values, float32 and C-contiguous (a copy only when needed).
    """
    array = np.asarray(vectors)
    if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 1:
        raise InputError("vectors.shape", array.shape, "must be a non-empty 2-d matrix")
    if not np.issubdtype(array.dtype, np.floating):
        raise InputError("vectors.dtype", str(array.dtype), "must be a floating-point type")
    array = np.ascontiguousarray(array, dtype=np.float32)
    for lo in range(0, array.shape[0], _NORM_CHECK_ROWS):
        block = array[lo : lo + _NORM_CHECK_ROWS]
        norms = np.sqrt(np.einsum("ij,ij->i", block, block))
        bad = np.flatnonzero(~(np.abs(norms - 1.0) <= _UNIT_NORM_TOLERANCE))
        if bad.size:
            row = lo + int(bad[0])
            raise InputError(
                f"vectors[{row}]",
                f"norm {float(norms[bad[0]]):.6g}",
                "rows must be finite and L2-normalised (see check_embeddings)",
            )
    return array


def dense_request(
    n_docs: int,
    query_docs: npt.ArrayLike,
    k: int,
    near_duplicate_threshold: float | None,
    exclude_indptr: npt.ArrayLike | None,
    exclude_indices: npt.ArrayLike | None,
) -> DenseRequest:
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
        raise InputError("exclude_indptr", exclude_indptr, "give exclude_indices with it")
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
    return DenseRequest(
        queries=queries,
        k=int(k),
        cut=cut,
        use_threshold=near_duplicate_threshold is not None,
        exclude_indptr=indptr,
        exclude_indices=indices,
    )


def subset(req: DenseRequest, rows: npt.NDArray[np.int64]) -> DenseRequest:
    """The same request restricted to some of its queries (``rows`` index the queries)."""
    indptr, indices = subset_csr_rows(req.exclude_indptr, req.exclude_indices, rows)
    return DenseRequest(
        queries=req.queries[rows],
        k=req.k,
        cut=req.cut,
        use_threshold=req.use_threshold,
        exclude_indptr=indptr,
        exclude_indices=indices,
    )
