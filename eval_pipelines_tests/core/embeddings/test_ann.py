"""Approximate search: pynndescent's candidates, rescored exactly, against the exact dense
search; over-fetch, retries and the exact fallback; index storage; the auto backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from eval_pipelines.core.embeddings import _nndescent, ann
from eval_pipelines.core.embeddings.ann import (
    AnnIndex,
    build_ann_index,
    choose_backend,
    load_ann_index,
    measure_recall,
    save_ann_index,
    search_ann,
)
from eval_pipelines.core.embeddings.dense import search_dense
from eval_pipelines.core.errors import InputError
from eval_pipelines_tests.helpers.dense_vectors import (
    assert_equivalent,
    clustered_unit_vectors,
    random_exclusions,
)
from eval_pipelines_tests.helpers.nn_descent_builds import BUILDS_NN_DESCENT

N_DOCS = 3000
DIM = 32


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    vectors = clustered_unit_vectors(N_DOCS, DIM, n_clusters=40, spread=0.35, seed=7)
    # A clump of 60 exact duplicates: with k=5 and a small over-fetch, every candidate of
    # these queries is a near-duplicate, so they must be retried or answered exactly.
    vectors[100:160] = vectors[100]
    return vectors


@pytest.fixture(scope="module")
def index(vectors: np.ndarray) -> AnnIndex:
    return build_ann_index(vectors, seed=0, n_threads=2)


# --------------------------------------------------------------------------------------------
# The logic around the graph search, with a stand-in for pynndescent (fast, and exact about
# which candidates arrive)
# --------------------------------------------------------------------------------------------


class _TopCandidates:
    """Stands in for pynndescent: the true top-``fetch`` ids by exact similarity, minus
    ``drop`` of them at random, so recall is imperfect in a known way."""

    def __init__(self, vectors: np.ndarray, drop: int, seed: int) -> None:
        self.vectors = vectors
        self.drop = drop
        self.rng = np.random.default_rng(seed)
        self.fetches: list[int] = []

    def __call__(self, index: Any, query_vectors: np.ndarray, fetch: int) -> np.ndarray:
        self.fetches.append(fetch)
        scores = query_vectors @ self.vectors.T
        order = np.argsort(-scores, axis=1, kind="stable")[:, :fetch].astype(np.int32)
        for row in order:
            row[self.rng.choice(fetch, size=min(self.drop, fetch), replace=False)] = -1
        return order


def _fake_index(vectors: np.ndarray) -> AnnIndex:
    return AnnIndex(
        nndescent=None,
        n_docs=vectors.shape[0],
        dim=vectors.shape[1],
        fingerprint=ann.fingerprint(vectors),
        seed=0,
        build_seconds=0.0,
    )


@pytest.mark.exhaustive
def test_complete_candidates_give_the_exact_answer(
    vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_nndescent, "query", _TopCandidates(vectors, drop=0, seed=0))
    queries = np.random.default_rng(1).choice(N_DOCS, size=300, replace=False)
    indptr, indices = random_exclusions(queries.size, N_DOCS, seed=2)
    options: dict[str, Any] = dict(k=10, exclude_indptr=indptr, exclude_indices=indices)
    found = search_ann(_fake_index(vectors), vectors, queries, **options)
    exact = search_dense(vectors, queries, **options)
    assert found.fallback_queries == 0
    assert_equivalent(found.result, exact, vectors, queries)


def test_overfetch_covers_each_querys_exclusions(
    vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _TopCandidates(vectors, drop=0, seed=0)
    monkeypatch.setattr(_nndescent, "query", fake)
    # Query 0 excludes its own 30 nearest documents, query 1 nothing.
    nearest = np.argsort(-(vectors @ vectors[0]))[1:31].astype(np.int32)
    found = search_ann(
        _fake_index(vectors),
        vectors,
        [0, 1],
        k=10,
        exclude_indptr=[0, 30, 30],
        exclude_indices=nearest,
        overfetch=4,
    )
    # k + self + 30 exclusions + 4 = 45 rounds up to 48 (steps of 8 between 32 and 64);
    # k + 1 + 4 = 15 rounds up to 16.
    assert sorted(fake.fetches) == [16, 48]
    assert found.fallback_queries == 0 and found.retried_queries == 0
    assert not np.isin(found.result.neighbours[0], nearest).any()
    exact = search_dense(vectors, [0, 1], k=10, exclude_indptr=[0, 30, 30], exclude_indices=nearest)
    np.testing.assert_array_equal(found.result.neighbours, exact.neighbours)


def test_short_queries_are_retried_then_answered_exactly(
    vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _TopCandidates(vectors, drop=0, seed=0)
    monkeypatch.setattr(_nndescent, "query", fake)
    queries = np.array([100, 101, 500])
    found = search_ann(
        _fake_index(vectors), vectors, queries, k=5, near_duplicate_threshold=0.99, overfetch=2
    )
    exact = search_dense(vectors, queries, k=5, near_duplicate_threshold=0.99)
    # 100 and 101 have 59 exact duplicates each: 8 candidates, then 32, are all
    # near-duplicates, so both fall back to the exact search; 500 is answered at once.
    assert fake.fetches == [8, 32]
    assert found.retried_queries == 2 and found.fallback_queries == 2
    np.testing.assert_array_equal(found.result.neighbours, exact.neighbours)
    np.testing.assert_array_equal(found.result.near_duplicate_indptr, exact.near_duplicate_indptr)
    np.testing.assert_array_equal(found.result.near_duplicate_indices, exact.near_duplicate_indices)


def test_missing_candidates_lower_recall_but_never_admit_wrong_ids(
    vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_nndescent, "query", _TopCandidates(vectors, drop=5, seed=3))
    queries = np.random.default_rng(4).choice(N_DOCS, size=200, replace=False)
    indptr, indices = random_exclusions(queries.size, N_DOCS, seed=5)
    options: dict[str, Any] = dict(
        k=10, near_duplicate_threshold=0.97, exclude_indptr=indptr, exclude_indices=indices
    )
    found = search_ann(_fake_index(vectors), vectors, queries, **options).result
    exact = search_dense(vectors, queries, **options)
    for row, q in enumerate(queries):
        got = found.neighbours[row][found.neighbours[row] >= 0]
        assert q not in got
        assert not np.isin(got, indices[indptr[row] : indptr[row + 1]]).any()
        lo, hi = found.near_duplicate_indptr[row], found.near_duplicate_indptr[row + 1]
        near = found.near_duplicate_indices[lo:hi]
        # Near-duplicates found among the candidates are a subset of the exact set.
        e_lo, e_hi = exact.near_duplicate_indptr[row], exact.near_duplicate_indptr[row + 1]
        assert set(near) <= set(exact.near_duplicate_indices[e_lo:e_hi])
        assert not np.isin(got, near).any()
        np.testing.assert_allclose(
            found.similarities[row, : got.size], vectors[got] @ vectors[q], atol=1e-6
        )


def test_choose_backend() -> None:
    assert choose_backend("exact", 10**7, 10**6) == "exact"
    assert choose_backend("pynndescent", 100, 1) == "pynndescent"
    # Measured on the demo's LSA vectors: 5,000 queries never pay for a build, at any size;
    # querying every record (all-pairs neighbourhoods) does.
    assert choose_backend("auto", 130_000, 5_000) == "exact"
    assert choose_backend("auto", 1_000_000, 5_000) == "exact"
    assert choose_backend("auto", 130_000, 130_000) == "pynndescent"
    assert choose_backend("auto", 1_000_000, 1_000_000) == "pynndescent"
    assert choose_backend("auto", 5_000_000, 10) == "exact"
    with pytest.raises(InputError, match="one of"):
        choose_backend("faiss", 100, 1)
    with pytest.raises(InputError, match="n_docs"):
        choose_backend("auto", 0, 1)


# --------------------------------------------------------------------------------------------
# With pynndescent itself: slow, since building an index compiles pynndescent's NN-descent in
# every new process (20-50 s; its kernels take the distance function as an argument and call
# numba.get_num_threads(), so numba cannot cache them)
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
@BUILDS_NN_DESCENT
def test_recall_against_exact_search(index: AnnIndex, vectors: np.ndarray) -> None:
    recall = measure_recall(index, vectors, k=10, probe=300, seed=1)
    assert recall.probe_queries == 300 and recall.k == 10
    assert recall.recall_at_k >= 0.95


@pytest.mark.slow
@BUILDS_NN_DESCENT
def test_real_index_honours_exclusions(index: AnnIndex, vectors: np.ndarray) -> None:
    queries = np.random.default_rng(6).choice(N_DOCS, size=300, replace=False)
    indptr, indices = random_exclusions(queries.size, N_DOCS, seed=7)
    found = search_ann(
        index,
        vectors,
        queries,
        k=10,
        near_duplicate_threshold=0.99,
        exclude_indptr=indptr,
        exclude_indices=indices,
    )
    for row, q in enumerate(queries):
        got = found.result.neighbours[row]
        assert q not in got
        assert not np.isin(got, indices[indptr[row] : indptr[row + 1]]).any()
    assert (found.result.neighbours >= 0).all()


@pytest.mark.slow
@BUILDS_NN_DESCENT
def test_save_and_load_round_trip(index: AnnIndex, vectors: np.ndarray, tmp_path: Path) -> None:
    path = tmp_path / "index.pkl"
    save_ann_index(index, path)
    assert [p.name for p in tmp_path.iterdir()] == ["index.pkl"]  # no temporary file left
    loaded = load_ann_index(path, vectors)
    assert loaded.fingerprint == index.fingerprint
    queries = np.arange(50)
    np.testing.assert_array_equal(
        search_ann(loaded, vectors, queries, k=10).result.neighbours,
        search_ann(index, vectors, queries, k=10).result.neighbours,
    )
    other = vectors.copy()
    other[[0, 1]] = other[[1, 0]]
    with pytest.raises(InputError, match="built on other vectors"):
        load_ann_index(path, other)
    with pytest.raises(InputError, match="was built on"):
        load_ann_index(path, vectors[:10])


@pytest.mark.slow
@BUILDS_NN_DESCENT
def test_warm_up_runs_every_path() -> None:
    from eval_pipelines.core.embeddings.warmup import warm_up_dense

    assert warm_up_dense() > 0
