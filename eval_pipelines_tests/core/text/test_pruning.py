"""The pruned search (MaxScore) against the plain scan and the brute-force reference.

Pruning skips postings and rescores the surviving candidates from their rows; the results
must stay identical, bit for bit, to the reference: neighbours, similarities, tie order and
near-duplicate sets. The random corpora below are built to make that hard: few distinct
weights (so many exactly tied scores), exact duplicate rows, empty rows, a few features in
most documents (long posting lists, as char n-grams are) and many rare ones.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from eval_pipelines.core.text import inverted_index, search_result
from eval_pipelines.core.text import retrieval as rt
from eval_pipelines.core.text import vectorize as vz
from eval_pipelines_tests.helpers.text_search import exclusion_lists, random_matrix, synthetic_texts

_DEMO_RECORDS = Path(__file__).resolve().parents[3] / "data" / "demo" / "icd10cm_records.parquet"


def _assert_same(fast: search_result.SearchResult, slow: search_result.SearchResult) -> None:
    np.testing.assert_array_equal(fast.neighbours, slow.neighbours)
    np.testing.assert_array_equal(fast.similarities, slow.similarities)
    np.testing.assert_array_equal(fast.near_duplicate_indptr, slow.near_duplicate_indptr)
    np.testing.assert_array_equal(fast.near_duplicate_indices, slow.near_duplicate_indices)
    assert fast.neighbours.dtype == slow.neighbours.dtype == np.int32
    assert fast.similarities.dtype == slow.similarities.dtype == np.float32
    assert fast.near_duplicate_indptr.dtype == np.int64
    assert fast.near_duplicate_indices.dtype == np.int32


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("threshold", [None, 0.8, 0.95, 1.0])
@pytest.mark.parametrize("k", [1, 5, 40, 700])
def test_pruned_search_equals_brute_force_on_random_matrices(
    seed: int, threshold: float | None, k: int
) -> None:
    index = inverted_index.build_text_index(random_matrix(seed))
    queries = np.random.default_rng(seed + 10).choice(index.n_docs, 150, replace=False)
    for with_exclusions in (False, True):
        indptr, indices = exclusion_lists(index, queries, seed) if with_exclusions else (None, None)
        kwargs = dict(
            k=k,
            near_duplicate_threshold=threshold,
            exclude_indptr=indptr,
            exclude_indices=indices,
        )
        slow = rt.search_brute_force(index, queries, **kwargs)  # type: ignore[arg-type]
        for prune in (True, False):
            _assert_same(rt.search(index, queries, prune=prune, **kwargs), slow)  # type: ignore[arg-type]


def test_pruning_skips_postings_and_rescores() -> None:
    """On text-like data pruning skips postings and rescores rows (the identity tests need
    not: on the small random corpora it often falls back to rereading every list)."""
    _, matrix = vz.fit_transform(synthetic_texts(3000, seed=1))
    index = inverted_index.build_text_index(matrix)
    queries = np.arange(0, 3000, 7)
    pruned, plain = rt.SearchStats(), rt.SearchStats()
    fast = rt.search(index, queries, k=5, near_duplicate_threshold=0.95, stats=pruned)
    slow = rt.search(index, queries, k=5, near_duplicate_threshold=0.95, prune=False, stats=plain)
    _assert_same(fast, slow)
    assert pruned.queries == plain.queries == queries.shape[0]
    assert plain.postings_read == plain.postings_total == pruned.postings_total
    assert plain.rescored_documents == plain.rescored_entries == 0
    # Template texts tie a lot, so the saving here is modest (the demo test asks for more).
    assert 0 < pruned.postings_read < plain.postings_read
    assert pruned.rescored_documents > 0 and pruned.rescored_entries > 0


def test_near_duplicate_overflow_is_rerun_when_pruning(monkeypatch: pytest.MonkeyPatch) -> None:
    index = inverted_index.build_text_index(random_matrix(3))
    queries = np.arange(index.n_docs)
    expected = rt.search_brute_force(index, queries, k=6, near_duplicate_threshold=0.8)
    assert np.diff(expected.near_duplicate_indptr).max() > 2
    monkeypatch.setattr(rt, "_NEAR_DUPLICATE_CAP", 2)
    _assert_same(rt.search(index, queries, k=6, near_duplicate_threshold=0.8), expected)


def test_negative_weights_fall_back_to_the_plain_scan() -> None:
    """Pruning bounds need weights >= 0; an index with negative ones is scanned in full."""
    matrix = random_matrix(4).tolil()
    matrix[3, 0] = -0.5
    matrix[7, 1] = -0.25
    index = inverted_index.build_text_index(matrix.tocsr())
    assert not index.nonnegative
    assert index.feature_max is not None and np.isinf(index.feature_max[[0, 1]]).all()
    queries = np.arange(index.n_docs)
    stats = rt.SearchStats()
    fast = rt.search(index, queries, k=7, near_duplicate_threshold=0.9, stats=stats)
    _assert_same(fast, rt.search_brute_force(index, queries, k=7, near_duplicate_threshold=0.9))
    assert stats.postings_read == stats.postings_total


@pytest.mark.parametrize("doc_range", [(0, 600), (0, 1), (100, 350), (599, 600), (250, 250)])
def test_a_document_range_equals_brute_force(doc_range: tuple[int, int]) -> None:
    index = inverted_index.build_text_index(random_matrix(5))
    queries = np.random.default_rng(5).choice(index.n_docs, 120, replace=False)
    indptr, indices = exclusion_lists(index, queries, 5)
    for threshold in (None, 0.9):
        kwargs = dict(
            k=9,
            near_duplicate_threshold=threshold,
            exclude_indptr=indptr,
            exclude_indices=indices,
            doc_range=doc_range,
        )
        slow = rt.search_brute_force(index, queries, **kwargs)  # type: ignore[arg-type]
        valid = slow.neighbours[slow.neighbours >= 0]
        assert np.all((valid >= doc_range[0]) & (valid < doc_range[1]))
        for prune in (True, False):
            _assert_same(rt.search(index, queries, prune=prune, **kwargs), slow)  # type: ignore[arg-type]


def test_bad_document_ranges_are_refused() -> None:
    index = inverted_index.build_text_index(random_matrix(6))
    for doc_range in ((-1, 10), (10, 5), (0, 601)):
        with pytest.raises(ValueError, match="doc_range"):
            rt.search(index, np.array([1]), k=2, doc_range=doc_range)


@pytest.mark.exhaustive
def test_demo_records_pruned_equal_brute_force() -> None:
    """Real ICD-10-CM texts, vectorised as the stages do, with and without leave-outs."""
    import polars as pl

    records = pl.read_parquet(_DEMO_RECORDS, columns=["record_key", "text"]).sort("record_key")
    _, matrix = vz.fit_transform(records.get_column("text").to_list())
    index = inverted_index.build_text_index(matrix)
    queries = np.random.default_rng(11).choice(index.n_docs, 80, replace=False)
    indptr, indices = exclusion_lists(index, queries, 11)
    stats = rt.SearchStats()
    for threshold in (None, 0.93, 0.98):
        for exclusions in ((None, None), (indptr, indices)):
            kwargs = dict(
                k=64,
                near_duplicate_threshold=threshold,
                exclude_indptr=exclusions[0],
                exclude_indices=exclusions[1],
            )
            slow = rt.search_brute_force(index, queries, **kwargs)  # type: ignore[arg-type]
            _assert_same(rt.search(index, queries, stats=stats, **kwargs), slow)  # type: ignore[arg-type]
    # On these texts pruning reads well under half of the postings.
    assert stats.postings_read < stats.postings_total / 2
