"""Exact dense search: the blocked BLAS product with the fused numba heap against the plain
numpy reference, which sorts every score."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from eval_pipelines.core.embeddings import dense
from eval_pipelines.core.embeddings.dense import search_dense, search_dense_brute_force
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.text.search_result import SearchResult
from eval_pipelines_tests.helpers.dense_vectors import (
    assert_equivalent,
    clustered_unit_vectors,
    random_exclusions,
)

N_DOCS = 3000
DIM = 32


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return clustered_unit_vectors(N_DOCS, DIM, n_clusters=40, spread=0.35, seed=3)


@pytest.fixture(scope="module")
def queries() -> np.ndarray:
    sample = np.random.default_rng(4).choice(N_DOCS, size=500, replace=False)
    return np.concatenate([[10, 14], sample[~np.isin(sample, [10, 14])]])


def test_equals_brute_force_with_near_duplicates_and_exclusions(
    vectors: np.ndarray, queries: np.ndarray
) -> None:
    indptr, indices = random_exclusions(queries.size, N_DOCS, seed=5)
    options: dict[str, Any] = dict(
        k=20, near_duplicate_threshold=0.95, exclude_indptr=indptr, exclude_indices=indices
    )
    fast = search_dense(vectors, queries, **options)
    ref = search_dense_brute_force(vectors, queries, **options)
    assert_equivalent(fast, ref, vectors, queries)
    # Enough structure for the comparison to mean something.
    assert fast.near_duplicate_indices.size > 100
    assert (np.diff(indptr) > 0).sum() > 400


def test_block_edges_do_not_change_results(
    vectors: np.ndarray, queries: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Blocks that do not divide the queries or the documents, and a near-duplicate cap small
    # enough that many queries overflow it and are rerun.
    monkeypatch.setattr(dense, "_QUERY_BLOCK", 7)
    monkeypatch.setattr(dense, "_DOC_BLOCK", 113)
    monkeypatch.setattr(dense, "_NEAR_DUPLICATE_CAP", 2)
    options: dict[str, Any] = dict(k=9, near_duplicate_threshold=0.9)
    fast = search_dense(vectors, queries, n_threads=3, **options)
    ref = search_dense_brute_force(vectors, queries, **options)
    assert (np.diff(fast.near_duplicate_indptr) > 2).sum() > 10
    assert_equivalent(fast, ref, vectors, queries)


def test_thread_count_does_not_change_results(vectors: np.ndarray, queries: np.ndarray) -> None:
    # Every thread multiplies the same query and document blocks, so scores are bit-identical.
    one = search_dense(vectors, queries, k=15, near_duplicate_threshold=0.95, n_threads=1)
    three = search_dense(vectors, queries, k=15, near_duplicate_threshold=0.95, n_threads=3)
    for field in SearchResult.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(one, field), getattr(three, field))


def test_exact_duplicates_at_threshold_one(vectors: np.ndarray) -> None:
    result = search_dense(vectors, [10, 14], k=5, near_duplicate_threshold=1.0)
    np.testing.assert_array_equal(result.near_duplicate_indptr, [0, 4, 8])
    np.testing.assert_array_equal(result.near_duplicate_indices, [11, 12, 13, 14, 10, 11, 12, 13])
    # Near-duplicates are not neighbours.
    assert not np.isin(result.neighbours, [10, 11, 12, 13, 14]).any()


def test_excluded_near_duplicates_are_still_reported(vectors: np.ndarray) -> None:
    result = search_dense(
        vectors,
        [10],
        k=5,
        near_duplicate_threshold=1.0,
        exclude_indptr=[0, 2],
        exclude_indices=[12, 999],
    )
    np.testing.assert_array_equal(result.near_duplicate_indices, [11, 12, 13, 14])
    assert 999 not in result.neighbours


def test_negative_similarities_are_neighbours_and_minus_one_means_none_left() -> None:
    vectors = np.array([[1, 0], [0.6, 0.8], [-1, 0], [0, -1]], dtype=np.float32)
    for result in (
        search_dense(vectors, [0], k=5, exclude_indptr=[0, 1], exclude_indices=[3]),
        search_dense_brute_force(vectors, [0], k=5, exclude_indptr=[0, 1], exclude_indices=[3]),
    ):
        np.testing.assert_array_equal(result.neighbours, [[1, 2, -1, -1, -1]])
        np.testing.assert_allclose(result.similarities, [[0.6, -1, 0, 0, 0]], atol=1e-7)


def test_ties_go_to_the_smaller_id() -> None:
    vectors = np.array([[1, 0], [0, 1], [0, 1], [0, 1], [0.6, 0.8]], dtype=np.float32)
    result = search_dense(vectors, [0, 4], k=3)
    np.testing.assert_array_equal(result.neighbours, [[4, 1, 2], [1, 2, 3]])


def test_no_queries() -> None:
    vectors = np.eye(3, dtype=np.float32)
    result = search_dense(vectors, np.zeros(0, dtype=np.int64), k=2, near_duplicate_threshold=0.9)
    assert result.neighbours.shape == (0, 2) and result.similarities.shape == (0, 2)
    np.testing.assert_array_equal(result.near_duplicate_indptr, [0])


def test_bad_arguments_are_refused(vectors: np.ndarray) -> None:
    with pytest.raises(InputError, match=r"vectors\[1\].*L2-normalised"):
        search_dense(np.array([[1, 0], [1, 1], [0, 1]], dtype=np.float32), [0], k=1)
    with pytest.raises(InputError, match="non-empty 2-d matrix"):
        search_dense(np.ones(3, dtype=np.float32), [0], k=1)
    with pytest.raises(InputError, match=r"ids must lie in \[0, 3000\)"):
        search_dense(vectors, [3000], k=1)
    with pytest.raises(InputError, match="1-d array of integers"):
        search_dense(vectors, [0.5], k=1)
    with pytest.raises(InputError, match="at least 1"):
        search_dense(vectors, [0], k=0)
    with pytest.raises(InputError, match=r"must be in \(1e-5, 1\]"):
        search_dense(vectors, [0], k=1, near_duplicate_threshold=1.5)
    with pytest.raises(InputError, match="give exclude_indices"):
        search_dense(vectors, [0], k=1, exclude_indptr=[0, 0])
    with pytest.raises(InputError, match=r"must be \(2,\)"):
        search_dense(vectors, [0], k=1, exclude_indptr=[0], exclude_indices=[])
    with pytest.raises(InputError, match="ids must lie"):
        search_dense(vectors, [0], k=1, exclude_indptr=[0, 1], exclude_indices=[-1])
    with pytest.raises(InputError, match="n_threads"):
        search_dense(vectors, [0], k=1, n_threads=0)


def test_the_comparison_catches_a_wrong_neighbour(vectors: np.ndarray, queries: np.ndarray) -> None:
    ref = search_dense_brute_force(vectors, queries[:50], k=10)
    wrong = search_dense_brute_force(vectors, queries[:50], k=10)
    # The query's least similar document in place of its third neighbour.
    wrong.neighbours[3, 2] = np.argmin(vectors @ vectors[queries[3]])
    with pytest.raises(AssertionError):
        assert_equivalent(wrong, ref, vectors, queries[:50])
