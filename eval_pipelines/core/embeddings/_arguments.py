"""The vector check shared by the exact and the approximate dense search (their other
arguments are checked by :mod:`eval_pipelines.core.search_request`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from eval_pipelines.core.errors import InputError

# How far a row norm may stray from 1 before the vectors count as not normalised: float32
# normalisation leaves errors near 1e-7, so this only catches vectors nobody normalised.
_UNIT_NORM_TOLERANCE = 1e-3
# Rows whose norms are checked per step, to bound the float32 temporaries on 1M-row inputs.
_NORM_CHECK_ROWS = 65_536


def unit_vectors(vectors: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """The vectors as a C-contiguous float32 matrix, refused unless rows have unit length.

    Parameters
    ----------
    vectors
        ``(n_docs, dim)`` real matrix with L2-normalised rows.

    Returns
    -------
    numpy.ndarray
        The same values, float32 and C-contiguous (a copy only when needed).
    """
    array = np.asarray(vectors)
    if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 1:
        raise InputError("vectors.shape", array.shape, "must be a non-empty 2-d matrix")
    if not np.issubdtype(array.dtype, np.floating):
        raise InputError("vectors.dtype", str(array.dtype), "must be a floating-point type")
    array = np.ascontiguousarray(array, dtype=np.float32)
    for lo in range(0, array.shape[0], _NORM_CHECK_ROWS):
        block = array[lo : lo + _NORM_CHECK_ROWS]
        norms = np.sqrt(np.einsum("ij,ij->i", block, block))
        bad = np.flatnonzero(~(np.abs(norms - 1.0) <= _UNIT_NORM_TOLERANCE))
        if bad.size:
            row = lo + int(bad[0])
            raise InputError(
                f"vectors[{row}]",
                f"norm {float(norms[bad[0]]):.6g}",
                "rows must be finite and L2-normalised (see check_embeddings)",
            )
    return array
