"""Selecting rows of a CSR list of lists (``indptr``, ``indices``) without a Python loop.

The searches keep each query's leave-out list this way; running a search again on some of its
queries (a chunk, an overflow rerun, a fallback, a recall probe) needs the same lists for just
those queries.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def subset_csr_rows(
    indptr: npt.ArrayLike, indices: npt.ArrayLike, rows: npt.ArrayLike
) -> tuple[npt.NDArray[np.int64], np.ndarray]:
    """The lists of ``rows`` only, in the order given, as a new CSR pair.

    Parameters
    ----------
    indptr
        ``(n_rows + 1,)`` pointers: row ``r`` is ``indices[indptr[r]:indptr[r + 1]]``.
    indices
        The concatenated lists; entries beyond ``indptr[-1]`` are ignored.
    rows
        Row numbers to keep, 1-d integers in ``[0, n_rows)``; repeats and any order allowed.

    Returns
    -------
    tuple
        int64 pointers of shape ``(len(rows) + 1,)`` and the selected entries, with the
        dtype of ``indices`` and each row's entries in their original order.
    """
    pointers = np.asarray(indptr, dtype=np.int64)
    entries = np.asarray(indices)
    picked = np.asarray(rows, dtype=np.int64)
    starts = pointers[picked]
    lengths = pointers[picked + 1] - starts
    new_indptr = np.zeros(picked.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_indptr[1:])
    # Position p of the output lies in some kept row at offset p - new_indptr[row]; shifting
    # every position by its row's (start - new start) maps it to its source entry.
    take = np.repeat(starts - new_indptr[:-1], lengths) + np.arange(new_indptr[-1])
    return new_indptr, entries[take]
