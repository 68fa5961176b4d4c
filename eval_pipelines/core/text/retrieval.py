"""Exact cosine nearest neighbours among the rows of an L2-normalised sparse matrix.

Queries are rows of the corpus itself. For each query the search scores documents by dot
product (cosine, since rows are unit length), collects the query's near-duplicates, masks the
documents the caller leaves out, and keeps the top-k of the rest. Excluded documents are
masked inside the scan rather than over-fetched and filtered afterwards, so a query falls short
of k neighbours only when fewer than k admissible documents share a feature with it. A search
may be limited to a range of documents (a shard, see :mod:`eval_pipelines.core.text.shards`);
queries and leave-out lists still use global document ids.

The fast path (:func:`search`) is a numba inverted-index search; :func:`search_brute_force`
is the plain scipy/numpy reference it is tested against. Every reported score is the float32
sum of the products in the same order on both paths (query features ascending), so scores,
neighbour orders and near-duplicate sets agree bit for bit.

By default the fast path prunes (MaxScore): it reads posting lists in descending order of
their contribution bound per posting, stops taking in new documents once those it has not
seen can no longer reach the top-k or the near-duplicate cut, keeps reading only the lists
that help to rule out seen documents, and rescores the few that remain from their document
rows, in ascending feature order, so the scores are the exact ones. ``prune=False`` keeps
the plain scan of every posting list; both return the same results.

The index is stored as a directory of ``.npy`` files that :func:`load_text_index` memory-maps
read-only, so opening it costs milliseconds and processes share the pages.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import mmap
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import NamedTuple, TypeAlias

import numba
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.search_request import SearchRequest, check_request, subset_request
from eval_pipelines.core.text import numba_cache
from eval_pipelines.core.text.interrupts import Deferred, deferred_interrupts
from eval_pipelines.core.text.search_result import (
    SearchResult,
    concatenate_results,
    merge_shard_results,
    shift_ids,
)
from eval_pipelines.core.topk_heap import drain_heap, push_largest, sift_down, sift_up, worse

numba_cache.configure()

# Near-duplicates kept per query on the first pass; queries with more are rerun with room for
# all of them, so the cap costs time, never results.
_NEAR_DUPLICATE_CAP = 256
# Queries per kernel call: between calls an interrupt is honoured (well under a second of
# work on 130k records), and per-call overhead stays far below the search itself.
_QUERIES_PER_CALL = 512
# Queries scored at once by the brute-force reference, to bound its dense score block.
_BRUTE_FORCE_BLOCK = 256
# Pruning slack on scores in [0, 1]. A partial or full float32 sum of m products is off its
# real value by at most about m * 2**-24 (each product and addition rounds once, and the
# products sum to at most 1 by Cauchy-Schwarz), so 1e-4 covers queries of up to ~800
# features outright; longer queries add 4 * m * 2**-24 on top (see _ROUNDING_PER_FEATURE).
_PRUNE_MARGIN = 1e-4
_ROUNDING_PER_FEATURE = 4.0 * 2.0**-24
# Relative cost of rescoring one document-row entry (a lookup into the query's dense weight
# array, random access) against reading one posting (sequential). The pruned search weighs
# reading a further posting list against rescoring the candidates that list would eliminate.
_RESCORE_COST = 2.0
# Bins of the histogram of how far each candidate is from dropping out (see _live_pass).
_GAP_BINS = 64
# Lowest candidate level: any positive partial score (the smallest positive float32).
_POOL_LEVEL_MIN = 1e-45

_INDEX_FILES = (
    "docs_data",
    "docs_indices",
    "docs_indptr",
    "postings_data",
    "postings_indices",
    "postings_indptr",
    "feature_max",
    "shape",
)


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
        object.__setattr__(self, "nonnegative", not np.isinf(_bounds(self)).any())

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


@dataclass
class SearchStats:
    """Work counters that :func:`search` adds to when given one (for benchmarks).

    Attributes
    ----------
    queries
        Queries searched.
    postings_read
        Posting entries read, including a pruned query's fallback rescan.
    postings_total
        Posting entries of the queries' features within the searched range: what the
        unpruned scan reads.
    rescored_documents
        Documents the pruned search scored exactly from their rows (theta candidates and
        the final survivors; each at most once per query).
    rescored_entries
        Document-row entries read for those scores.
    """

    queries: int = 0
    postings_read: int = 0
    postings_total: int = 0
    rescored_documents: int = 0
    rescored_entries: int = 0


# --------------------------------------------------------------------------------------------
# Index construction and storage
# --------------------------------------------------------------------------------------------


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


def fsync_path(path: Path) -> None:
    """fsync a file or a directory (a directory's entries are durable only once it is)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically with Linux ``renameat2(RENAME_EXCHANGE)``.

    Returns False where that call is unavailable (other systems, old C libraries, file
    systems without support), so the caller can fall back to two renames.
    """
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def replace_directory(new: Path, path: Path) -> None:
    """Move the complete directory ``new`` to ``path``, replacing what was there.

    A plain rename is atomic but refuses a non-empty target, so an existing index is swapped
    out atomically where the system allows (then deleted), else set aside first; in that
    fallback a crash between the two renames leaves no index at ``path`` (the caller
    rebuilds) and the old one under a hidden name, never a half-written one.
    """
    try:
        os.rename(new, path)
        return
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
    if _exchange(new, path):
        # ``new`` now names the old index.
        shutil.rmtree(new, ignore_errors=True)
        return
    aside = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".old"))
    os.replace(path, aside)
    os.rename(new, path)
    shutil.rmtree(aside, ignore_errors=True)


def save_text_index(index: TextIndex, path: Path) -> None:
    """Write an index as a directory of ``.npy`` files, atomically.

    The files go to a temporary directory next to ``path``, are flushed to disk, and the
    directory then takes the place of ``path``, so a reader or a crash sees either the old
    index or the new one, never half of one. Readers holding the old index memory-mapped keep
    reading it: its files are unlinked, not overwritten.

    Parameters
    ----------
    index
        The index to store.
    path
        Destination directory (by convention named ``*.tfidf``).
    """
    path = Path(path)
    arrays = {
        "docs_data": index.docs.data,
        "docs_indices": index.docs.indices,
        "docs_indptr": index.docs.indptr,
        "postings_data": index.postings.data,
        "postings_indices": index.postings.indices,
        "postings_indptr": index.postings.indptr,
        "feature_max": _bounds(index),
        "shape": np.asarray(index.docs.shape, dtype=np.int64),
    }
    with staged_directory(path) as staging:
        for name, array in arrays.items():
            save_array(staging / f"{name}.npy", array)


@contextmanager
def staged_directory(path: Path) -> Iterator[Path]:
    """A temporary directory next to ``path`` to write into; when the block completes it is
    flushed and takes the place of ``path`` whole (:func:`replace_directory`), and when the
    block fails it is removed, leaving ``path`` as it was."""
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        yield staging
        fsync_path(staging)
        replace_directory(staging, path)
        fsync_path(path.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def save_array(path: Path, array: np.ndarray) -> None:
    """Write one ``.npy`` file and flush it to disk."""
    with open(path, "wb") as handle:
        np.save(handle, np.ascontiguousarray(array), allow_pickle=False)
        handle.flush()
        os.fsync(handle.fileno())


def load_text_index(path: Path) -> TextIndex:
    """Open an index written by :func:`save_text_index`, memory-mapped read-only.

    Nothing is read up front: pages load on first use and are shared with every other
    process that maps the same files.

    Parameters
    ----------
    path
        The index directory.

    Returns
    -------
    TextIndex
        The stored index; its arrays are read-only memory maps.

    Raises
    ------
    FileNotFoundError
        When ``path`` is not a complete index directory (e.g. a file of an older format).
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: not an index directory")
    arrays = {
        name: np.load(path / f"{name}.npy", mmap_mode="r", allow_pickle=False)
        for name in _INDEX_FILES
    }
    n_docs, n_features = (int(v) for v in arrays["shape"])
    docs = sp.csr_matrix(
        (arrays["docs_data"], arrays["docs_indices"], arrays["docs_indptr"]),
        shape=(n_docs, n_features),
        copy=False,
    )
    postings = sp.csr_matrix(
        (arrays["postings_data"], arrays["postings_indices"], arrays["postings_indptr"]),
        shape=(n_features, n_docs),
        copy=False,
    )
    docs.has_sorted_indices = True
    postings.has_sorted_indices = True
    return TextIndex(docs=docs, postings=postings, n_docs=n_docs, feature_max=arrays["feature_max"])


def _bounds(index: TextIndex) -> np.ndarray:
    """The index's per-feature bounds (always set after construction)."""
    assert index.feature_max is not None
    return index.feature_max


# --------------------------------------------------------------------------------------------
# Argument checks shared by both search paths
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Request(SearchRequest):
    """A checked request and the documents it searches: ``[lo, hi)``."""

    lo: int
    hi: int


def _request(
    n_docs: int,
    query_docs: npt.ArrayLike,
    k: int,
    near_duplicate_threshold: float | None,
    exclude_indptr: npt.ArrayLike | None,
    exclude_indices: npt.ArrayLike | None,
    doc_range: tuple[int, int] | None = None,
) -> _Request:
    checked = check_request(
        n_docs, query_docs, k, near_duplicate_threshold, exclude_indptr, exclude_indices
    )
    lo, hi = (0, n_docs) if doc_range is None else (int(doc_range[0]), int(doc_range[1]))
    if not 0 <= lo <= hi <= n_docs:
        raise InputError("doc_range", (lo, hi), f"must satisfy 0 <= lo <= hi <= {n_docs}")
    return _Request(**{f.name: getattr(checked, f.name) for f in fields(checked)}, lo=lo, hi=hi)


# --------------------------------------------------------------------------------------------
# Fast path: shared pieces
# --------------------------------------------------------------------------------------------


@numba.njit(cache=True)
def _lower_bound(ids: np.ndarray, start: int, stop: int, value: int) -> int:
    """First position in the sorted ``ids[start:stop]`` holding an id >= ``value``."""
    while start < stop:
        mid = (start + stop) // 2
        if ids[mid] < value:
            start = mid + 1
        else:
            stop = mid
    return start


@numba.njit(cache=True)
def _posting_span(
    post_indptr: np.ndarray, post_indices: np.ndarray, f: int, lo: int, hi: int, whole: bool
) -> tuple[int, int]:
    """The part of feature ``f``'s posting list whose documents lie in ``[lo, hi)``.

    Lists are sorted by document, so two binary searches find it; ``whole`` skips them when
    the range is every document.
    """
    start = int(post_indptr[f])
    stop = int(post_indptr[f + 1])
    if whole:
        return start, stop
    first = _lower_bound(post_indices, start, stop, lo)
    return first, _lower_bound(post_indices, first, stop, hi)


# --------------------------------------------------------------------------------------------
# Fast path: the plain scan (prune=False)
# --------------------------------------------------------------------------------------------


@numba.njit(cache=True, parallel=True)
def _search_kernel(
    docs_indptr: np.ndarray,
    docs_indices: np.ndarray,
    docs_data: np.ndarray,
    post_indptr: np.ndarray,
    post_indices: np.ndarray,
    post_data: np.ndarray,
    lo: int,
    hi: int,
    whole: bool,
    q_indptr: np.ndarray,
    q_indices: np.ndarray,
    q_data: np.ndarray,
    q_self: np.ndarray,
    k: int,
    use_threshold: bool,
    cut: np.float32,
    excl_indptr: np.ndarray,
    excl_indices: np.ndarray,
    nd_cap: int,
    n_chunks: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Inverted-index scan of documents ``[lo, hi)``: every posting of every query feature.

    Query ``i`` is row ``i`` of the CSR ``(q_indptr, q_indices, q_data)``; ``q_self[i]`` is
    its id among this index's documents (outside ``[lo, hi)`` when it is not one of them), so
    that it is never its own neighbour. Returns neighbours, similarities, near-duplicate
    counts and ids, and postings read per query. ``nd_buf[i]`` holds the first ``nd_cap``
    near-duplicates of query ``i``; ``nd_counts[i]`` is the true count, so the caller can tell
    when the buffer overflowed.
    """
    n_queries = q_self.shape[0]
    n_range = hi - lo
    # Posting ids are uint32 (see _unsigned): subtracting an unsigned offset keeps the local
    # id unsigned, so numba needs no negative-index check in the innermost loop.
    lo_u = np.uint64(lo)
    neighbours = np.full((n_queries, k), -1, dtype=np.int32)
    similarities = np.zeros((n_queries, k), dtype=np.float32)
    nd_counts = np.zeros(n_queries, dtype=np.int64)
    nd_buf = np.empty((n_queries, max(nd_cap, 1)), dtype=np.int32)
    reads = np.zeros(n_queries, dtype=np.int64)
    # One chunk per thread; chunk c takes queries c, c + n_chunks, ... so that the cost of
    # expensive queries spreads evenly under prange's static schedule.
    for chunk in numba.prange(n_chunks):
        acc = np.zeros(n_range, dtype=np.float32)
        excluded = np.zeros(n_range, dtype=np.bool_)
        heap_s = np.empty(k, dtype=np.float32)
        heap_i = np.empty(k, dtype=np.int32)
        for qi in range(chunk, n_queries, n_chunks):
            q = q_self[qi]
            read = 0
            for jj in range(q_indptr[qi], q_indptr[qi + 1]):
                wq = q_data[jj]
                start, stop = _posting_span(post_indptr, post_indices, q_indices[jj], lo, hi, whole)
                read += stop - start
                for kk in range(start, stop):
                    acc[post_indices[kk] - lo_u] += wq * post_data[kk]
            reads[qi] = read
            # The query is neither its own near-duplicate nor its own neighbour.
            if lo <= q < hi:
                acc[q - lo] = 0.0
            for e in range(excl_indptr[qi], excl_indptr[qi + 1]):
                d = excl_indices[e]
                if lo <= d < hi:
                    excluded[d - lo] = True
            size = 0
            n_nd = 0
            # One pass over the accumulator: read, reset to zero for the next query, route
            # each scored document to the near-duplicates, the mask, or the top-k heap.
            for local in range(n_range):
                s = acc[local]
                if s == 0.0:
                    continue
                acc[local] = 0.0
                d = local + lo
                if use_threshold and s >= cut:
                    if n_nd < nd_cap:
                        nd_buf[qi, n_nd] = d
                    n_nd += 1
                    continue
                # Only positive similarities are neighbours (negative ones need negative
                # weights, which TF-IDF never has, but must still be reset above).
                if s < 0.0 or excluded[local]:
                    continue
                # Most documents fall below the heap's minimum: test before the call.
                # Documents arrive by ascending id, so an equal score never displaces.
                if size < k or s > heap_s[0]:
                    size = push_largest(heap_s, heap_i, size, k, s, d)
            for e in range(excl_indptr[qi], excl_indptr[qi + 1]):
                d = excl_indices[e]
                if lo <= d < hi:
                    excluded[d - lo] = False
            nd_counts[qi] = n_nd
            drain_heap(heap_s, heap_i, size, neighbours[qi], similarities[qi])
    return neighbours, similarities, nd_counts, nd_buf, reads


# --------------------------------------------------------------------------------------------
# Fast path: the pruned search (prune=True)
# --------------------------------------------------------------------------------------------


@intrinsic
def _prefetch(typingctx, array, index):  # type: ignore[no-untyped-def]
    """Hint the CPU to load ``array[index]`` into the cache (LLVM's prefetch intrinsic)."""
    signature = types.void(array, index)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        array_type = sig.args[0]
        handle = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, array_type, handle, [args[1]])
        byte_pointer = ir.IntType(8).as_pointer()
        int32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.VoidType(), [byte_pointer, int32, int32, int32]),
            "llvm.prefetch.p0i8",
        )
        # Read access, high temporal locality, data cache.
        builder.call(
            function, [builder.bitcast(pointer, byte_pointer), int32(0), int32(3), int32(1)]
        )
        return context.get_dummy_value()

    return signature, codegen


@numba.njit(cache=True, inline="always")
def _prefetch_row(
    docs_indptr: np.ndarray, docs_indices: np.ndarray, docs_data: np.ndarray, d: int
) -> None:
    """Start loading document ``d``'s row (one hint per 64-byte line of each array)."""
    for x in range(docs_indptr[d], docs_indptr[d + 1], 16):
        # mypy sees the intrinsic's typing signature, not the call.
        _prefetch(docs_indices, x)  # type: ignore[call-arg]
        _prefetch(docs_data, x)  # type: ignore[call-arg]


@numba.njit(cache=True)
def _row_score(
    docs_indptr: np.ndarray, docs_indices: np.ndarray, docs_data: np.ndarray, qw: np.ndarray, d: int
) -> np.float32:
    """Exact score of document ``d``: its row against the dense query weights ``qw``.

    Products are summed in float32 by ascending feature, the order of the plain scan and of
    the brute-force reference, so the score is bit-identical to theirs. Features the query
    lacks add an exact +0 (a float32 sum that starts at +0 never becomes -0), so the loop
    needs no branch.
    """
    s = np.float32(0.0)
    for jj in range(docs_indptr[d], docs_indptr[d + 1]):
        s += qw[docs_indices[jj]] * docs_data[jj]
    return s


@numba.njit(cache=True)
def _theta_pass(
    acc: np.ndarray,
    pool: np.ndarray,
    n_pool: int,
    k: int,
    q_local: int,
    excluded: np.ndarray,
    theta: float,
    limit: float,
    th_s: np.ndarray,
    th_i: np.ndarray,
    top_s: np.ndarray,
    top_i: np.ndarray,
) -> tuple[float, int, int, np.float32]:
    """Raise theta from the pool of candidates, and shrink the pool.

    Theta is a lower bound of the query's final k-th neighbour score. Here it is the k-th
    largest partial score p among admissible documents (not the query, not left out) below
    ``limit`` (the near-duplicate floor: the cut minus the unread bounds and the margin).
    Those can never become near-duplicates, so they stay neighbours, and each ends at least
    at p because the unread contributions are >= 0. Only values above the old theta can
    raise it, so only those enter the heap.

    The pool holds every admissible document whose partial score is at or above its level;
    the best partial scores of the pool (as many as ``top_s`` holds, ids in ``top_i``, for
    :func:`_exact_theta`) set the new level, so the pool keeps that many documents or more,
    and only those at or above it; the caller appends the documents that cross it later.

    Returns the new theta, the pool size, the number of top entries (fewer than ``top_s``
    holds only when the pool is that small, and then the level stays the lowest) and the
    new level.
    """
    size = 0
    n_top = 0
    for t in range(n_pool):
        d = pool[t]
        p = acc[d]
        if d == q_local or excluded[d]:
            continue
        n_top = push_largest(top_s, top_i, n_top, top_s.shape[0], p, d)
        if theta < p < limit:
            size = push_largest(th_s, th_i, size, k, p, d)
    if size == k:
        theta = max(theta, float(th_s[0]))
    if n_top < top_s.shape[0]:
        return theta, n_pool, n_top, np.float32(_POOL_LEVEL_MIN)
    level = top_s[0]
    kept = 0
    for t in range(n_pool):
        d = pool[t]
        if acc[d] >= level and d != q_local and not excluded[d]:
            pool[kept] = d
            kept += 1
    return theta, kept, n_top, level


@numba.njit(cache=True)
def _live_pass(
    acc: np.ndarray,
    live: np.ndarray,
    n_live: int,
    dense: bool,
    final: bool,
    k: int,
    q_local: int,
    excluded: np.ndarray,
    theta: float,
    remaining: float,
    margin: float,
    cut: np.float32,
    th_s: np.ndarray,
    th_i: np.ndarray,
    gaps: np.ndarray,
) -> tuple[float, int]:
    """Keep in ``live`` the documents still in play; raise theta; histogram the gaps.

    Reads ``live[:n_live]``, or every document when ``dense``. A document with partial
    score p stays when p reaches the near-duplicate floor ``cut - remaining - margin`` (it
    may still be a near-duplicate) or, if admissible, ``theta - remaining - 2 margin`` (it
    may still be a neighbour; the margins absorb the float32 rounding of p and of its exact
    score). Documents without a positive partial score never stay: the caller ensures that
    the unread bounds keep them out of reach. Theta rises as in :func:`_theta_pass`, from
    the documents that stay (the others lie below theta and cannot lift the k-th value):
    in a first read when ``final``, so that the floors use it at once, else while they are
    read (one read instead of two; the next pass uses it).

    A neighbour candidate drops out once the unread bounds fall below its gap ``theta - 2
    margin - p``: ``gaps[i]`` counts the candidates whose gap is at most ``i / _GAP_BINS`` of
    ``remaining`` (those without a gap never drop out and are not counted), so the caller can
    estimate what reading a further list would save.

    Returns the new theta and the number of documents that stay.
    """
    near_duplicate_floor = cut - (remaining + margin)
    size = 0
    n = acc.shape[0] if dense else n_live
    if final:
        for t in range(n):
            d = t if dense else live[t]
            p = acc[d]
            if theta < p < near_duplicate_floor and d != q_local and not excluded[d]:
                size = push_largest(th_s, th_i, size, k, p, d)
        if size == k:
            theta = max(theta, float(th_s[0]))
        size = 0
    neighbour_floor = theta - remaining - 2.0 * margin
    level = max(min(neighbour_floor, near_duplicate_floor), _POOL_LEVEL_MIN)
    base = theta - 2.0 * margin
    scale = _GAP_BINS / remaining if remaining > 0.0 else 0.0
    # Two reads: a branch-free filter on the level (most documents fall below it, in no
    # predictable pattern), then the finer tests on the few that pass, in the same order.
    n_level = 0
    if dense:
        for d in range(n):
            live[n_level] = d
            n_level += acc[d] >= level
    else:
        for t in range(n):
            d = live[t]
            live[n_level] = d
            n_level += acc[d] >= level
    # Four interleaved histograms: neighbouring documents often fall in the same bin, and
    # one counter per bin would make each count wait for the previous one.
    counts = np.zeros((4, _GAP_BINS + 1), dtype=np.int64)
    kept = 0
    for t in range(n_level):
        d = live[t]
        p = acc[d]
        if d == q_local:
            continue
        if p < near_duplicate_floor:
            if excluded[d] or p < neighbour_floor:
                continue
            position = (base - p) * scale
            if position > 0.0:
                # Compared as a float first: a tiny ``remaining`` makes the position huge.
                b = _GAP_BINS if position >= _GAP_BINS else int(np.ceil(position))
                counts[t & 3, b] += 1
            elif p > theta and not final:
                size = push_largest(th_s, th_i, size, k, p, d)
        live[kept] = d
        kept += 1
    total = 0
    for i in range(_GAP_BINS + 1):
        total += counts[0, i] + counts[1, i] + counts[2, i] + counts[3, i]
        gaps[i] = total
    if size == k:
        theta = max(theta, float(th_s[0]))
    return theta, kept


@numba.njit(cache=True)
def _gaps_within(gaps: np.ndarray, reference: float, x: float) -> float:
    """Candidates whose gap is at most ``x``, from the histogram made at ``reference``."""
    if x <= 0.0 or reference <= 0.0:
        return 0.0
    pos = x / reference * _GAP_BINS
    if pos >= _GAP_BINS:
        return gaps[_GAP_BINS]
    i = int(pos)
    return gaps[i] + (gaps[i + 1] - gaps[i]) * (pos - i)


@numba.njit(cache=True)
def _exact_scores(
    docs_indptr: np.ndarray,
    docs_indices: np.ndarray,
    docs_data: np.ndarray,
    qw: np.ndarray,
    lo: int,
    ids: np.ndarray,
    n: int,
    exact: np.ndarray,
    scored: np.ndarray,
    n_scored: int,
) -> tuple[int, int]:
    """Fill ``exact`` (-1 where unknown) for the documents ``ids[:n]`` (local ids).

    Each document's row is read once per query: the newly scored ones are appended to
    ``scored``. Rows are prefetched two documents ahead, as they lie anywhere in memory.
    Returns the new length of ``scored`` and the row entries read.
    """
    entries = 0
    for t in range(n):
        if t + 2 < n and exact[ids[t + 2]] < 0.0:
            _prefetch_row(docs_indptr, docs_indices, docs_data, ids[t + 2] + lo)
        d = ids[t]
        if exact[d] < 0.0:
            exact[d] = _row_score(docs_indptr, docs_indices, docs_data, qw, d + lo)
            scored[n_scored] = d
            n_scored += 1
            entries += docs_indptr[d + lo + 1] - docs_indptr[d + lo]
    return n_scored, entries


@numba.njit(cache=True)
def _exact_theta(
    exact: np.ndarray,
    ids: np.ndarray,
    n: int,
    k: int,
    cut: np.float32,
    th_s: np.ndarray,
    th_i: np.ndarray,
) -> float:
    """Lower bound of the final k-th neighbour score from exact scores of candidates.

    ``ids[:n]`` are admissible documents (local ids) with known exact scores. Those whose
    score is positive and below the cut are neighbour candidates with known final scores,
    so with k of them the final k-th neighbour score is at least the k-th largest; else 0.
    """
    size = 0
    for t in range(n):
        d = ids[t]
        s = exact[d]
        if 0.0 < s < cut:
            size = push_largest(th_s, th_i, size, k, float(s), d)
    return float(th_s[0]) if size == k else 0.0


@numba.njit(cache=True, parallel=True)
def _pruned_kernel(
    docs_indptr: np.ndarray,
    docs_indices: np.ndarray,
    docs_data: np.ndarray,
    post_indptr: np.ndarray,
    post_indices: np.ndarray,
    post_data: np.ndarray,
    feature_max: np.ndarray,
    lo: int,
    hi: int,
    whole: bool,
    q_indptr: np.ndarray,
    q_indices: np.ndarray,
    q_data: np.ndarray,
    q_self: np.ndarray,
    k: int,
    use_threshold: bool,
    cut: np.float32,
    excl_indptr: np.ndarray,
    excl_indices: np.ndarray,
    nd_cap: int,
    n_chunks: int,
    row_cost: float,
    theta_floor: np.ndarray,
) -> tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray
]:
    """MaxScore search of documents ``[lo, hi)``, with the results of :func:`_search_kernel`.

    Needs non-negative weights. Per query the posting lists are read in descending order of
    their bound (query weight times the list's largest weight) divided by their length, so
    that the lists still unread when pruning starts are long ones of small bound (any order
    is exact; this one reads fewer postings); ``remaining``, the sum of the bounds not yet
    read, bounds what any document can still gain. Meanwhile theta, a lower bound of the
    final k-th neighbour score, rises from a small pool of candidates (:func:`_theta_pass`)
    and from the exact scores of the best of them (:func:`_exact_theta`). Once ``remaining``
    plus the margin is below both theta and the near-duplicate cut, documents without a
    partial score cannot matter any more: the others that still can are collected
    (:func:`_live_pass`, again as the bounds tighten), and a further list is read only if
    that is cheaper than rescoring the candidates it would eliminate (``row_cost`` postings'
    worth each). The survivors are scored exactly from their rows (or, when that would cost
    more, by rereading every list in feature order) and routed as in the plain scan.

    Queries are given as in :func:`_search_kernel`. ``theta_floor[i]`` is a known lower
    bound of query ``i``'s k-th neighbour score (the k-th score among documents searched
    before, in other segments; 0 when none is known): theta starts there, so a range
    searched after others prunes from its first lists on. Documents below it may then be
    missing from this range's top-k, which the merge with those other results makes good.

    Also returns, per query, the postings read, the postings the plain scan would read, the
    documents rescored from their rows and the row entries that took.
    """
    n_queries = q_self.shape[0]
    n_range = hi - lo
    n_features = post_indptr.shape[0] - 1
    lo_u = np.uint64(lo)
    neighbours = np.full((n_queries, k), -1, dtype=np.int32)
    similarities = np.zeros((n_queries, k), dtype=np.float32)
    nd_counts = np.zeros(n_queries, dtype=np.int64)
    nd_buf = np.empty((n_queries, max(nd_cap, 1)), dtype=np.int32)
    reads = np.zeros(n_queries, dtype=np.int64)
    totals = np.zeros(n_queries, dtype=np.int64)
    rescored_docs = np.zeros(n_queries, dtype=np.int64)
    rescored_entries = np.zeros(n_queries, dtype=np.int64)
    for chunk in numba.prange(n_chunks):
        acc = np.zeros(n_range, dtype=np.float32)
        excluded = np.zeros(n_range, dtype=np.bool_)
        # Theta candidates, then the documents still in play (see below).
        theta_pool = np.empty(n_range, dtype=np.int32)
        live = np.empty(n_range, dtype=np.int32)
        qw = np.zeros(n_features, dtype=np.float32)
        # Exact scores computed this query (-1: not yet), and which documents have one.
        exact = np.full(n_range, -1.0, dtype=np.float32)
        scored = np.empty(n_range, dtype=np.int32)
        heap_s = np.empty(k, dtype=np.float32)
        heap_i = np.empty(k, dtype=np.int32)
        th_s = np.empty(k, dtype=np.float32)
        th_i = np.empty(k, dtype=np.int32)
        # Some of the best partial scores may belong to near-duplicates, which are not
        # neighbours: twice k candidates usually leave k for an exact theta.
        top_s = np.empty(2 * k, dtype=np.float32)
        top_i = np.empty(2 * k, dtype=np.int32)
        gaps = np.zeros(_GAP_BINS + 1, dtype=np.float64)
        for qi in range(chunk, n_queries, n_chunks):
            q = q_self[qi]
            first = q_indptr[qi]
            m = q_indptr[qi + 1] - first
            q_local = q - lo if lo <= q < hi else -1
            for e in range(excl_indptr[qi], excl_indptr[qi + 1]):
                d = excl_indices[e]
                if lo <= d < hi:
                    excluded[d - lo] = True
            margin = _PRUNE_MARGIN + m * _ROUNDING_PER_FEATURE
            starts = np.empty(m, dtype=np.int64)
            stops = np.empty(m, dtype=np.int64)
            bound = np.empty(m, dtype=np.float64)
            total = 0
            remaining = 0.0
            for j in range(m):
                f = q_indices[first + j]
                wq = q_data[first + j]
                qw[f] = wq
                start, stop = _posting_span(post_indptr, post_indices, f, lo, hi, whole)
                starts[j] = start
                stops[j] = stop
                total += stop - start
                # Nothing in range, or only zero products: a bound of 0, never read.
                bound[j] = np.float64(wq) * np.float64(feature_max[f]) if stop > start else 0.0
                remaining += bound[j]
            # Bound per posting: the lists left unread when pruning starts are then the ones
            # that buy the most unread bound for the fewest postings.
            density = np.empty(m, dtype=np.float64)
            for j in range(m):
                density[j] = bound[j] / max(stops[j] - starts[j], 1)
            order = np.argsort(-density)
            # A round of exact scores costs at most 2k rows, mostly fewer (rows already
            # scored are not read again); k rows' worth of reading between two rounds keeps
            # them a modest share of the work.
            exact_cost = k * row_cost

            read = 0
            # A known lower bound of the k-th neighbour score (from documents searched
            # before this range), else 0.
            theta = float(theta_floor[qi])
            # Theta candidates: every admissible document at or above ``theta_level`` (at
            # first any positive score, so the pool starts as the documents seen); the scan
            # appends those that cross it, _theta_pass raises it.
            theta_level = np.float32(_POOL_LEVEL_MIN)
            n_theta = 0
            read_at_theta = 0
            read_at_exact = -exact_cost
            n_scored = 0
            scored_entries = 0
            # Once documents without a partial score cannot matter any more ("settled"),
            # the live list holds every document still in play; it only shrinks.
            settled = False
            n_live = 0
            read_at_live = 0
            reference = 0.0  # ``remaining`` when ``gaps`` was made
            for t in range(m):
                j = order[t]
                b = bound[j]
                if b == 0.0:
                    continue
                start = starts[j]
                stop = stops[j]
                length = stop - start
                wq = q_data[first + j]
                slack = remaining + margin
                if not settled:
                    # A pass costs O(pool): making one only once as many postings were read
                    # since the last keeps its cost below that of the reading.
                    if n_theta >= k and read - read_at_theta >= n_theta:
                        read_at_theta = read
                        theta, n_theta, n_top, theta_level = _theta_pass(
                            acc,
                            theta_pool,
                            n_theta,
                            k,
                            q_local,
                            excluded,
                            theta,
                            cut - slack,
                            th_s,
                            th_i,
                            top_s,
                            top_i,
                        )
                        if n_top == top_s.shape[0] and read - read_at_exact >= exact_cost:
                            # The best partial scores belong to the likely neighbours: their
                            # exact scores give a much higher theta, early.
                            read_at_exact = read
                            n_scored, entries = _exact_scores(
                                docs_indptr,
                                docs_indices,
                                docs_data,
                                qw,
                                lo,
                                top_i,
                                n_top,
                                exact,
                                scored,
                                n_scored,
                            )
                            scored_entries += entries
                            theta = max(
                                theta,
                                _exact_theta(exact, top_i, n_top, k, cut, th_s, th_i),
                            )
                    if slack < theta and slack < cut:
                        # Documents without a partial score can no longer be neighbours or
                        # near-duplicates: collect the others that still can.
                        settled = True
                        theta, n_live = _live_pass(
                            acc,
                            live,
                            0,
                            True,
                            False,
                            k,
                            q_local,
                            excluded,
                            theta,
                            remaining,
                            margin,
                            cut,
                            th_s,
                            th_i,
                            gaps,
                        )
                        reference = remaining
                        read_at_live = read
                if not settled:
                    for kk in range(start, stop):
                        d = post_indices[kk] - lo_u
                        old = acc[d]
                        new = old + wq * post_data[kk]
                        acc[d] = new
                        if new >= theta_level and old < theta_level:
                            theta_pool[n_theta] = d
                            n_theta += 1
                    read += length
                    remaining -= b
                    continue
                if read - read_at_live >= n_live:
                    read_at_live = read
                    theta, n_live = _live_pass(
                        acc,
                        live,
                        n_live,
                        False,
                        False,
                        k,
                        q_local,
                        excluded,
                        theta,
                        remaining,
                        margin,
                        cut,
                        th_s,
                        th_i,
                        gaps,
                    )
                    reference = remaining
                # Read this list only if the candidates it would eliminate (those whose gap
                # it closes, assuming they gain little from it) cost more to rescore than the
                # list costs to read; otherwise its bound stays in ``remaining``.
                eliminated = _gaps_within(gaps, reference, remaining) - _gaps_within(
                    gaps, reference, remaining - b
                )
                if length >= eliminated * row_cost:
                    continue
                # Only live documents' scores matter now; updating the others too keeps the
                # loop as tight as the plain scan.
                for kk in range(start, stop):
                    acc[post_indices[kk] - lo_u] += wq * post_data[kk]
                read += length
                remaining -= b

            # Final bounds: every list is read, or its bound is in ``remaining``.
            remaining = max(remaining, 0.0)
            theta, n_live = _live_pass(
                acc,
                live,
                n_live,
                not settled,
                True,
                k,
                q_local,
                excluded,
                theta,
                remaining,
                margin,
                cut,
                th_s,
                th_i,
                gaps,
            )

            # Exact scores of the survivors: from their rows, or by rereading every list in
            # feature order (the plain scan's order) when that is cheaper, e.g. when fewer
            # than k documents were seen and nothing could be pruned.
            entries = 0
            for t in range(n_live):
                local = live[t]
                if exact[local] < 0.0:
                    entries += docs_indptr[local + lo + 1] - docs_indptr[local + lo]
            rescan = entries * _RESCORE_COST > total
            if rescan:
                acc[:] = 0.0
                for j in range(m):
                    wq = q_data[first + j]
                    for kk in range(starts[j], stops[j]):
                        acc[post_indices[kk] - lo_u] += wq * post_data[kk]
                read += total
            else:
                n_scored, entries = _exact_scores(
                    docs_indptr,
                    docs_indices,
                    docs_data,
                    qw,
                    lo,
                    live,
                    n_live,
                    exact,
                    scored,
                    n_scored,
                )
                scored_entries += entries
            reads[qi] = read
            totals[qi] = total
            rescored_docs[qi] = n_scored
            rescored_entries[qi] = scored_entries

            n_heap = 0
            n_nd = 0
            for t in range(n_live):
                local = live[t]
                d = local + lo
                s = acc[local] if rescan else exact[local]
                if s == 0.0:
                    continue
                if use_threshold and s >= cut:
                    if n_nd < nd_cap:
                        nd_buf[qi, n_nd] = d
                    n_nd += 1
                    continue
                if s < 0.0 or excluded[local]:
                    continue
                if n_heap < k:
                    heap_s[n_heap] = s
                    heap_i[n_heap] = d
                    sift_up(heap_s, heap_i, n_heap)
                    n_heap += 1
                elif worse(heap_s[0], heap_i[0], s, d):
                    # Candidates come in no particular order, so ties need the id rule here.
                    heap_s[0] = s
                    heap_i[0] = d
                    sift_down(heap_s, heap_i, n_heap, 0)
            nd_counts[qi] = n_nd
            nd_buf[qi, : min(n_nd, nd_cap)].sort()
            drain_heap(heap_s, heap_i, n_heap, neighbours[qi], similarities[qi])

            # Partial scores are everywhere once pruning starts: clearing the whole array
            # (a memset) is cheaper than tracking which documents were touched.
            acc[:] = 0.0
            for t in range(n_scored):
                exact[scored[t]] = -1.0
            for j in range(m):
                qw[q_indices[first + j]] = 0.0
            for e in range(excl_indptr[qi], excl_indptr[qi + 1]):
                d = excl_indices[e]
                if lo <= d < hi:
                    excluded[d - lo] = False
    return (
        neighbours,
        similarities,
        nd_counts,
        nd_buf,
        reads,
        totals,
        rescored_docs,
        rescored_entries,
    )


# --------------------------------------------------------------------------------------------
# Fast path: driver
# --------------------------------------------------------------------------------------------


def _kernel_array(array: np.ndarray, ids: bool = False) -> np.ndarray:
    """A read-only plain-ndarray view; with ``ids``, int32 ids reinterpreted as uint32.

    numba compiles one specialisation per argument type and treats writable and read-only
    arrays (like the memory maps of a loaded index) as different types; handing the kernels
    read-only views always means one compiled (and cached) version serves built and loaded
    indexes alike. Ids are non-negative, and as uint32 they spare numba's negative-index
    check in the innermost posting loop (about 13% of the scan time).
    """
    view = np.asarray(array).view(np.ndarray)
    if ids and view.dtype == np.int32:
        view = view.view(np.uint32)
    view.flags.writeable = False
    return view


def _run_kernel(
    index: TextIndex,
    req: _Request,
    queries: _Queries,
    nd_cap: int,
    n_threads: int,
    prune: bool,
) -> tuple[np.ndarray, ...]:
    """Call the pruned or the plain kernel on the index arrays (see :func:`_kernel_array`).

    Returns neighbours, similarities, near-duplicate counts and buffer, then per query the
    postings read, the postings of the query's features in range (what the plain scan reads),
    and the documents and row entries rescored (zeros for the plain scan).
    """
    n_queries = req.queries.shape[0]
    n_chunks = max(1, min(n_threads, n_queries))
    docs = index.docs
    postings = index.postings
    rows = queries.rows
    common = (
        _kernel_array(docs.indptr),
        _kernel_array(docs.indices, ids=True),
        _kernel_array(docs.data),
        _kernel_array(postings.indptr),
        _kernel_array(postings.indices, ids=True),
        _kernel_array(postings.data),
    )
    whole = req.lo == 0 and req.hi == index.n_docs
    # One dtype per argument whatever the source, so one compiled kernel serves them all.
    query_args = (
        _kernel_array(rows.indptr.astype(np.int64, copy=False)),
        _kernel_array(rows.indices.astype(np.int32, copy=False), ids=True),
        _kernel_array(rows.data.astype(np.float32, copy=False)),
        _kernel_array(req.queries),
    )
    if not prune or not index.nonnegative:
        zeros = np.zeros(n_queries, dtype=np.int64)
        nb, sims, nd_counts, nd_buf, reads = _search_kernel(
            *common,
            req.lo,
            req.hi,
            whole,
            *query_args,
            req.k,
            req.use_threshold,
            req.cut,
            req.exclude_indptr,
            req.exclude_indices,
            nd_cap,
            n_chunks,
        )
        return nb, sims, nd_counts, nd_buf, reads, reads, zeros, zeros
    mean_row = docs.nnz / max(1, index.n_docs)
    return _pruned_kernel(
        *common,
        _kernel_array(_bounds(index)),
        req.lo,
        req.hi,
        whole,
        *query_args,
        req.k,
        req.use_threshold,
        req.cut,
        req.exclude_indptr,
        req.exclude_indices,
        nd_cap,
        n_chunks,
        mean_row * _RESCORE_COST,
        _kernel_array(queries.theta_floor),
    )


def search(
    index: SearchIndex,
    query_docs: npt.ArrayLike,
    *,
    k: int,
    near_duplicate_threshold: float | None = None,
    exclude_indptr: npt.ArrayLike | None = None,
    exclude_indices: npt.ArrayLike | None = None,
    n_threads: int = 2,
    doc_range: tuple[int, int] | None = None,
    prune: bool = True,
    stats: SearchStats | None = None,
) -> SearchResult:
    """Exact top-k cosine neighbours of corpus documents, with near-duplicates and leave-outs.

    For query ``i`` (document ``query_docs[i]``) every document is scored by dot product.
    The near-duplicates are all documents other than the query with similarity
    ``>= near_duplicate_threshold - 1e-5``; the tolerance absorbs float32 rounding, so a
    threshold of 1.0 catches exact duplicates. The query itself, its near-duplicates and
    ``exclude_indices[exclude_indptr[i]:exclude_indptr[i + 1]]`` are then excluded, and the
    neighbours are the k remaining documents of highest positive similarity.

    A :class:`SegmentedIndex` is searched a segment at a time and the parts merged exactly;
    each segment starts pruning from the k-th neighbour score found in the segments before it
    (a document below it cannot enter the top k), so later segments read far fewer postings.

    Parameters
    ----------
    index
        From :func:`build_text_index` or :func:`load_text_index`, or a
        :class:`SegmentedIndex` (ids are then global: segment offsets are added).
    query_docs
        Document ids to query, 1-d integers.
    k
        Neighbours per query.
    near_duplicate_threshold
        Cosine at which a document counts as a near-duplicate of the query, in (1e-5, 1];
        ``None`` for no near-duplicate handling.
    exclude_indptr, exclude_indices
        Optional CSR (``len(query_docs) + 1`` pointers) of documents to leave out per query,
        e.g. records that share a group with it.
    n_threads
        Worker threads (capped by numba's thread pool).
    doc_range
        ``(lo, hi)``: score only documents ``lo <= id < hi`` (a shard); neighbours and
        near-duplicates then come from that range only. Query and leave-out ids stay global.
        ``None`` searches every document.
    prune
        Skip the postings that provably cannot change the result (MaxScore, the default;
        indexes with negative weights are always scanned in full); ``False`` reads every
        posting of every query feature. Both give identical results.
    stats
        When given, the work done is added to its counters.

    Returns
    -------
    SearchResult
        Neighbours, similarities and near-duplicate sets, one row per query.
    """
    req = _request(
        index.n_docs,
        query_docs,
        k,
        near_duplicate_threshold,
        exclude_indptr,
        exclude_indices,
        doc_range,
    )
    n_queries = req.queries.shape[0]
    queries = _Queries(index.rows(req.queries), np.zeros(n_queries, dtype=np.float32))
    spans = _spans(index, req.lo, req.hi)
    merged: SearchResult | None = None
    previous_threads = numba.get_num_threads()
    pool_size = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    numba.set_num_threads(max(1, min(n_threads, pool_size)))
    try:
        with deferred_interrupts() as interrupt:
            for offset, part, lo, hi in spans:
                if merged is not None:
                    queries = _Queries(queries.rows, _kth_scores(merged, req.k))
                found = _search_part(
                    part, _shifted(req, offset, lo, hi), queries, n_threads, prune, stats, interrupt
                )
                if len(spans) > 1:
                    # Hold one segment's pages at a time; with one part there is nothing to
                    # gain, and the next search would fault every page in again.
                    part.release_pages()
                result = shift_ids(found, offset)
                merged = result if merged is None else merge_shard_results([merged, result], k=k)
                if interrupt.requested:
                    break
    finally:
        numba.set_num_threads(previous_threads)
    assert merged is not None
    return merged


def _search_part(
    index: TextIndex,
    req: _Request,
    queries: _Queries,
    n_threads: int,
    prune: bool,
    stats: SearchStats | None,
    interrupt: Deferred,
) -> SearchResult:
    """Every query against one index, a kernel call per chunk of queries, so that an
    interrupt (a terminated run) is honoured between chunks instead of crashing inside the
    parallel kernel: the search stops after the chunk in which it arrived."""
    n_queries = req.queries.shape[0]
    found = []
    for start in range(0, max(n_queries, 1), _QUERIES_PER_CALL):
        rows = np.arange(start, min(start + _QUERIES_PER_CALL, n_queries))
        if rows.size == n_queries:
            found.append(_search_chunk(index, req, queries, n_threads, prune, stats))
        else:
            chunk = subset_request(req, rows)
            found.append(_search_chunk(index, chunk, queries.subset(rows), n_threads, prune, stats))
        if interrupt.requested:
            break
    return concatenate_results(found)


class _Queries(NamedTuple):
    """The queries' rows (CSR, one per query, whatever index they come from) and, per query,
    a known lower bound of its k-th neighbour score (0 when none is known)."""

    rows: sp.csr_matrix
    theta_floor: npt.NDArray[np.float32]

    def subset(self, rows: npt.NDArray[np.int64]) -> _Queries:
        return _Queries(self.rows[rows], self.theta_floor[rows])


def _spans(index: SearchIndex, lo: int, hi: int) -> list[tuple[int, TextIndex, int, int]]:
    """``(offset, segment, local lo, local hi)`` of each part of ``index`` that holds some of
    the documents ``[lo, hi)``; one (empty) part when none does."""
    if isinstance(index, TextIndex):
        return [(0, index, lo, hi)]
    spans = []
    for position, segment in enumerate(index.segments):
        start = int(index.starts[position])
        first, last = max(lo, start), min(hi, start + segment.n_docs)
        if first < last:
            spans.append((start, segment, first - start, last - start))
    return spans or [(0, index.segments[0], 0, 0)]


def _shifted(req: _Request, offset: int, lo: int, hi: int) -> _Request:
    """The request in the ids of a part that starts at document ``offset``: queries and
    leave-outs outside the part fall outside ``[lo, hi)`` and are ignored there."""
    if offset == 0:
        return dataclasses.replace(req, lo=lo, hi=hi)
    return dataclasses.replace(
        req,
        queries=req.queries - offset,
        exclude_indices=(req.exclude_indices.astype(np.int64) - offset).astype(np.int32),
        lo=lo,
        hi=hi,
    )


def _kth_scores(result: SearchResult, k: int) -> npt.NDArray[np.float32]:
    """Each query's k-th neighbour score so far, 0 where it has fewer than k."""
    last = result.neighbours[:, k - 1]
    return np.where(last >= 0, result.similarities[:, k - 1], 0.0).astype(np.float32)


def _search_chunk(
    index: TextIndex,
    req: _Request,
    queries: _Queries,
    n_threads: int,
    prune: bool,
    stats: SearchStats | None,
) -> SearchResult:
    """One kernel call (and a rerun for queries with more near-duplicates than the cap)."""
    (neighbours, similarities, nd_counts, nd_buf, reads, totals, docs_rescored, entries) = (
        _run_kernel(index, req, queries, _NEAR_DUPLICATE_CAP, n_threads, prune)
    )
    if stats is not None:
        stats.queries += req.queries.shape[0]
        stats.postings_read += int(reads.sum())
        stats.postings_total += int(totals.sum())
        stats.rescored_documents += int(docs_rescored.sum())
        stats.rescored_entries += int(entries.sum())
    overflow = np.flatnonzero(nd_counts > _NEAR_DUPLICATE_CAP)
    if overflow.size:
        # Rerun just the overflowing queries with room for every near-duplicate.
        sub = subset_request(req, overflow)
        big_cap = int(nd_counts[overflow].max())
        sub_nb, sub_sim, _, sub_buf, *_ = _run_kernel(
            index, sub, queries.subset(overflow), big_cap, n_threads, prune
        )
        neighbours[overflow] = sub_nb
        similarities[overflow] = sub_sim

    nd_indptr = np.zeros(req.queries.shape[0] + 1, dtype=np.int64)
    np.cumsum(nd_counts, out=nd_indptr[1:])
    if overflow.size:
        pieces = [nd_buf[qi, :count] for qi, count in enumerate(nd_counts)]
        for pos, qi in enumerate(overflow):
            pieces[qi] = sub_buf[pos, : nd_counts[qi]]
        nd_indices = np.concatenate(pieces)
    else:
        # Row-major boolean selection concatenates each query's kept prefix in query order.
        nd_indices = nd_buf[np.arange(nd_buf.shape[1]) < nd_counts[:, None]]
    return SearchResult(
        neighbours=neighbours,
        similarities=similarities,
        near_duplicate_indptr=nd_indptr,
        near_duplicate_indices=nd_indices,
    )


# --------------------------------------------------------------------------------------------
# Reference
# --------------------------------------------------------------------------------------------


def search_brute_force(
    index: SearchIndex,
    query_docs: npt.ArrayLike,
    *,
    k: int,
    near_duplicate_threshold: float | None = None,
    exclude_indptr: npt.ArrayLike | None = None,
    exclude_indices: npt.ArrayLike | None = None,
    doc_range: tuple[int, int] | None = None,
) -> SearchResult:
    """Reference for :func:`search`: dense scores from a scipy product, then numpy sorting.

    Same parameters (but no tuning ones) and result as :func:`search`; meant for tests and
    benchmarks (it holds a dense ``(256, n_docs)`` block of scores at a time; a
    :class:`SegmentedIndex` is first joined into one index).
    """
    if isinstance(index, SegmentedIndex):
        index = build_text_index(index.matrix())
    req = _request(
        index.n_docs,
        query_docs,
        k,
        near_duplicate_threshold,
        exclude_indptr,
        exclude_indices,
        doc_range,
    )
    n_queries = req.queries.shape[0]
    neighbours = np.full((n_queries, k), -1, dtype=np.int32)
    similarities = np.zeros((n_queries, k), dtype=np.float32)
    nd_rows: list[np.ndarray] = []
    doc_ids = np.arange(index.n_docs)
    outside = (doc_ids < req.lo) | (doc_ids >= req.hi)
    for lo in range(0, n_queries, _BRUTE_FORCE_BLOCK):
        block = req.queries[lo : lo + _BRUTE_FORCE_BLOCK]
        # query rows (CSR) @ postings (CSR) walks each query's features in ascending order and
        # adds float32 products per document, the same order as the fast path.
        scores = (index.docs[block] @ index.postings).toarray()
        scores[:, outside] = 0.0
        for row, q in enumerate(block):
            qi = lo + row
            s = scores[row]
            s[q] = 0.0
            if req.use_threshold:
                near = np.flatnonzero(s >= req.cut).astype(np.int32)
            else:
                near = np.zeros(0, dtype=np.int32)
            nd_rows.append(near)
            s[near] = 0.0
            s[req.exclude_indices[req.exclude_indptr[qi] : req.exclude_indptr[qi + 1]]] = 0.0
            candidates = np.flatnonzero(s > 0.0)
            order = np.lexsort((doc_ids[candidates], -s[candidates]))[:k]
            top = candidates[order]
            neighbours[qi, : top.shape[0]] = top
            similarities[qi, : top.shape[0]] = s[top]
    nd_indptr = np.zeros(n_queries + 1, dtype=np.int64)
    np.cumsum([row.shape[0] for row in nd_rows], out=nd_indptr[1:])
    nd_indices = np.concatenate(nd_rows) if nd_rows else np.zeros(0, dtype=np.int32)
    return SearchResult(
        neighbours=neighbours,
        similarities=similarities,
        near_duplicate_indptr=nd_indptr,
        near_duplicate_indices=nd_indices.astype(np.int32, copy=False),
    )
