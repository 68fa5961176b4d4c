"""Sharded search: per-range searches merged give exactly the unsharded result."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from eval_pipelines.core.text import index_files, inverted_index
from eval_pipelines.core.text import retrieval as rt
from eval_pipelines.core.text import shards as sh
from eval_pipelines.core.text import vectorize as vz
from eval_pipelines_tests.helpers.text_search import (
    assert_same_search,
    exclusion_lists,
    random_matrix,
    synthetic_texts,
)


@pytest.fixture(scope="module")
def index() -> inverted_index.TextIndex:
    _, matrix = vz.fit_transform(synthetic_texts(3000, seed=1), n_features=2**20)
    return inverted_index.build_text_index(matrix)


def test_shard_ranges_cover_every_document_once() -> None:
    assert sh.shard_ranges(10, 1) == [(0, 10)]
    assert sh.shard_ranges(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert sh.shard_ranges(2, 4) == [(0, 0), (0, 1), (1, 1), (1, 2)]
    assert sh.shard_ranges(0, 2) == [(0, 0), (0, 0)]
    for n, shards in ((130525, 7), (11, 11), (5, 8)):
        ranges = sh.shard_ranges(n, shards)
        assert len(ranges) == shards
        assert ranges[0][0] == 0 and ranges[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    with pytest.raises(ValueError, match="shards"):
        sh.shard_ranges(10, 0)


@pytest.mark.exhaustive
@pytest.mark.parametrize("shards", [1, 2, 3, 7])
@pytest.mark.parametrize("threshold", [None, 0.93, 1.0])
def test_sharded_search_equals_search_and_brute_force(
    index: inverted_index.TextIndex, shards: int, threshold: float | None
) -> None:
    queries = np.concatenate(
        [[10, 13, 20, 21, 30], np.random.default_rng(2).choice(3000, 200, replace=False)]
    )
    indptr, indices = exclusion_lists(index, queries, seed=3)
    for exclude in ((None, None), (indptr, indices)):
        kwargs = dict(
            k=20,
            near_duplicate_threshold=threshold,
            exclude_indptr=exclude[0],
            exclude_indices=exclude[1],
        )
        merged = sh.search_sharded(index, queries, shards=shards, **kwargs)  # type: ignore[arg-type]
        assert_same_search(merged, rt.search(index, queries, **kwargs))  # type: ignore[arg-type]
        assert_same_search(merged, rt.search_brute_force(index, queries, **kwargs))  # type: ignore[arg-type]


@pytest.mark.exhaustive
@pytest.mark.parametrize("shards", [1, 2, 3, 7])
def test_sharded_search_on_random_matrices_with_ties(shards: int) -> None:
    index = inverted_index.build_text_index(random_matrix(7))
    queries = np.arange(index.n_docs)
    indptr, indices = exclusion_lists(index, queries, seed=7)
    for k in (3, 50, 700):
        for threshold in (None, 0.9):
            kwargs = dict(
                k=k,
                near_duplicate_threshold=threshold,
                exclude_indptr=indptr,
                exclude_indices=indices,
            )
            assert_same_search(
                sh.search_sharded(index, queries, shards=shards, **kwargs),  # type: ignore[arg-type]
                rt.search_brute_force(index, queries, **kwargs),  # type: ignore[arg-type]
            )


def test_shards_hold_only_their_documents_and_merge_in_any_order(
    index: inverted_index.TextIndex,
) -> None:
    queries = np.arange(0, 3000, 11)
    ranges = sh.shard_ranges(index.n_docs, 3)
    parts = [
        rt.search(index, queries, doc_range=r, k=15, near_duplicate_threshold=0.93) for r in ranges
    ]
    for (lo, hi), part in zip(ranges, parts, strict=True):
        found = np.concatenate([part.neighbours[part.neighbours >= 0], part.near_duplicate_indices])
        assert np.all((found >= lo) & (found < hi))
    expected = rt.search(index, queries, k=15, near_duplicate_threshold=0.93)
    assert_same_search(sh.merge_shard_results(parts, k=15), expected)
    assert_same_search(sh.merge_shard_results(parts[::-1], k=15), expected)


def test_shards_of_a_memory_mapped_index(index: inverted_index.TextIndex, tmp_path: Path) -> None:
    path = tmp_path / "evidence.tfidf"
    index_files.save_text_index(index, path)
    loaded = index_files.load_text_index(path)
    queries = np.arange(0, 3000, 13)
    assert_same_search(
        sh.search_sharded(loaded, queries, shards=4, k=10, near_duplicate_threshold=0.93),
        rt.search(index, queries, k=10, near_duplicate_threshold=0.93),
    )


def test_merge_edge_cases(index: inverted_index.TextIndex) -> None:
    empty = sh.search_sharded(index, np.zeros(0, dtype=np.int64), shards=3, k=4)
    assert empty.neighbours.shape == (0, 4)
    assert empty.near_duplicate_indptr.tolist() == [0]
    # More shards than documents: most shards are empty.
    small = inverted_index.build_text_index(random_matrix(8, n_docs=30, n_features=20))
    queries = np.arange(30)
    assert_same_search(
        sh.search_sharded(small, queries, shards=40, k=5, near_duplicate_threshold=0.9),
        rt.search_brute_force(small, queries, k=5, near_duplicate_threshold=0.9),
    )
    with pytest.raises(ValueError, match="parts"):
        sh.merge_shard_results([], k=3)
