"""Dense search inputs and the one check that a fast search equals the exact reference up to
ties: shared by the exact (dense) and approximate (ANN) search tests."""

from __future__ import annotations

import numpy as np

from eval_pipelines.core.text.search_result import SearchResult

# Both paths compute float32 dot products with BLAS, but in blocks of different shapes, whose
# kernels may add the 64 products in a different order: scores then differ by a few ulps
# (< 1e-6 for unit vectors), and only neighbours whose scores agree that closely may swap.
SCORE_TOLERANCE = 1e-6


def clustered_unit_vectors(
    n: int, dim: int, *, n_clusters: int, spread: float, seed: int
) -> np.ndarray:
    """Unit vectors around random centres (neighbourhoods that matter), some of them exact
    duplicates, and every similarity sign in play."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clusters, dim))
    vectors = centres[rng.integers(n_clusters, size=n)] + spread * rng.normal(size=(n, dim))
    vectors[10:14] = vectors[14]
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32)


def random_exclusions(n_queries: int, n_docs: int, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 40, size=n_queries)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    # Unsorted, with repeats: the search must not rely on either.
    return indptr, rng.integers(0, n_docs, size=indptr[-1]).astype(np.int32)


def assert_equivalent(
    fast: SearchResult, ref: SearchResult, vectors: np.ndarray, queries: np.ndarray
) -> None:
    """Same result up to swaps of neighbours whose scores agree within SCORE_TOLERANCE."""
    np.testing.assert_array_equal(fast.near_duplicate_indptr, ref.near_duplicate_indptr)
    np.testing.assert_array_equal(fast.near_duplicate_indices, ref.near_duplicate_indices)
    np.testing.assert_array_equal(fast.neighbours == -1, ref.neighbours == -1)
    np.testing.assert_allclose(fast.similarities, ref.similarities, rtol=0, atol=SCORE_TOLERANCE)
    for row, q in enumerate(queries):
        got, want = fast.neighbours[row], ref.neighbours[row]
        if np.array_equal(got, want):
            continue
        found = got[got >= 0]
        assert np.unique(found).size == found.size
        # Each reported similarity is the true one, and every id outside the tie zone of the
        # k-th score appears in both lists.
        true = vectors[found].astype(np.float64) @ vectors[q].astype(np.float64)
        np.testing.assert_allclose(fast.similarities[row, : found.size], true, atol=SCORE_TOLERANCE)
        kth = ref.similarities[row, found.size - 1]
        sure = ref.similarities[row] > kth + 2 * SCORE_TOLERANCE
        assert set(want[sure]) <= set(found.tolist())
