"""LSA embeddings: a truncated SVD of the TF-IDF matrix, one unit vector per record.

The built-in embedding needs no model: the case's own hashed TF-IDF matrix (see
:mod:`eval_pipelines.core.text.vectorize`) is projected on its ``dim`` leading singular
directions, which merges co-occurring features (synonyms, spelling variants) into shared
dimensions, and every row is L2-normalised so that dot products are cosines.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from eval_pipelines.core.errors import InputError

__all__ = ["lsa_vectors"]

# A projected row shorter than this (rows come in with unit norm, or zero) carries no usable
# direction: it is a record without features, or one orthogonal to every kept component.
_EMPTY_NORM = 1e-6


def lsa_vectors(
    tfidf_matrix: sp.spmatrix | sp.sparray | npt.ArrayLike,
    *,
    dim: int = 256,
    seed: int = 0,
    n_threads: int = 2,
) -> npt.NDArray[np.float32]:
    """Project TF-IDF rows on their ``dim`` leading singular directions and normalise.

    Parameters
    ----------
    tfidf_matrix
        ``(n_records, n_features)`` non-negative matrix with L2-normalised rows, sparse or
        dense, e.g. from :func:`eval_pipelines.core.text.vectorize.fit_transform`.
    dim
        Output dimensions, at least 2 and at most the number of records and of features in
        use.
    seed
        Seed of the randomized SVD: the same matrix and seed give the same vectors.
    n_threads
        BLAS threads for the dense products.

    Returns
    -------
    numpy.ndarray
        ``(n_records, dim)`` float32, C-contiguous, rows of unit L2 norm. A record whose
        projection is empty (no features, or none in the kept directions; norm below 1e-6)
        gets the unit vector of the last, weakest component, ``e[dim - 1]``: such records are
        exact duplicates of one another (cosine 1) and nearly orthogonal to the rest, instead
        of zero vectors, which have no direction and which
        :func:`~eval_pipelines.core.embeddings.vectors.check_embeddings` refuses.

    Notes
    -----
    scikit-learn's ``TruncatedSVD(algorithm="randomized", random_state=seed)`` (Halko,
    Martinsson and Tropp's randomized range finder with its default 5 power iterations) on
    the matrix restricted to the feature columns that occur at least once. Hashing to
    2**20 buckets leaves most columns empty (111,679 of 1,048,576 on the 130,525 demo
    records); empty columns change no singular value or projection, but the randomized
    method's dense ``(n_features, dim + 10)`` intermediates would scale with them (the
    figure: docs/benchmarks.md, "Figures behind code choices").

    References
    ----------
    .. [1] S. Deerwester, S. Dumais, G. Furnas, T. Landauer and R. Harshman, "Indexing by
       latent semantic analysis", J. Am. Soc. Inf. Sci. 41(6), 1990.
    .. [2] N. Halko, P. G. Martinsson and J. A. Tropp, "Finding structure with randomness:
       probabilistic algorithms for constructing approximate matrix decompositions",
       SIAM Review 53(2), 2011.
    """
    from sklearn.decomposition import TruncatedSVD

    matrix = sp.csr_matrix(tfidf_matrix, dtype=np.float32)
    n_records = matrix.shape[0]
    used = np.flatnonzero(np.bincount(matrix.indices, minlength=matrix.shape[1]))
    limit = min(n_records, used.shape[0])
    if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or not 2 <= dim <= limit:
        raise InputError(
            "dim",
            dim,
            f"must be an integer in 2..{limit} (the matrix has {n_records} rows and "
            f"{used.shape[0]} features in use)",
        )
    if isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1:
        raise InputError("n_threads", n_threads, "must be an integer of at least 1")
    compact = matrix[:, used]
    svd = TruncatedSVD(n_components=int(dim), algorithm="randomized", random_state=seed)
    with threadpool_limits(limits=n_threads, user_api="blas"):
        projected = svd.fit_transform(compact)
    vectors = np.ascontiguousarray(projected, dtype=np.float32)
    # Projections of unit rows have norms in [0, 1]: float32 squares neither overflow nor
    # lose the 1e-6 cut-off.
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
    empty = norms < _EMPTY_NORM
    vectors[~empty] /= norms[~empty, None]
    vectors[empty] = 0.0
    vectors[empty, dim - 1] = 1.0
    return vectors
