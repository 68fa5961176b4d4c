"""The numba kernel of the exact sparse search's pruned MaxScore search (:func:`pruned_kernel`,
``prune=True``) and its passes. :mod:`eval_pipelines.core.text.retrieval` checks the arguments
and drives it; the constants below bound its rounding and weigh its choices."""

from __future__ import annotations

import numba
import numpy as np

from eval_pipelines.core.text import numba_cache
from eval_pipelines.core.text.row_scores import exact_scores
from eval_pipelines.core.text.search_kernels import posting_span
from eval_pipelines.core.text.topk_heap import drain_heap, push_largest, sift_down, sift_up, worse

numba_cache.configure()

# Pruning slack on scores in [0, 1]. A partial or full float32 sum of m products is off its
# real value by at most about m * 2**-24 (each product and addition rounds once, and the
# products sum to at most 1 by Cauchy-Schwarz), so 1e-4 covers queries of up to ~800
# features outright; longer queries add 4 * m * 2**-24 on top (see _ROUNDING_PER_FEATURE).
_PRUNE_MARGIN = 1e-4
_ROUNDING_PER_FEATURE = 4.0 * 2.0**-24
# Relative cost of rescoring one document-row entry (a lookup into the query's dense weight
# array, random access) against reading one posting (sequential). The pruned search weighs
# reading a further posting list against rescoring the candidates that list would eliminate.
RESCORE_COST = 2.0
# Bins of the histogram of how far each candidate is from dropping out (see _live_pass).
_GAP_BINS = 64
# Lowest candidate level: any positive partial score (the smallest positive float32).
_POOL_LEVEL_MIN = 1e-45


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
def pruned_kernel(
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
    """MaxScore search of documents ``[lo, hi)``, with the results of
    :func:`~eval_pipelines.core.text.search_kernels.search_kernel`.

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

    Queries are given as in the plain scan. ``theta_floor[i]`` is a known lower bound of
    query ``i``'s k-th neighbour score (the k-th score among documents searched before, in
    other segments; 0 when none is known): theta starts there, so a range searched after
    others prunes from its first lists on. Documents below it may then be missing from this
    range's top-k, which the merge with those other results makes good.

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
                start, stop = posting_span(post_indptr, post_indices, f, lo, hi, whole)
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
                            n_scored, entries = exact_scores(
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
            rescan = entries * RESCORE_COST > total
            if rescan:
                acc[:] = 0.0
                for j in range(m):
                    wq = q_data[first + j]
                    for kk in range(starts[j], stops[j]):
                        acc[post_indices[kk] - lo_u] += wq * post_data[kk]
                read += total
            else:
                n_scored, entries = exact_scores(
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
