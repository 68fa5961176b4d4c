"""The inverted index the exact sparse search reads: documents (L2-normalised TF-IDF rows)
and their posting lists, one index or consecutive segments of one.

Built by :func:`build_text_index`; stored and memory-mapped by
:mod:`eval_pipelines.core.text.index_files`; searched by
:func:`eval_pipelines.core.text.retrieval.search`.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass, field
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp


@dataclass(frozen=True)
class TextIndex:
    """Documents and their inverted index.

    Attributes
    ----------
    docs
        ``(n_docs, n_features)`` float32 CSR, L2-normalised rows, sorted int32 indices.
    postings
        ``(n_features, n_docs)`` float32 CSR: the transpose of ``docs``, so row ``f`` is the
        posting list of feature ``f`` as (document, weight) pairs by ascending document.
    n_docs
        Number of documents.
    feature_max
        float32, ``(n_features,)``: the largest weight in each posting list (0 for an empty
        one, ``inf`` for one holding a negative weight), the pruning bounds of
        :func:`search`. Computed from ``postings`` when not given.
    nonnegative
        Whether every weight is >= 0 (no ``inf`` in ``feature_max``), which pruning needs;
        derived.
    """

    docs: sp.csr_matrix
    postings: sp.csr_matrix
    n_docs: int
    feature_max: np.ndarray | None = None
    nonnegative: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.feature_max is None:
            object.__setattr__(self, "feature_max", _feature_max(self.postings))
        object.__setattr__(self, "nonnegative", not np.isinf(feature_bounds(self)).any())

    @property
    def nnz(self) -> int:
        """Stored weights (nonzeros of ``docs``)."""
        return int(self.docs.nnz)

    @property
    def n_features(self) -> int:
        return int(self.docs.shape[1])

    def rows(self, ids: npt.NDArray[np.int64]) -> sp.csr_matrix:
        """The rows of documents ``ids``, in that order."""
        return self.docs[ids]

    def release_pages(self) -> None:
        """Unmap the pages of a memory-mapped index from this process (a no-op for arrays in
        memory). They stay in the page cache, so reading them again costs a minor fault,
        not a disk read; the process's resident memory, which counts every mapped page it
        has touched, falls back. A segmented search calls this after each segment, so that
        it holds one segment's pages at a time instead of the whole index's."""
        for matrix in (self.docs, self.postings):
            for array in (matrix.data, matrix.indices, matrix.indptr):
                _drop_mapped_pages(array)


def _drop_mapped_pages(array: np.ndarray) -> None:
    """``madvise(MADV_DONTNEED)`` on the file mapping behind ``array``, if there is one."""
    base: object = array
    while base is not None:
        handle = getattr(base, "_mmap", None)
        if isinstance(handle, mmap.mmap):
            handle.madvise(mmap.MADV_DONTNEED)
            return
        base = getattr(base, "base", None)


@dataclass(frozen=True)
class SegmentedIndex:
    """Documents indexed as consecutive ranges (segments), each a :class:`TextIndex` of its
    own with local ids from 0.

    An index too large to build or hold at once is built, stored and searched a segment at a
    time: document ``d`` of the whole is document ``d - starts[s]`` of the segment ``s`` that
    holds it. The segments must be weighted alike (one IDF fitted on every document), so that
    scores compare across segments and :func:`search` equals a search of one index over all
    the rows.

    Attributes
    ----------
    segments
        The parts in document order, at least one, all with the same number of features.
    starts
        int64, ``(len(segments) + 1,)``: the first global id of each segment, then ``n_docs``.
    n_docs
        Documents in all segments.
    """

    segments: tuple[TextIndex, ...]
    starts: npt.NDArray[np.int64] = field(init=False, repr=False, compare=False)
    n_docs: int = field(init=False)

    def __post_init__(self) -> None:
        if not self.segments:
            raise ValueError("segments: need at least one")
        widths = sorted({segment.n_features for segment in self.segments})
        if len(widths) > 1:
            raise ValueError(f"segments: feature counts {widths} differ; they must be equal")
        starts = np.zeros(len(self.segments) + 1, dtype=np.int64)
        np.cumsum([segment.n_docs for segment in self.segments], out=starts[1:])
        object.__setattr__(self, "starts", starts)
        object.__setattr__(self, "n_docs", int(starts[-1]))

    @property
    def nnz(self) -> int:
        """Stored weights of all segments."""
        return sum(segment.nnz for segment in self.segments)

    @property
    def n_features(self) -> int:
        return self.segments[0].n_features

    def rows(self, ids: npt.NDArray[np.int64]) -> sp.csr_matrix:
        """The rows of documents ``ids`` (global ids), in that order."""
        ids = np.asarray(ids, dtype=np.int64)
        owner = np.searchsorted(self.starts, ids, side="right") - 1
        parts = [sp.csr_matrix((0, self.n_features), dtype=np.float32)]
        positions = [np.zeros(0, dtype=np.int64)]
        for segment in np.unique(owner):
            chosen = np.flatnonzero(owner == segment)
            local = ids[chosen] - self.starts[segment]
            parts.append(sp.csr_matrix(self.segments[segment].docs[local]))
            positions.append(chosen)
        stacked = sp.vstack(parts, format="csr", dtype=np.float32)
        return stacked[np.argsort(np.concatenate(positions), kind="stable")]

    def matrix(self) -> sp.csr_matrix:
        """Every document's row as one matrix (materialised: as large as the index's rows)."""
        return sp.vstack([segment.docs for segment in self.segments], format="csr")


SearchIndex: TypeAlias = TextIndex | SegmentedIndex


def _canonical_csr(matrix: sp.spmatrix | sp.sparray) -> sp.csr_matrix:
    """float32 CSR with int32 indices (when nnz allows), sorted and without duplicates."""
    csr = sp.csr_matrix(matrix, dtype=np.float32)
    if not csr.has_canonical_format:
        csr = csr.copy()
        csr.sum_duplicates()
    if csr.nnz < 2**31 and max(csr.shape) < 2**31:
        csr.indices = csr.indices.astype(np.int32, copy=False)
        csr.indptr = csr.indptr.astype(np.int32, copy=False)
    return csr


def _feature_max(postings: sp.csr_matrix) -> np.ndarray:
    """Largest weight per posting list; ``inf`` where a list holds a negative weight.

    A negative weight (never produced by TF-IDF) would let a partial score fall as more
    features are added, which the pruning bounds assume cannot happen, so :func:`search`
    falls back to the plain scan for such an index.
    """
    n_features = postings.shape[0]
    bound = np.zeros(n_features, dtype=np.float32)
    lengths = np.diff(postings.indptr)
    filled = np.flatnonzero(lengths > 0)
    if filled.size:
        starts = postings.indptr[:-1][filled]
        bound[filled] = np.maximum.reduceat(postings.data, starts)
        negative = np.minimum.reduceat(postings.data, starts) < 0
        bound[filled[negative]] = np.inf
    return bound


def build_text_index(matrix: sp.spmatrix | sp.sparray) -> TextIndex:
    """Index the rows of a TF-IDF matrix for :func:`search`.

    Parameters
    ----------
    matrix
        ``(n_docs, n_features)`` sparse matrix with L2-normalised (or all-zero) rows and
        non-negative weights, e.g. from :func:`eval_pipelines.core.text.vectorize.fit_transform`.

    Returns
    -------
    TextIndex
        The documents, their posting lists and each list's largest weight.
    """
    docs = _canonical_csr(matrix)
    # csr.T is a CSC view of the same arrays; converting it to CSR builds the posting lists,
    # and scipy's conversion emits each posting list sorted by document.
    postings = _canonical_csr(docs.T.tocsr())
    return TextIndex(docs=docs, postings=postings, n_docs=docs.shape[0])


def feature_bounds(index: TextIndex) -> np.ndarray:
    """The index's per-feature bounds (always set after construction)."""
    assert index.feature_max is not None
    return index.feature_max
