"""Hashed TF-IDF: the numba path against the plain-Python oracle and against scikit-learn."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp

from eval_pipelines.core.text import vectorize as vz

_WORDS = [
    "a",
    "i",
    "x",
    "of",
    "to",
    "left",
    "right",
    "bilateral",
    "unspecified",
    "fracture",
    "Ménière's",
    "naïve",
    "Sjögren",
    "café",
    "İstanbul",
    "straße",
    "ÆON",
    "日本語",
    "😀",
    "C50.911",
    "T2DM",
    "x-ray",
    "self-harm",
    "7thQ",
    "l/r",
    "(acute)",
    "--",
    "...",
    "'",
    "42",
    "3rd",
    "ELTOR",
    "\t",
    "\n",
]

_SEPARATORS = [" ", " ", " ", "  ", ", ", "-", "/", "", "\u00a0", ".", "\t"]


def _varied_texts(n: int, seed: int) -> list[str]:
    """Texts mixing ASCII and non-ASCII words, digits, punctuation and odd separators."""
    rng = np.random.default_rng(seed)
    texts = ["", " ", "a", "ab", "abc", "!!", "a b c", "Ménière's disease", "é", "1 2 3"]
    while len(texts) < n:
        n_words = int(rng.integers(0, 14))
        parts: list[str] = []
        for _ in range(n_words):
            parts.append(_WORDS[int(rng.integers(len(_WORDS)))])
            parts.append(_SEPARATORS[int(rng.integers(len(_SEPARATORS)))])
        texts.append("".join(parts))
    return texts


def _numba_counts(texts: list[str], n_features: int) -> list[dict[int, int]]:
    """Per-text feature counts recovered from the fast path's sublinear TF values."""
    indptr, indices, tf = vz._term_frequencies(texts, n_features)
    counts = np.rint(np.exp(tf.astype(np.float64) - 1.0)).astype(np.int64)
    return [
        dict(zip(indices[lo:hi].tolist(), counts[lo:hi].tolist(), strict=True))
        for lo, hi in zip(indptr[:-1], indptr[1:], strict=True)
    ]


def test_fnv1a_known_vectors() -> None:
    # Published FNV-1a 32-bit test vectors.
    assert vz._fnv1a(b"") == 0x811C9DC5
    assert vz._fnv1a(b"a") == 0xE40C292C
    assert vz._fnv1a(b"foobar") == 0xBF9CF968


def test_tokens_are_runs_of_ascii_alnum_or_high_bytes() -> None:
    data = "Ménière's x-ray, 7thQ!".lower().encode()
    assert vz._tokens_reference(data) == [
        "ménière".encode(),
        b"s",
        b"x",
        b"ray",
        b"7thq",
    ]


@pytest.mark.parametrize("n_features", [2**20, 2**8])
def test_numba_counts_match_reference(n_features: int) -> None:
    texts = _varied_texts(400, seed=7)
    got = _numba_counts(texts, n_features)
    for text, counts in zip(texts, got, strict=True):
        assert counts == vz._features_reference(text, n_features), repr(text)


def test_reference_matches_sklearn_on_ascii() -> None:
    """On ASCII letters, digits and spaces, the features are sklearn's word 1-2 grams plus
    its char_wb 3-5 grams, each family under its own hash prefix."""
    sklearn_text = pytest.importorskip("sklearn.feature_extraction.text")
    words = sklearn_text.CountVectorizer(
        token_pattern=r"[a-z0-9]+", ngram_range=(1, 2)
    ).build_analyzer()
    chars = sklearn_text.CountVectorizer(analyzer="char_wb", ngram_range=(3, 5)).build_analyzer()
    rng = np.random.default_rng(3)
    vocab = ["a", "b", "of", "ab", "abc", "left", "knee", "c50", "2", "unspecified", "ear"]
    texts = ["", "a", "ab", "A B", "abc def"]
    texts += [
        " ".join(vocab[int(i)] for i in rng.integers(len(vocab), size=int(rng.integers(1, 8))))
        for _ in range(200)
    ]
    mask = 2**20 - 1
    for text in texts:
        expected: Counter[int] = Counter()
        for gram in words(text):
            prefix = vz._PREFIX_BIGRAM if " " in gram else vz._PREFIX_UNIGRAM
            expected[vz._fnv1a(bytes([prefix]) + gram.encode()) & mask] += 1
        for gram in chars(text):
            expected[vz._fnv1a(bytes([vz._PREFIX_CHAR]) + gram.encode()) & mask] += 1
        assert vz._features_reference(text) == dict(expected), repr(text)


def test_families_do_not_share_a_hash_input() -> None:
    # "abc" is a unigram and, padded, yields the char trigram "abc" too; their hashes differ.
    counts = vz._features_reference("abc")
    assert sum(counts.values()) == 1 + 3 + 2 + 1
    assert len(counts) == 7


def _check_csr(matrix: sp.csr_matrix, n_rows: int, n_features: int) -> None:
    assert isinstance(matrix, sp.csr_matrix)
    assert matrix.shape == (n_rows, n_features)
    assert matrix.dtype == np.float32
    assert matrix.indices.dtype == np.int32
    for lo, hi in zip(matrix.indptr[:-1], matrix.indptr[1:], strict=True):
        row = matrix.indices[lo:hi]
        assert np.all(np.diff(row) > 0)
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    empty = np.diff(matrix.indptr) == 0
    np.testing.assert_allclose(norms[~empty], 1.0, rtol=1e-5)


@pytest.mark.exhaustive
def test_tfidf_weights_follow_the_formula() -> None:
    texts = _varied_texts(300, seed=11)
    n_features = 2**16
    model, matrix = vz.fit_transform(texts, n_features=n_features, batch_size=64)
    _check_csr(matrix, len(texts), n_features)
    counts = [vz._features_reference(text, n_features) for text in texts]
    df = np.zeros(n_features)
    for row in counts:
        df[list(row)] += 1
    idf = np.log((1 + len(texts)) / (1 + df)) + 1
    np.testing.assert_allclose(model.idf, idf, rtol=1e-6)
    assert model.idf.dtype == np.float32
    assert model.n_features == n_features
    for i, row in enumerate(counts):
        expected = np.zeros(n_features)
        for feature, count in row.items():
            expected[feature] = (1 + np.log(count)) * idf[feature]
        norm = np.linalg.norm(expected)
        if norm:
            expected /= norm
        np.testing.assert_allclose(matrix[i].toarray().ravel(), expected, atol=1e-6)


def test_empty_texts_give_zero_rows() -> None:
    model, matrix = vz.fit_transform(["", "?!", "knee pain", ""], n_features=2**10)
    assert np.diff(matrix.indptr).tolist()[0:2] == [0, 0]
    assert matrix[3].nnz == 0
    assert matrix[2].nnz > 0
    empty_model, empty = vz.fit_transform([], n_features=2**10)
    assert empty.shape == (0, 2**10)
    assert vz.transform(model, []).shape == (0, 2**10)


def test_batches_and_transform_agree_with_one_pass() -> None:
    texts = _varied_texts(500, seed=5)
    model, whole = vz.fit_transform(texts, n_features=2**18)
    _, batched = vz.fit_transform(texts, n_features=2**18, batch_size=37)
    assert (whole != batched).nnz == 0
    again = vz.transform(model, texts, batch_size=101)
    np.testing.assert_array_equal(again.indptr, whole.indptr)
    np.testing.assert_array_equal(again.indices, whole.indices)
    np.testing.assert_array_equal(again.data, whole.data)


def test_transform_uses_fitted_idf() -> None:
    model, _ = vz.fit_transform(["left knee", "right knee", "left ear"], n_features=2**12)
    new = vz.transform(model, ["knee knee", "unseen words"])
    _check_csr(new, 2, 2**12)
    counts = vz._features_reference("knee knee", 2**12)
    features = sorted(counts)
    np.testing.assert_array_equal(new[0].indices, features)
    weights = np.array([(1 + np.log(counts[f])) * model.idf[f] for f in features])
    np.testing.assert_allclose(new[0].data, weights / np.linalg.norm(weights), rtol=1e-6)


@pytest.mark.parametrize("n_features", [0, 3, 1000, 2**32])
def test_n_features_must_be_a_power_of_two(n_features: int) -> None:
    with pytest.raises(ValueError, match="n_features"):
        vz.fit_transform(["a"], n_features=n_features)
