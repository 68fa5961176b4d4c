"""Segmented text indexes: built, stored and searched a segment at a time, with exactly the
results of one index over every document."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import psutil
import pytest
import scipy.sparse as sp

from eval_pipelines.core.text import index_files, inverted_index
from eval_pipelines.core.text import retrieval as rt
from eval_pipelines.core.text import segments as sg
from eval_pipelines.core.text import vectorize as vz
from eval_pipelines_tests.helpers.text_search import (
    assert_same_search,
    exclusion_lists,
    random_matrix,
    synthetic_texts,
)

_TEXTS = synthetic_texts(3000, seed=1)


@pytest.fixture(scope="module")
def whole() -> inverted_index.TextIndex:
    return inverted_index.build_text_index(vz.fit_transform(_TEXTS)[1])


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[int], inverted_index.SegmentedIndex]:
    """The corpus's segmented index for a segment size, written once per module (each segment
    stores 8 MB of per-feature arrays, so small segment sizes cost disk)."""
    folder = tmp_path_factory.mktemp("segmented")
    cache: dict[int, inverted_index.SegmentedIndex] = {}

    def get(segment_docs: int) -> inverted_index.SegmentedIndex:
        if segment_docs not in cache:
            cache[segment_docs] = _segmented(folder, segment_docs)
        return cache[segment_docs]

    return get


def _segmented(
    tmp_path: Path, segment_docs: int, texts: list[str] = _TEXTS
) -> inverted_index.SegmentedIndex:
    path = tmp_path / f"evidence-{segment_docs}.tfidf"
    sg.write_segmented_index(texts, path, segment_docs=segment_docs)
    return sg.load_segmented_index(path)


def test_fit_gives_the_idf_of_fit_transform() -> None:
    model = vz.fit(_TEXTS, batch_size=700)
    np.testing.assert_array_equal(model.idf, vz.fit_transform(_TEXTS)[0].idf)


def test_segments_hold_the_rows_of_the_whole_matrix(
    whole: inverted_index.TextIndex, built: Callable[[int], inverted_index.SegmentedIndex]
) -> None:
    segmented = built(700)
    assert [s.n_docs for s in segmented.segments] == [700, 700, 700, 700, 200]
    assert segmented.starts.tolist() == [0, 700, 1400, 2100, 2800, 3000]
    assert segmented.n_docs == 3000 and segmented.nnz == whole.nnz
    assert segmented.n_features == whole.n_features
    # Same IDF everywhere: every row is bit-identical to the unsegmented one.
    joined = segmented.matrix()
    assert (joined != whole.docs).nnz == 0
    ids = np.array([2999, 0, 701, 700, 699, 1400, 5])
    assert (segmented.rows(ids) != whole.docs[ids]).nnz == 0
    # Memory-mapped, read-only.
    assert not segmented.segments[0].postings.data.flags.writeable


@pytest.mark.exhaustive
@pytest.mark.parametrize("segment_docs", [97, 333, 700, 2999, 3000, 10_000])
@pytest.mark.parametrize("threshold", [None, 0.93, 1.0])
def test_segmented_search_equals_one_index_and_brute_force(
    whole: inverted_index.TextIndex,
    built: Callable[[int], inverted_index.SegmentedIndex],
    segment_docs: int,
    threshold: float | None,
) -> None:
    segmented = built(segment_docs)
    queries = np.concatenate(
        [[10, 13, 20, 21, 30, 2999], np.random.default_rng(2).choice(3000, 150, replace=False)]
    )
    indptr, indices = exclusion_lists(whole, queries, seed=3)
    for exclude in ((None, None), (indptr, indices)):
        for prune in (True, False):
            kwargs = dict(
                k=20,
                near_duplicate_threshold=threshold,
                exclude_indptr=exclude[0],
                exclude_indices=exclude[1],
            )
            expected = rt.search_brute_force(whole, queries, **kwargs)  # type: ignore[arg-type]
            assert_same_search(rt.search(segmented, queries, prune=prune, **kwargs), expected)  # type: ignore[arg-type]
    assert_same_search(
        rt.search_brute_force(segmented, queries, k=20, near_duplicate_threshold=threshold),
        rt.search_brute_force(whole, queries, k=20, near_duplicate_threshold=threshold),
    )


@pytest.mark.parametrize("doc_range", [(0, 3000), (650, 1450), (700, 1400), (10, 20), (5, 5)])
def test_a_document_range_across_segments(
    whole: inverted_index.TextIndex,
    built: Callable[[int], inverted_index.SegmentedIndex],
    doc_range: tuple[int, int],
) -> None:
    segmented = built(700)
    queries = np.arange(0, 3000, 17)
    kwargs = dict(k=15, near_duplicate_threshold=0.93, doc_range=doc_range)
    assert_same_search(
        rt.search(segmented, queries, **kwargs),  # type: ignore[arg-type]
        rt.search_brute_force(whole, queries, **kwargs),  # type: ignore[arg-type]
    )


@pytest.mark.exhaustive
def test_random_matrices_with_ties_and_negative_weights() -> None:
    # Segments built from any matrix (not only TF-IDF texts): ties broken by id across
    # segments, and an index with negative weights is scanned in full.
    matrix = random_matrix(7)
    whole = inverted_index.build_text_index(matrix)
    queries = np.arange(whole.n_docs)
    indptr, indices = exclusion_lists(whole, queries, seed=7)
    for cut in ([0, 90, 91, 300, whole.n_docs], [0, whole.n_docs]):
        segmented = inverted_index.SegmentedIndex(
            tuple(
                inverted_index.build_text_index(matrix[a:b])
                for a, b in zip(cut, cut[1:], strict=False)
            )
        )
        for k in (3, 50):
            kwargs = dict(
                k=k, near_duplicate_threshold=0.9, exclude_indptr=indptr, exclude_indices=indices
            )
            assert_same_search(
                rt.search(segmented, queries, **kwargs),  # type: ignore[arg-type]
                rt.search_brute_force(whole, queries, **kwargs),  # type: ignore[arg-type]
            )
    negative = sp.csr_matrix(matrix.multiply(np.where(np.arange(matrix.shape[1]) % 5, 1, -1)))
    segmented = inverted_index.SegmentedIndex(
        (
            inverted_index.build_text_index(negative[:100]),
            inverted_index.build_text_index(negative[100:]),
        )
    )
    assert_same_search(
        rt.search(segmented, queries, k=10),
        rt.search_brute_force(inverted_index.build_text_index(negative), queries, k=10),
    )


@pytest.mark.exhaustive
def test_later_segments_prune_from_the_kth_score_found_before(tmp_path: Path) -> None:
    # Ten copies of a corpus, a segment each: every segment holds the same documents, so
    # searching each one alone reads the same postings ten times, while the segmented search
    # starts segments 2-10 from the k-th score of those before and reads far fewer.
    texts = _TEXTS[:1000] * 10
    whole = inverted_index.build_text_index(vz.fit_transform(texts)[1])
    segmented = _segmented(tmp_path, 1000, texts)
    queries = np.arange(0, 1000, 7)
    carried, alone = rt.SearchStats(), rt.SearchStats()
    assert_same_search(
        rt.search(segmented, queries, k=20, stats=carried),
        rt.search(whole, queries, k=20, prune=False),
    )
    for segment in segmented.segments:
        rt.search(segment, queries, k=20, stats=alone)
    assert carried.postings_total == alone.postings_total
    # Measured: 10.8M postings read against 15.3M (and 9.9M for one unsegmented index).
    assert carried.postings_read < 0.8 * alone.postings_read


def test_empty_corpus_and_no_queries(
    tmp_path: Path, built: Callable[[int], inverted_index.SegmentedIndex]
) -> None:
    empty = _segmented(tmp_path, 10, [])
    assert empty.n_docs == 0 and len(empty.segments) == 1
    found = rt.search(built(700), np.zeros(0, dtype=np.int64), k=4)
    assert found.neighbours.shape == (0, 4)


def test_bad_input_is_refused(
    tmp_path: Path, built: Callable[[int], inverted_index.SegmentedIndex]
) -> None:
    segmented = built(700)
    with pytest.raises(ValueError, match="query_docs"):
        rt.search(segmented, np.array([3000]), k=3)
    with pytest.raises(ValueError, match="doc_range"):
        rt.search(segmented, np.array([1]), k=3, doc_range=(0, 3001))
    with pytest.raises(ValueError, match="segment_docs"):
        sg.write_segmented_index(_TEXTS, tmp_path / "x.tfidf", segment_docs=0)
    assert not (tmp_path / "x.tfidf").exists()
    with pytest.raises(ValueError, match="segments"):
        inverted_index.SegmentedIndex(())
    with pytest.raises(ValueError, match="feature counts"):
        inverted_index.SegmentedIndex(
            (
                inverted_index.build_text_index(random_matrix(1)),
                inverted_index.build_text_index(sp.eye(3, format="csr")),
            )
        )


def test_loading_is_checked_and_a_failed_write_keeps_the_old_index(tmp_path: Path) -> None:
    path = tmp_path / "evidence.tfidf"
    sg.write_segmented_index(_TEXTS, path, segment_docs=1000)
    # An unsegmented index directory (the previous format) is not a segmented index.
    index_files.save_text_index(
        inverted_index.build_text_index(vz.fit_transform(_TEXTS[:5])[1]), tmp_path / "old"
    )
    with pytest.raises(FileNotFoundError):
        sg.load_segmented_index(tmp_path / "old")

    def broken(written: int, segments: int) -> None:
        if written == 2:
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        sg.write_segmented_index(_TEXTS[:2000], path, segment_docs=500, progress=broken)
    assert sg.load_segmented_index(path).n_docs == 3000
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []

    np.save(path / "starts.npy", np.array([0, 1000, 2000, 2999]))
    with pytest.raises(ValueError, match=r"starts\.npy"):
        sg.load_segmented_index(path)


@pytest.mark.exhaustive
def test_released_pages_leave_the_process_and_stay_readable(tmp_path: Path) -> None:
    # 4.9M weights: the postings' weights alone are 19.7 MB, memory-mapped.
    matrix = sp.random(20_000, 4096, density=0.06, format="csr", dtype=np.float32, random_state=0)
    index_files.save_text_index(inverted_index.build_text_index(matrix), tmp_path / "mapped")
    index = index_files.load_text_index(tmp_path / "mapped")
    process = psutil.Process()
    before = process.memory_info().rss
    total = float(index.postings.data.sum(dtype=np.float64))
    touched = process.memory_info().rss
    index.release_pages()
    released = process.memory_info().rss
    assert touched - before > 12 * 2**20
    assert touched - released > 12 * 2**20
    assert float(index.postings.data.sum(dtype=np.float64)) == total
    # An index in memory has no mapping to release.
    inverted_index.build_text_index(matrix[:10]).release_pages()
