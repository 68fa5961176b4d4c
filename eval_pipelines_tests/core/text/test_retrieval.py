"""Exact neighbour search: the numba scan against the scipy/numpy brute-force reference."""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from eval_pipelines.core.search_request import NEAR_DUPLICATE_TOLERANCE
from eval_pipelines.core.text import index_files, inverted_index, search_result
from eval_pipelines.core.text import retrieval as rt
from eval_pipelines.core.text import vectorize as vz
from eval_pipelines_tests.helpers.text_search import synthetic_texts

# This file sits in eval_pipelines_tests/core/text/, so the repository is parents[3].
_DEMO_RECORDS = Path(__file__).resolve().parents[3] / "data" / "demo" / "icd10cm_records.parquet"


@pytest.fixture(scope="module")
def index() -> inverted_index.TextIndex:
    _, matrix = vz.fit_transform(synthetic_texts(3000, seed=1), n_features=2**20)
    return inverted_index.build_text_index(matrix)


@pytest.fixture(scope="module")
def queries() -> np.ndarray:
    rng = np.random.default_rng(2)
    sample = rng.choice(3000, size=400, replace=False)
    return np.concatenate([[10, 13, 20, 21, 30], sample[~np.isin(sample, [10, 13, 20, 21, 30])]])


def _assert_same(fast: search_result.SearchResult, slow: search_result.SearchResult) -> None:
    # Both paths add the same float32 products in the same order, so scores are bit-identical
    # and ties break identically (smaller id first).
    np.testing.assert_array_equal(fast.neighbours, slow.neighbours)
    np.testing.assert_array_equal(fast.similarities, slow.similarities)
    np.testing.assert_array_equal(fast.near_duplicate_indptr, slow.near_duplicate_indptr)
    np.testing.assert_array_equal(fast.near_duplicate_indices, slow.near_duplicate_indices)
    assert fast.neighbours.dtype == np.int32
    assert fast.similarities.dtype == np.float32
    assert fast.near_duplicate_indptr.dtype == np.int64
    assert fast.near_duplicate_indices.dtype == np.int32


def _near_duplicates(result: search_result.SearchResult, row: int) -> np.ndarray:
    indptr = result.near_duplicate_indptr
    return result.near_duplicate_indices[indptr[row] : indptr[row + 1]]


def test_index_is_the_transpose(index: inverted_index.TextIndex) -> None:
    assert index.n_docs == 3000
    assert (index.postings != index.docs.T.tocsr()).nnz == 0
    assert index.postings.indices.dtype == np.int32
    assert index.postings.has_sorted_indices


@pytest.mark.parametrize("threshold", [None, 0.93, 0.98, 1.0])
def test_search_equals_brute_force(
    index: inverted_index.TextIndex, queries: np.ndarray, threshold: float | None
) -> None:
    fast = rt.search(index, queries, k=20, near_duplicate_threshold=threshold)
    slow = rt.search_brute_force(index, queries, k=20, near_duplicate_threshold=threshold)
    _assert_same(fast, slow)
    if threshold is None:
        assert fast.near_duplicate_indices.size == 0
    else:
        assert fast.near_duplicate_indices.size > 0
    sims = fast.similarities
    valid = fast.neighbours >= 0
    assert np.all(np.diff(sims, axis=1) <= 0)
    assert np.all(sims[valid] > 0) and np.all(sims[~valid] == 0)
    for row, q in enumerate(queries):
        assert q not in fast.neighbours[row]
        near = _near_duplicates(fast, row)
        assert q not in near
        assert np.all(np.diff(near) > 0)
        assert not np.isin(fast.neighbours[row], near).any()


def test_exact_duplicates_at_threshold_one(index: inverted_index.TextIndex) -> None:
    result = rt.search(index, np.array([10, 13]), k=5, near_duplicate_threshold=1.0)
    assert _near_duplicates(result, 0).tolist() == [11, 12, 13]
    assert _near_duplicates(result, 1).tolist() == [10, 11, 12]
    without = rt.search(index, np.array([10]), k=5)
    assert without.neighbours[0, :3].tolist() == [11, 12, 13]


def test_exclusions_are_honoured_without_shortfall(
    index: inverted_index.TextIndex, queries: np.ndarray
) -> None:
    rng = np.random.default_rng(4)
    lengths = rng.integers(0, 60, size=queries.shape[0])
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    # Leave out each query's own top documents too, so the exclusions bite.
    plain = rt.search(index, queries, k=30)
    lists = []
    for row, length in enumerate(lengths):
        own = plain.neighbours[row, : length // 2]
        own = own[own >= 0]
        lists.append(np.concatenate([own, rng.integers(0, index.n_docs, length - own.size)]))
    indices = np.concatenate(lists).astype(np.int32)
    for threshold in (None, 0.93):
        fast = rt.search(
            index,
            queries,
            k=30,
            near_duplicate_threshold=threshold,
            exclude_indptr=indptr,
            exclude_indices=indices,
        )
        slow = rt.search_brute_force(
            index,
            queries,
            k=30,
            near_duplicate_threshold=threshold,
            exclude_indptr=indptr,
            exclude_indices=indices,
        )
        _assert_same(fast, slow)
        scores = (index.docs[queries] @ index.docs.T).toarray()
        for row, q in enumerate(queries):
            left_out = set(indices[indptr[row] : indptr[row + 1]].tolist())
            left_out |= set(_near_duplicates(fast, row).tolist()) | {int(q)}
            assert not left_out & set(fast.neighbours[row].tolist())
            available = np.count_nonzero(scores[row] > 0) - len(
                [d for d in left_out if scores[row, d] > 0]
            )
            assert np.count_nonzero(fast.neighbours[row] >= 0) == min(30, available)


def test_k_beyond_the_corpus_pads_with_minus_one() -> None:
    _, matrix = vz.fit_transform(["left knee", "right knee", "knee pain", "ear"])
    index = inverted_index.build_text_index(matrix)
    for fn in (rt.search, rt.search_brute_force):
        result = fn(index, np.array([0, 3]), k=10)
        assert result.neighbours.shape == (2, 10)
        assert sorted(result.neighbours[0, :2].tolist()) == [1, 2]
        assert np.all(result.neighbours[0, 2:] == -1)
        assert np.all(result.similarities[0, 2:] == 0)
        # "ear" shares no feature with the others.
        assert np.all(result.neighbours[1] == -1)


@pytest.mark.exhaustive
def test_empty_rows_and_isolated_texts(index: inverted_index.TextIndex) -> None:
    assert index.docs[20].nnz == 0 and index.docs[21].nnz == 0
    # The isolated text shares no hashed feature with any other document.
    assert (index.docs @ index.docs[30].T).nnz == 1
    result = rt.search(index, np.array([20, 21, 30]), k=8, near_duplicate_threshold=0.93)
    assert np.all(result.neighbours == -1)
    assert np.all(result.similarities == 0)
    assert result.near_duplicate_indices.size == 0
    everyone = rt.search(index, np.arange(index.n_docs), k=50)
    assert not np.isin(everyone.neighbours, [20, 21, 30]).any()


def test_near_duplicate_overflow_is_rerun(
    index: inverted_index.TextIndex, queries: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = rt.search_brute_force(index, queries, k=10, near_duplicate_threshold=0.93)
    assert np.diff(expected.near_duplicate_indptr).max() > 2
    monkeypatch.setattr(rt, "_NEAR_DUPLICATE_CAP", 2)
    _assert_same(rt.search(index, queries, k=10, near_duplicate_threshold=0.93), expected)


def test_thread_count_does_not_change_results(
    index: inverted_index.TextIndex, queries: np.ndarray
) -> None:
    one = rt.search(index, queries, k=16, near_duplicate_threshold=0.98, n_threads=1)
    two = rt.search(index, queries, k=16, near_duplicate_threshold=0.98, n_threads=2)
    _assert_same(one, two)
    empty = rt.search(index, np.zeros(0, dtype=np.int64), k=4, near_duplicate_threshold=0.98)
    assert empty.neighbours.shape == (0, 4)
    assert empty.near_duplicate_indptr.tolist() == [0]


def _mapped(array: np.ndarray) -> bool:
    """Whether an array's memory belongs to a memory map (scipy may wrap it in views)."""
    base: object = array
    while isinstance(base, np.ndarray):
        if isinstance(base, np.memmap):
            return True
        base = base.base
    return isinstance(base, mmap.mmap)


def test_save_and_load_round_trip(index: inverted_index.TextIndex, tmp_path: Path) -> None:
    path = tmp_path / "evidence.tfidf"
    index_files.save_text_index(index, path)
    index_files.save_text_index(index, path)
    # The second save replaced the first: no staging or old directories are left behind.
    assert [p.name for p in tmp_path.iterdir()] == ["evidence.tfidf"]
    loaded = index_files.load_text_index(path)
    assert loaded.n_docs == index.n_docs
    for name in ("docs", "postings"):
        a: sp.csr_matrix = getattr(loaded, name)
        b: sp.csr_matrix = getattr(index, name)
        assert a.shape == b.shape
        for field in ("data", "indices", "indptr"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
            assert getattr(a, field).dtype == getattr(b, field).dtype
            # Views of read-only memory maps of the files, not copies.
            assert _mapped(getattr(a, field))
            assert not getattr(a, field).flags.writeable
    assert loaded.feature_max is not None and index.feature_max is not None
    np.testing.assert_array_equal(loaded.feature_max, index.feature_max)
    assert loaded.nonnegative
    queries = np.arange(0, 3000, 97)
    for prune in (True, False):
        _assert_same(
            rt.search(loaded, queries, k=5, near_duplicate_threshold=0.98, prune=prune),
            rt.search(index, queries, k=5, near_duplicate_threshold=0.98, prune=prune),
        )


def test_save_replaces_an_index_atomically(
    index: inverted_index.TextIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replacing an index swaps whole directories; a reader of the old one keeps it intact."""
    small = inverted_index.build_text_index(index.docs[:100])
    path = tmp_path / "evidence.tfidf"
    index_files.save_text_index(small, path)
    old = index_files.load_text_index(path)
    index_files.save_text_index(index, path)
    assert index_files.load_text_index(path).n_docs == 3000
    # The old maps still read the old (now unlinked) files.
    assert old.n_docs == 100
    np.testing.assert_array_equal(old.docs.data, small.docs.data)
    # Without an atomic exchange the old directory is set aside before the rename.
    monkeypatch.setattr(index_files, "_exchange", lambda a, b: False)
    index_files.save_text_index(small, path)
    assert index_files.load_text_index(path).n_docs == 100
    assert [p.name for p in tmp_path.iterdir()] == ["evidence.tfidf"]


def test_failed_save_leaves_the_old_index(
    index: inverted_index.TextIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "evidence.tfidf"
    index_files.save_text_index(index, path)

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(index_files, "replace_directory", broken)
    with pytest.raises(OSError, match="disk full"):
        index_files.save_text_index(inverted_index.build_text_index(index.docs[:10]), path)
    assert [p.name for p in tmp_path.iterdir()] == ["evidence.tfidf"]
    assert index_files.load_text_index(path).n_docs == 3000


def test_indexes_without_postings_round_trip(tmp_path: Path) -> None:
    """Zero-length arrays are stored and mapped too (all-empty rows, or no rows at all)."""
    for n_docs in (3, 0):
        path = tmp_path / f"empty-{n_docs}.tfidf"
        index_files.save_text_index(
            inverted_index.build_text_index(sp.csr_matrix((n_docs, 8), dtype=np.float32)), path
        )
        loaded = index_files.load_text_index(path)
        assert loaded.n_docs == n_docs and loaded.docs.nnz == 0
        result = rt.search(loaded, np.arange(n_docs), k=2, near_duplicate_threshold=0.9)
        assert np.all(result.neighbours == -1)


def test_loading_something_else_is_refused(tmp_path: Path) -> None:
    old_format = tmp_path / "evidence.npz"
    old_format.write_bytes(b"PK")
    with pytest.raises(FileNotFoundError):
        index_files.load_text_index(old_format)
    with pytest.raises(FileNotFoundError):
        index_files.load_text_index(tmp_path / "missing.tfidf")
    (tmp_path / "empty.tfidf").mkdir()
    with pytest.raises(FileNotFoundError):
        index_files.load_text_index(tmp_path / "empty.tfidf")


def test_bad_arguments_are_refused(index: inverted_index.TextIndex) -> None:
    q = np.array([1, 2])
    with pytest.raises(ValueError, match="near_duplicate_threshold"):
        rt.search(index, q, k=3, near_duplicate_threshold=0.0)
    with pytest.raises(ValueError, match="near_duplicate_threshold"):
        rt.search(index, q, k=3, near_duplicate_threshold=1.5)
    with pytest.raises(ValueError, match="give both"):
        rt.search(index, q, k=3, exclude_indptr=np.array([0, 0, 0]))
    with pytest.raises(ValueError, match="exclude_indptr.shape"):
        rt.search(index, q, k=3, exclude_indptr=np.array([0, 0]), exclude_indices=np.array([]))
    with pytest.raises(ValueError, match="exclude_indices"):
        rt.search(index, q, k=3, exclude_indptr=np.array([0, 1, 1]), exclude_indices=[5000])
    with pytest.raises(ValueError, match="query_docs"):
        rt.search(index, np.array([3000]), k=3)
    with pytest.raises(ValueError, match="k="):
        rt.search(index, q, k=0)


@pytest.mark.exhaustive
def test_demo_records_match_brute_force() -> None:
    import polars as pl

    texts = pl.read_parquet(_DEMO_RECORDS, columns=["text"]).get_column("text").to_list()
    _, matrix = vz.fit_transform(texts)
    index = inverted_index.build_text_index(matrix)
    queries = np.random.default_rng(9).choice(index.n_docs, size=60, replace=False)
    for threshold in (0.93, 1.0):
        _assert_same(
            rt.search(index, queries, k=64, near_duplicate_threshold=threshold),
            rt.search_brute_force(index, queries, k=64, near_duplicate_threshold=threshold),
        )


# --------------------------------------------------------------------------------------------
# Independent oracle
# --------------------------------------------------------------------------------------------

# oracle: scikit-learn NearestNeighbors(metric="cosine", algorithm="brute"), fitted on the
# vectoriser's matrix in float64. It shares no code with retrieval.py: it renormalises the rows
# itself, computes cosine distances with its own sparse product, and does its own ranking.
# Tolerance on similarities: the search sums float32 products (about 1e-7 relative rounding
# per term, over tens of shared features, on rows normalised in float32) while the oracle
# works in float64, so scores differ by about 1e-6 at most here (1.1e-6 seen on the synthetic
# corpus). 1e-5 is ten times that, and the margin search_request.NEAR_DUPLICATE_TOLERANCE allows
# for float32 rounding; a wrong ranking or a wrong score is off by far more.
_ORACLE_TOLERANCE = 1e-5


def _oracle_similarities(matrix: sp.csr_matrix, queries: np.ndarray) -> np.ndarray:
    """Dense ``(n_queries, n_docs)`` float64 cosine similarities from scikit-learn."""
    from sklearn.neighbors import NearestNeighbors

    docs = sp.csr_matrix(matrix, dtype=np.float64)
    oracle = NearestNeighbors(metric="cosine", algorithm="brute").fit(docs)
    # Every document, ranked by the oracle; scattered back into document order.
    distances, ids = oracle.kneighbors(docs[queries], n_neighbors=docs.shape[0])
    sims = np.empty_like(distances)
    np.put_along_axis(sims, ids, 1.0 - distances, axis=1)
    return sims


def _oracle_near_duplicates(
    matrix: sp.csr_matrix, queries: np.ndarray, threshold: float
) -> tuple[list[set[int]], list[set[int]]]:
    """Per query, the documents that must and that may be near-duplicates, per the oracle.

    ``search`` documents near-duplicates as similarity >= threshold - 1e-5. Documents that
    clear that cut by more than the float tolerance must be in the set; documents that fall
    short of it by more than the tolerance must not. Both bounds come from
    ``radius_neighbors`` (cosine distance = 1 - similarity), without the query itself.
    """
    from sklearn.neighbors import NearestNeighbors

    docs = sp.csr_matrix(matrix, dtype=np.float64)
    oracle = NearestNeighbors(metric="cosine", algorithm="brute").fit(docs)
    cut = threshold - NEAR_DUPLICATE_TOLERANCE
    bounds = []
    for radius in (1.0 - cut - _ORACLE_TOLERANCE, 1.0 - cut + _ORACLE_TOLERANCE):
        rows = oracle.radius_neighbors(
            docs[queries], radius=max(radius, 0.0), return_distance=False
        )
        bounds.append([set(row.tolist()) - {int(q)} for row, q in zip(rows, queries, strict=True)])
    return bounds[0], bounds[1]


def _assert_matches_oracle(
    result: search_result.SearchResult,
    queries: np.ndarray,
    oracle_sims: np.ndarray,
    near_duplicates: bool,
) -> None:
    """Compare a search result with oracle similarities, allowing ties at the k-th place.

    For each query the admissible documents are all but the query itself and (when a
    threshold was given) the near-duplicates the search reports, which are checked against
    the oracle separately. Then: the number of neighbours is min(k, admissible documents of
    positive similarity); similarities agree with the oracle's ranking rank by rank and with
    the oracle's score of each returned id; and every document strictly above the k-th
    similarity (by more than the tolerance) is returned, while none returned lies below it.
    """
    tol = _ORACLE_TOLERANCE
    k = result.neighbours.shape[1]
    for row, q in enumerate(queries):
        sims = oracle_sims[row].copy()
        sims[q] = -np.inf
        if near_duplicates:
            sims[_near_duplicates(result, row)] = -np.inf
        ranked = np.argsort(-sims, kind="stable")
        ranked = ranked[sims[ranked] > 0.0]
        n = min(k, ranked.shape[0])
        got_ids = result.neighbours[row]
        got_sims = result.similarities[row].astype(np.float64)
        valid = got_ids >= 0
        assert np.count_nonzero(valid) == n, f"query {q}: neighbour count"
        assert np.all(valid[:n]), f"query {q}: -1 before a neighbour"
        assert np.all(got_sims[n:] == 0.0), f"query {q}: similarity of -1 must be 0"
        got_ids = got_ids[:n]
        got_sims = got_sims[:n]
        expected = sims[ranked[:n]]
        np.testing.assert_allclose(got_sims, expected, rtol=0, atol=tol, err_msg=f"query {q}")
        np.testing.assert_allclose(
            got_sims, sims[got_ids], rtol=0, atol=tol, err_msg=f"query {q}: per-id similarity"
        )
        assert len(set(got_ids.tolist())) == n, f"query {q}: repeated neighbour"
        if n == 0:
            continue
        if n < k:
            # Room for every admissible document: the id sets must be equal outright.
            assert set(got_ids.tolist()) == set(ranked.tolist()), f"query {q}: id set"
            continue
        kth = expected[-1]
        must = set(ranked[sims[ranked] > kth + tol].tolist())
        assert must <= set(got_ids.tolist()), f"query {q}: missing a neighbour above the k-th"
        assert np.all(sims[got_ids] >= kth - tol), f"query {q}: neighbour below the k-th"


def _assert_near_duplicates_match_oracle(
    result: search_result.SearchResult,
    queries: np.ndarray,
    must: list[set[int]],
    may: list[set[int]],
) -> None:
    for row, q in enumerate(queries):
        got = set(_near_duplicates(result, row).tolist())
        assert must[row] <= got, f"query {q}: missing near-duplicates {must[row] - got}"
        assert got <= may[row], f"query {q}: spurious near-duplicates {got - may[row]}"


def _demo_texts() -> list[str]:
    import polars as pl

    records = pl.read_parquet(_DEMO_RECORDS, columns=["text", "chapter"])
    # 800 consecutive real ICD-10-CM titles and inclusion terms (musculoskeletal chapter):
    # variants by site and laterality, so there are close neighbours and near-duplicates.
    return records.filter(pl.col("chapter") == "13").get_column("text").head(800).to_list()


@pytest.mark.parametrize("corpus", ["synthetic", "demo"])
@pytest.mark.parametrize("threshold", [None, 0.93, 1.0])
def test_search_matches_sklearn_oracle(
    corpus: str, threshold: float | None, queries: np.ndarray
) -> None:
    if corpus == "synthetic":
        # The module's corpus: template texts full of ties, exact duplicates, empty rows.
        _, matrix = vz.fit_transform(synthetic_texts(3000, seed=1), n_features=2**20)
        query_ids = queries
    else:
        _, matrix = vz.fit_transform(_demo_texts())
        query_ids = np.arange(matrix.shape[0])
    index = inverted_index.build_text_index(matrix)
    k = 15
    result = rt.search(index, query_ids, k=k, near_duplicate_threshold=threshold)
    oracle_sims = _oracle_similarities(matrix, query_ids)
    if threshold is not None:
        must, may = _oracle_near_duplicates(matrix, query_ids, threshold)
        _assert_near_duplicates_match_oracle(result, query_ids, must, may)
        if threshold < 1.0:
            assert sum(len(m) for m in must) > 0, "the corpus should hold near-duplicates"
    else:
        assert result.near_duplicate_indices.size == 0
    _assert_matches_oracle(result, query_ids, oracle_sims, near_duplicates=threshold is not None)


def test_sklearn_oracle_check_catches_wrong_results(queries: np.ndarray) -> None:
    """The oracle comparison is not vacuous: corrupted results fail it."""
    _, matrix = vz.fit_transform(synthetic_texts(3000, seed=1), n_features=2**20)
    index = inverted_index.build_text_index(matrix)
    result = rt.search(index, queries, k=15, near_duplicate_threshold=0.93)
    oracle_sims = _oracle_similarities(matrix, queries)
    must, may = _oracle_near_duplicates(matrix, queries, 0.93)
    _assert_matches_oracle(result, queries, oracle_sims, near_duplicates=True)

    def corrupted(**changes: np.ndarray) -> search_result.SearchResult:
        fields = {
            "neighbours": result.neighbours.copy(),
            "similarities": result.similarities.copy(),
            "near_duplicate_indptr": result.near_duplicate_indptr,
            "near_duplicate_indices": result.near_duplicate_indices,
        }
        fields.update(changes)
        return search_result.SearchResult(**fields)

    # A row whose best neighbour is strictly better than its k-th.
    sims = result.similarities
    row = int(
        np.flatnonzero((result.neighbours[:, -1] >= 0) & (sims[:, 0] > sims[:, -1] + 0.01))[0]
    )
    # Wrong ranking: best and worst neighbour swapped, ids and scores together.
    neighbours = result.neighbours.copy()
    similarities = result.similarities.copy()
    neighbours[row, [0, -1]] = neighbours[row, [-1, 0]]
    similarities[row, [0, -1]] = similarities[row, [-1, 0]]
    with pytest.raises(AssertionError):
        _assert_matches_oracle(
            corrupted(neighbours=neighbours, similarities=similarities),
            queries,
            oracle_sims,
            near_duplicates=True,
        )
    # Ids shifted up one rank against their scores (the last id repeated).
    neighbours = result.neighbours.copy()
    neighbours[row, :-1] = neighbours[row, 1:]
    with pytest.raises(AssertionError):
        _assert_matches_oracle(
            corrupted(neighbours=neighbours), queries, oracle_sims, near_duplicates=True
        )
    # A near-duplicate missing from its query's set.
    with_dups = int(np.flatnonzero(np.diff(result.near_duplicate_indptr) > 0)[0])
    keep = np.ones(result.near_duplicate_indices.shape[0], dtype=bool)
    keep[result.near_duplicate_indptr[with_dups]] = False
    indptr = result.near_duplicate_indptr.copy()
    indptr[with_dups + 1 :] -= 1
    with pytest.raises(AssertionError):
        _assert_near_duplicates_match_oracle(
            corrupted(
                near_duplicate_indptr=indptr,
                near_duplicate_indices=result.near_duplicate_indices[keep],
            ),
            queries,
            must,
            may,
        )
