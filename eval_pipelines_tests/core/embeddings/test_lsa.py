"""LSA vectors: unit rows, deterministic, the subspace of the exact truncated SVD, and a
documented vector for records without features."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from eval_pipelines.core.embeddings.lsa import lsa_vectors
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.text.vectorize import fit_transform

# Six topics of two words each: the TF-IDF matrix has six strong directions and a clear
# spectral gap after them (s6 / s7 = 1.8), so its 6-d LSA subspace is well defined.
TOPICS = [
    ["fracture", "femur"],
    ["burn", "wrist"],
    ["diabetes", "type"],
    ["pain", "knee"],
    ["stage", "kidney"],
    ["asthma", "mild"],
]


def _texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    topics = [TOPICS[i % len(TOPICS)] for i in range(n)]
    return [" ".join(rng.choice(words, size=int(rng.integers(2, 5)))) for words in topics]


@pytest.fixture(scope="module")
def tfidf() -> sp.csr_matrix:
    texts = _texts(300, seed=0)
    texts[7] = ""  # no features at all
    return fit_transform(texts)[1]


def test_rows_are_unit_and_float32(tfidf: sp.csr_matrix) -> None:
    vectors = lsa_vectors(tfidf, dim=8, seed=0)
    assert vectors.shape == (300, 8) and vectors.dtype == np.float32
    assert vectors.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)


def test_same_seed_same_vectors(tfidf: sp.csr_matrix) -> None:
    np.testing.assert_array_equal(
        lsa_vectors(tfidf, dim=8, seed=3), lsa_vectors(tfidf, dim=8, seed=3)
    )


def test_a_record_without_features_gets_the_last_axis(tfidf: sp.csr_matrix) -> None:
    vectors = lsa_vectors(tfidf, dim=8, seed=0)
    expected = np.zeros(8, dtype=np.float32)
    expected[-1] = 1.0
    np.testing.assert_array_equal(vectors[7], expected)


def test_cosines_match_the_exact_truncated_svd(tfidf: sp.csr_matrix) -> None:
    # Oracle: LAPACK's SVD (numpy.linalg.svd) of the dense matrix, cut to 6 components.
    # Cosines are invariant to the sign and rotation freedom of singular vectors; with the
    # spectral gap after the 6th value (asserted), the randomized method's 5 power iterations
    # leave errors far below the 1e-4 tolerance.
    dim = len(TOPICS)
    used = np.unique(tfidf.indices)
    u, s, _ = np.linalg.svd(tfidf[:, used].toarray().astype(np.float64), full_matrices=False)
    assert s[dim - 1] / s[dim] > 1.5
    exact = u[:, :dim] * s[:dim]
    norms = np.linalg.norm(exact, axis=1, keepdims=True)
    keep = norms[:, 0] > 1e-6
    assert (~keep).sum() == 1  # the empty text
    exact = exact[keep] / norms[keep]
    ours = lsa_vectors(tfidf, dim=dim, seed=0)[keep].astype(np.float64)
    np.testing.assert_allclose(ours @ ours.T, exact @ exact.T, atol=1e-4)


def test_dim_is_checked(tfidf: sp.csr_matrix) -> None:
    used = np.unique(tfidf.indices).size
    with pytest.raises(InputError, match=r"dim=1: must be an integer in 2\.\."):
        lsa_vectors(tfidf, dim=1)
    with pytest.raises(InputError, match=f"{used} features in use"):
        lsa_vectors(tfidf, dim=used + 1)
    with pytest.raises(InputError, match="n_threads"):
        lsa_vectors(tfidf, dim=4, n_threads=0)
