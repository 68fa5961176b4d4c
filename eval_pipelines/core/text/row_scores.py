"""Exact scores of candidate documents from their rows, for the pruned search
(:mod:`eval_pipelines.core.text.pruned_search`): summed in the plain scan's order, so they are
bit-identical to its scores, with the rows prefetched as they lie anywhere in memory."""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from eval_pipelines.core.text import numba_cache

numba_cache.configure()


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
def exact_scores(
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
