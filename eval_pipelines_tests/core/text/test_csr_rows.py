"""Selecting rows of a CSR list of lists matches slicing row by row.

The helper lives in :mod:`eval_pipelines.core.csr_rows`; the sparse search subsets its
leave-out lists with it, as do the dense searches.
"""

from __future__ import annotations

import numpy as np
import pytest

from eval_pipelines.core.csr_rows import subset_csr_rows


def _by_row(indptr: np.ndarray, indices: np.ndarray, rows: np.ndarray) -> list[list[int]]:
    return [indices[indptr[r] : indptr[r + 1]].tolist() for r in rows]


@pytest.mark.parametrize(
    "rows",
    [[0, 1, 2, 3, 4], [3, 1], [4, 4, 0], [1], [2], []],
    ids=["all", "reordered", "repeated", "empty-row", "one", "none"],
)
def test_subset_matches_slicing_each_row(rows: list[int]) -> None:
    indptr = np.array([0, 3, 3, 4, 8, 9], dtype=np.int64)
    # One trailing entry beyond indptr[-1], which no row owns.
    indices = np.array([5, 1, 9, 2, 7, 7, 0, 3, 4, 99], dtype=np.int32)
    picked = np.array(rows, dtype=np.int64)
    new_indptr, new_indices = subset_csr_rows(indptr, indices, picked)
    assert new_indptr.dtype == np.int64 and new_indptr.shape == (len(rows) + 1,)
    assert new_indices.dtype == np.int32
    assert _by_row(new_indptr, new_indices, np.arange(len(rows))) == _by_row(
        indptr, indices, picked
    )
    assert new_indptr[-1] == new_indices.shape[0]


def test_subset_of_random_lists() -> None:
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 6, size=200)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = rng.integers(0, 1000, size=indptr[-1])
    rows = rng.choice(200, size=80, replace=True)
    new_indptr, new_indices = subset_csr_rows(indptr, indices, rows)
    assert _by_row(new_indptr, new_indices, np.arange(80)) == _by_row(indptr, indices, rows)
