"""Approximate nearest neighbours over dense unit vectors with pynndescent, exact where it
matters.

pynndescent (an NN-descent graph plus a search tree) proposes candidates; everything else
is exact. Each query asks for ``k + 1 + |its exclusions| + overfetch`` candidates (itself
and its excluded documents may be among them), the candidates are rescored with exact dot
products against the stored vectors, and the query itself, its excluded documents and its
near-duplicates are removed before the top k are kept, with the same ordering and result as
:func:`~eval_pipelines.core.embeddings.dense.search_dense`. A query left with fewer than k
neighbours (all candidates were near-duplicates, say) is retried with four times the fetch,
and then answered by the exact search; :class:`AnnSearch` reports how many were.

Near-duplicate sets are those found among the fetched candidates, so unlike the exact search
they can miss some; a query answered by the exact fallback has its complete set.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np
import numpy.typing as npt

from eval_pipelines.core.embeddings import _nndescent
from eval_pipelines.core.embeddings._arguments import unit_vectors
from eval_pipelines.core.embeddings.dense import _NEAR_DUPLICATE_CAP, _search, search_dense
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.search_request import SearchRequest, check_request, subset_request
from eval_pipelines.core.text import numba_cache
from eval_pipelines.core.text.search_result import SearchResult
from eval_pipelines.core.text.topk_heap import drain_heap, push_largest

numba_cache.configure()

__all__ = [
    "AnnIndex",
    "AnnSearch",
    "RecallResult",
    "build_ann_index",
    "choose_backend",
    "load_ann_index",
    "measure_recall",
    "save_ann_index",
    "search_ann",
]

BACKENDS = ("exact", "pynndescent", "auto")
# Candidates fetched beyond k, the query itself and its exclusions: room for near-duplicates
# and for the graph search's own misses before a query has to be retried.
DEFAULT_OVERFETCH = 16
# Fetch growth for a query that came back short, and how many larger fetches to try before
# the exact search answers it.
_RETRY_GROWTH = 4
_RETRIES = 1
# Once a query would fetch this share of the corpus, the exact search is cheaper and sure.
_EXACT_SHARE = 0.125
_FORMAT = "eval_pipelines.ann/1"


@dataclass(frozen=True)
class AnnIndex:
    """A pynndescent index with what it was built from.

    Attributes
    ----------
    nndescent
        The prepared ``pynndescent.NNDescent`` index (metric ``"dot"``).
    n_docs, dim
        Shape of the indexed vectors.
    fingerprint
        BLAKE2b digest of the vectors' shape and float32 bytes: an index is only ever used
        with the vectors it was built on.
    seed
        Seed of the build.
    build_seconds
        Wall time of the build (graph, search tree and search function).
    """

    nndescent: Any
    n_docs: int
    dim: int
    fingerprint: str
    seed: int
    build_seconds: float


@dataclass(frozen=True)
class AnnSearch:
    """Result of :func:`search_ann`.

    Attributes
    ----------
    result
        Neighbours and near-duplicates, as
        :func:`~eval_pipelines.core.embeddings.dense.search_dense` returns them (near-duplicate
        sets limited to the fetched candidates).
    fallback_queries
        Queries answered by the exact search after the approximate fetch and its retry fell
        short of k admissible neighbours.
    retried_queries
        Queries that needed a larger fetch (including those that then fell back).
    """

    result: SearchResult
    fallback_queries: int
    retried_queries: int


@dataclass(frozen=True)
class RecallResult:
    """recall@k of the approximate search against the exact one on a probe of queries.

    Attributes
    ----------
    recall_at_k
        Share of the exact top-k neighbours that the approximate search also returned.
    probe_queries
        Queries in the probe.
    k
        Neighbours per query.
    """

    recall_at_k: float
    probe_queries: int
    k: int


# --------------------------------------------------------------------------------------------
# Build and storage
# --------------------------------------------------------------------------------------------


def fingerprint(vectors: np.ndarray) -> str:
    """BLAKE2b digest of a float32 matrix's shape and bytes (about 1 GB/s)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(np.asarray(vectors.shape, dtype=np.int64).tobytes())
    flat = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1)
    step = 1 << 24
    for lo in range(0, flat.shape[0], step):
        digest.update(flat[lo : lo + step].data)
    return digest.hexdigest()


def build_ann_index(vectors: npt.ArrayLike, *, seed: int, n_threads: int = 2) -> AnnIndex:
    """Build and prepare a pynndescent index over unit vectors.

    Parameters
    ----------
    vectors
        ``(n_docs, dim)`` float matrix with L2-normalised rows.
    seed
        Seed of NN-descent's random projection trees and sampling.
    n_threads
        numba threads for the build.

    Returns
    -------
    AnnIndex
        The prepared index (graph, search tree and search function ready for queries).

    Notes
    -----
    Metric ``"dot"``: pynndescent treats it as cosine on unit vectors and uses its fast dot
    kernels; the scores this module reports never come from it, since every candidate is
    rescored exactly. pynndescent's defaults otherwise (30 graph neighbours).
    """
    array = unit_vectors(vectors)
    _check_threads(n_threads)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise InputError("seed", seed, "must be an integer")
    started = time.perf_counter()
    nndescent = _nndescent.build(array, seed=int(seed), n_threads=n_threads)
    return AnnIndex(
        nndescent=nndescent,
        n_docs=array.shape[0],
        dim=array.shape[1],
        fingerprint=fingerprint(array),
        seed=int(seed),
        build_seconds=time.perf_counter() - started,
    )


def save_ann_index(index: AnnIndex, path: Path | str) -> None:
    """Pickle an index atomically (temporary file in the same folder, then ``os.replace``).

    Parameters
    ----------
    index
        The index to store.
    path
        Destination file; a crash leaves the old file or the new one, never half a file.
    """
    path = Path(path)
    handle = tempfile.NamedTemporaryFile(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
    )
    try:
        with handle:
            pickle.dump({"format": _FORMAT, "index": index}, handle, protocol=5)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise


def load_ann_index(path: Path | str, vectors: npt.ArrayLike | None = None) -> AnnIndex:
    """Read an index written by :func:`save_ann_index`, checked against its vectors.

    Parameters
    ----------
    path
        The pickle file. Pickles execute code when loaded: only load files this module wrote
        into a folder you control.
    vectors
        The vectors the index will be searched with; refused unless they are the ones it was
        built on (same shape and fingerprint). ``None`` skips the check.

    Returns
    -------
    AnnIndex
        The stored index, ready for queries.

    Raises
    ------
    InputError
        When the file is not such an index or was built on other vectors.
    """
    path = Path(path)
    with path.open("rb") as handle:
        stored = pickle.load(handle)
    if not isinstance(stored, dict) or stored.get("format") != _FORMAT:
        raise InputError("path", str(path), f"is not an approximate index ({_FORMAT})")
    index = stored["index"]
    if vectors is not None:
        array = np.asarray(vectors)
        if array.shape != (index.n_docs, index.dim):
            raise InputError(
                "vectors.shape",
                array.shape,
                f"the index at {path} was built on ({index.n_docs}, {index.dim}) vectors",
            )
        if fingerprint(array) != index.fingerprint:
            raise InputError(
                "vectors", "fingerprint mismatch", f"the index at {path} was built on other vectors"
            )
    return index


# --------------------------------------------------------------------------------------------
# Search
# --------------------------------------------------------------------------------------------


@numba.njit(cache=True, inline="always", fastmath={"reassoc", "contract"})
def _dot(a: np.ndarray, b: np.ndarray) -> np.float32:
    acc = np.float32(0.0)
    for i in range(a.shape[0]):
        acc += a[i] * b[i]
    return acc


@numba.njit(cache=True, nogil=True)
def _rescore(
    vectors: np.ndarray,
    queries: np.ndarray,
    candidates: np.ndarray,
    k: int,
    use_threshold: bool,
    cut: np.float32,
    excl_indptr: np.ndarray,
    excl_indices: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Exact scores of each query's candidates, routed to near-duplicates or the top-k heap.

    Returns neighbours, similarities, the number of admissible candidates per query (short
    when below k), near-duplicate counts and the near-duplicates (ascending) per query.
    """
    n_queries, fetch = candidates.shape
    neighbours = np.full((n_queries, k), -1, dtype=np.int32)
    similarities = np.zeros((n_queries, k), dtype=np.float32)
    admissible = np.zeros(n_queries, dtype=np.int64)
    nd_counts = np.zeros(n_queries, dtype=np.int64)
    nd_buf = np.empty((n_queries, max(fetch, 1)), dtype=np.int32)
    heap_s = np.empty(k, dtype=np.float32)
    heap_i = np.empty(k, dtype=np.int32)
    for r in range(n_queries):
        q = queries[r]
        # Ascending ids: exclusions merge in one walk, near-duplicates come out sorted, and
        # an equal score never displaces a smaller id.
        row = np.sort(candidates[r])
        ep = excl_indptr[r]
        e_end = excl_indptr[r + 1]
        size = 0
        n_ok = 0
        n_nd = 0
        previous = -1
        for j in range(fetch):
            d = row[j]
            if d < 0 or d == q or d == previous:
                continue
            previous = d
            s = _dot(vectors[q], vectors[d])
            if use_threshold and s >= cut:
                nd_buf[r, n_nd] = d
                n_nd += 1
                continue
            while ep < e_end and excl_indices[ep] < d:
                ep += 1
            if ep < e_end and excl_indices[ep] == d:
                continue
            n_ok += 1
            size = push_largest(heap_s, heap_i, size, k, s, d)
        admissible[r] = n_ok
        nd_counts[r] = n_nd
        drain_heap(heap_s, heap_i, size, neighbours[r], similarities[r])
    return neighbours, similarities, admissible, nd_counts, nd_buf


def _check_threads(n_threads: int) -> None:
    if isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1:
        raise InputError("n_threads", n_threads, "must be an integer of at least 1")


def search_ann(
    index: AnnIndex,
    vectors: npt.ArrayLike,
    query_docs: npt.ArrayLike,
    *,
    k: int,
    near_duplicate_threshold: float | None = None,
    exclude_indptr: npt.ArrayLike | None = None,
    exclude_indices: npt.ArrayLike | None = None,
    overfetch: int = DEFAULT_OVERFETCH,
    n_threads: int = 2,
) -> AnnSearch:
    """Approximate top-k cosine neighbours of corpus rows, rescored exactly.

    Same question and result as :func:`~eval_pipelines.core.embeddings.dense.search_dense`,
    except that neighbours come from pynndescent's candidates (recall below 1) and the
    near-duplicate sets only hold near-duplicates among those candidates.

    Parameters
    ----------
    index
        From :func:`build_ann_index` or :func:`load_ann_index`, over ``vectors``.
    vectors
        The ``(n_docs, dim)`` unit vectors the index was built on, used for exact rescoring.
    query_docs
        Row ids to query, 1-d integers.
    k
        Neighbours per query.
    near_duplicate_threshold
        Cosine at which a candidate counts as a near-duplicate, in (1e-5, 1]; ``None`` for
        none.
    exclude_indptr, exclude_indices
        Optional CSR (``len(query_docs) + 1`` pointers) of rows to leave out per query.
    overfetch
        Candidates fetched beyond ``k + 1 + |exclusions|`` per query.
    n_threads
        Threads for the exact fallback (pynndescent's graph search runs on one).

    Returns
    -------
    AnnSearch
        The result, and how many queries were retried and answered exactly.
    """
    array = unit_vectors(vectors)
    if array.shape != (index.n_docs, index.dim):
        raise InputError(
            "vectors.shape", array.shape, f"must be the index's ({index.n_docs}, {index.dim})"
        )
    req = check_request(
        array.shape[0], query_docs, k, near_duplicate_threshold, exclude_indptr, exclude_indices
    )
    if isinstance(overfetch, bool) or not isinstance(overfetch, int) or overfetch < 0:
        raise InputError("overfetch", overfetch, "must be a non-negative integer")
    _check_threads(n_threads)
    return _search_ann(index, array, req, overfetch, n_threads)


def _fetch_sizes(wanted: np.ndarray) -> np.ndarray:
    """Round fetch sizes up to quarter-octave steps (40, 48, 56, 64, 80, ...): queries share a
    few graph searches, and none fetches more than 25% beyond what it needs."""
    wanted = np.maximum(wanted, 4).astype(np.int64)
    step = np.left_shift(1, np.floor(np.log2(wanted)).astype(np.int64) - 2)
    return -(-wanted // step) * step


def _search_ann(
    index: AnnIndex, vectors: np.ndarray, req: SearchRequest, overfetch: int, n_threads: int
) -> AnnSearch:
    n_queries, n_docs, k = req.queries.shape[0], vectors.shape[0], req.k
    neighbours = np.full((n_queries, k), -1, dtype=np.int32)
    similarities = np.zeros((n_queries, k), dtype=np.float32)
    nd_rows: list[np.ndarray] = [np.zeros(0, dtype=np.int32)] * n_queries
    wanted = k + 1 + np.diff(req.exclude_indptr) + overfetch
    fetch = _fetch_sizes(wanted)
    pending = np.arange(n_queries)
    retried: set[int] = set()
    exact_limit = max(k + 1, int(_EXACT_SHARE * n_docs))
    for attempt in range(_RETRIES + 1):
        pending = pending[fetch[pending] < exact_limit]
        short: list[np.ndarray] = []
        for size in np.unique(fetch[pending]):
            rows = pending[fetch[pending] == size]
            sub = subset_request(req, rows)
            candidates = _nndescent.query(index.nndescent, vectors[sub.queries], int(size))
            found = _rescore(
                vectors,
                sub.queries,
                candidates,
                k,
                req.use_threshold,
                req.cut,
                sub.exclude_indptr,
                sub.exclude_indices,
            )
            nb, sims, admissible, nd_counts, nd_buf = found
            neighbours[rows] = nb
            similarities[rows] = sims
            for pos, row in enumerate(rows):
                nd_rows[row] = nd_buf[pos, : nd_counts[pos]]
            short.append(rows[admissible < k])
        pending = np.concatenate(short) if short else np.zeros(0, dtype=np.int64)
        if attempt < _RETRIES:
            retried.update(pending.tolist())
            fetch[pending] *= _RETRY_GROWTH
    # Whatever is still short, or would fetch a large share of the corpus, gets the exact
    # answer (complete near-duplicate set included).
    fallback = np.union1d(pending, np.flatnonzero(fetch >= exact_limit)).astype(np.int64)
    if fallback.size:
        exact = _search(vectors, subset_request(req, fallback), n_threads, _NEAR_DUPLICATE_CAP)
        neighbours[fallback] = exact.neighbours
        similarities[fallback] = exact.similarities
        for pos, row in enumerate(fallback):
            lo, hi = exact.near_duplicate_indptr[pos], exact.near_duplicate_indptr[pos + 1]
            nd_rows[row] = exact.near_duplicate_indices[lo:hi]
    nd_indptr = np.zeros(n_queries + 1, dtype=np.int64)
    np.cumsum([row.shape[0] for row in nd_rows], out=nd_indptr[1:])
    nd_indices = np.concatenate(nd_rows) if nd_rows else np.zeros(0, dtype=np.int32)
    result = SearchResult(
        neighbours=neighbours,
        similarities=similarities,
        near_duplicate_indptr=nd_indptr,
        near_duplicate_indices=nd_indices.astype(np.int32, copy=False),
    )
    return AnnSearch(
        result=result,
        fallback_queries=int(fallback.size),
        retried_queries=len(retried),
    )


# --------------------------------------------------------------------------------------------
# Recall and the automatic choice of backend
# --------------------------------------------------------------------------------------------


def measure_recall(
    index: AnnIndex, vectors: npt.ArrayLike, *, k: int, probe: int = 200, seed: int
) -> RecallResult:
    """recall@k of :func:`search_ann` against the exact search on a seeded probe of rows.

    Parameters
    ----------
    index
        The approximate index over ``vectors``.
    vectors
        The unit vectors it was built on.
    k
        Neighbours per query.
    probe
        Rows queried (all rows when there are fewer), drawn without replacement.
    seed
        Seed of the probe.

    Returns
    -------
    RecallResult
        Share of the exact top-k found by the approximate search (no thresholds or
        exclusions; ``-1`` entries of the exact lists are not counted).
    """
    array = unit_vectors(vectors)
    if isinstance(probe, bool) or not isinstance(probe, int) or probe < 1:
        raise InputError("probe", probe, "must be an integer of at least 1")
    rng = np.random.default_rng(seed)
    queries = np.sort(rng.choice(array.shape[0], size=min(probe, array.shape[0]), replace=False))
    found = search_ann(index, array, queries, k=k).result.neighbours
    truth = search_dense(array, queries, k=k).neighbours
    hits = sum(
        np.isin(want[want >= 0], got[got >= 0]).sum()
        for got, want in zip(found, truth, strict=True)
    )
    total = int((truth >= 0).sum())
    return RecallResult(
        recall_at_k=float(hits / total) if total else 1.0, probe_queries=queries.size, k=k
    )


# Cost model of choose_backend, fitted by
#   .venv/bin/python benchmarks/dense.py --sizes 30k,60k,130k,260k,520k,1m
# (the measurements and the crossover they give are in docs/benchmarks.md). Seconds, with
# s = n_docs / 1e5 and q = n_queries:
#   exact:        _EXACT_PER_QUERY * q * s ** _EXACT_EXPONENT
#   pynndescent:  _BUILD * s ** _BUILD_EXPONENT + _QUERY_EACH * q * s ** _QUERY_EXPONENT
# The build grows faster than the exact search, so the index pays only for many queries. The
# fit leaves out the time every process building an index spends compiling NN-descent (see
# warmup.py).
_EXACT_PER_QUERY = 4.6e-4
_EXACT_EXPONENT = 0.90
_BUILD = 13.2
_BUILD_EXPONENT = 1.08
_QUERY_EACH = 5.4e-5
_QUERY_EXPONENT = 0.27


def choose_backend(requested: str, n_docs: int, n_queries: int) -> str:
    """Resolve a requested backend; ``"auto"`` picks the faster one end to end.

    Parameters
    ----------
    requested
        ``"exact"``, ``"pynndescent"`` or ``"auto"``.
    n_docs
        Rows searched.
    n_queries
        Queries the evaluation will ask.

    Returns
    -------
    str
        ``"exact"`` or ``"pynndescent"``. ``"auto"`` gives ``"pynndescent"`` only when the
        measured cost model predicts that building the index and querying it takes less time
        than the exact search. The build grows with ``n_docs`` about as fast as the exact
        search does for a fixed number of queries, so what decides is ``n_queries``: the
        index pays from about 33,000 queries at 100k records and 45,000 at 1M, never for an
        evaluation of 5,000.
    """
    if requested not in BACKENDS:
        raise InputError("backend", requested, f"must be one of {BACKENDS}")
    for name, value in (("n_docs", n_docs), ("n_queries", n_queries)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise InputError(name, value, "must be a positive integer")
    if requested != "auto":
        return requested
    scale = n_docs / 1e5
    exact = _EXACT_PER_QUERY * n_queries * scale**_EXACT_EXPONENT
    approximate = _BUILD * scale**_BUILD_EXPONENT + _QUERY_EACH * n_queries * (
        scale**_QUERY_EXPONENT
    )
    return "pynndescent" if approximate < exact else "exact"
