"""Content hashes: versions of records, trees and memos, and sample hashes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no insignificant whitespace, so equal values hash equally."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def hash_json(value: Any, *, length: int = 16) -> str:
    """Short SHA-256 hex digest of a value's canonical JSON."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:length]


def hash_strings(values: Iterable[str], *, length: int = 16) -> str:
    """Short SHA-256 hex digest of strings in the given order, each terminated by a NUL byte."""
    digest = hashlib.sha256()
    for value in values:
        digest.update(value.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:length]


# Rows rendered and sorted at a time by hash_frame: bounds its memory to about this many rows
# (~0.3 GB for records of ~400 rendered bytes) instead of every row of a large case at once.
HASH_BATCH_ROWS = 250_000
_ARROW_SLICE_ROWS = 65_536
_SEPARATOR = "\x1f"
_TERMINATOR = "\0"


def _update_with_values(digest: Any, values: pl.Series) -> None:
    """Feed the concatenated UTF-8 bytes of a string column (no nulls) to ``digest``.

    Reads Arrow's contiguous value buffer instead of making a Python string per row, which
    cost more than the hashing itself.
    """
    array = values.to_arrow()
    if not isinstance(array, pa.LargeStringArray):
        array = array.cast(pa.large_string())
    if len(array) == 0:
        return
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)
    first, last = offsets[array.offset], offsets[array.offset + len(array)]
    digest.update(memoryview(array.buffers()[2])[first:last])


def hash_frame(frame: pl.DataFrame, *, length: int = 16) -> str:
    """Content version of a frame: independent of row and column order, sensitive to every value.

    Each row is rendered as text (unit-separator between cells, nulls marked) and the sorted
    rows are hashed with SHA-256, so the version is stable across polars releases. The
    digest is that of :func:`hash_strings` over the columns' canonical JSON followed by the
    sorted rows.

    Rows are sorted in batches without changing the result. No cell contains the separator
    (it is replaced by a space), so when two rows' first cells differ, their order is that of
    the first cells each followed by the separator: neither is a prefix of the other, so
    they differ within that prefix. Sorting the rows by that prefix, then each group of rows
    sharing one prefix (gathered into batches of about :data:`HASH_BATCH_ROWS` rows) by the
    whole row, gives the order of one sort of all rows, while only a batch of rendered rows
    is in memory at a time.
    """
    columns = sorted(frame.columns)
    digest = hashlib.sha256()
    digest.update(canonical_json(columns).encode())
    digest.update(b"\0")
    if frame.height == 0:
        return digest.hexdigest()[:length]
    cells = [
        pl.col(name).cast(pl.String).fill_null("\\N").str.replace_all(_SEPARATOR, " ", literal=True)
        for name in columns
    ]
    # A row's text: cells joined by the separator, then the NUL that hash_strings puts after
    # each string. Appending the NUL keeps the order of rows: where one row is a proper
    # prefix of another it still sorts first, and elsewhere the first difference is unmoved.
    pieces: list[pl.Expr] = []
    for cell in cells:
        pieces += [cell, pl.lit(_SEPARATOR)]
    pieces[-1] = pl.lit(_TERMINATOR)
    row = pl.concat_str(pieces)
    lead = frame.select(pl.concat_str(pieces[:2]).alias("lead")).get_column("lead")
    # Rank the distinct prefixes and sort the rows by rank: sorting integers is about 4x
    # cheaper than sorting the strings, and the prefixes repeat (labels, say).
    distinct = lead.unique().sort()
    rank = lead.replace_strict(
        distinct, pl.int_range(0, distinct.len(), dtype=pl.UInt32, eager=True)
    )
    order = rank.arg_sort()
    sorted_rank = rank.gather(order).cast(pl.Int64).to_numpy()
    group_starts = np.flatnonzero(np.diff(sorted_rank, prepend=-1))
    del lead, distinct, rank, sorted_rank  # only the order and the group starts are needed
    lo = 0
    while lo < frame.height:
        # The first group start at or after lo + HASH_BATCH_ROWS ends the batch (a group larger
        # than a batch stays whole).
        following = np.searchsorted(group_starts, lo + HASH_BATCH_ROWS)
        hi = int(group_starts[following]) if following < group_starts.shape[0] else frame.height
        rows = frame[order[lo:hi]].select(row.sort().alias("row")).get_column("row")
        # Converted to Arrow a slice at a time: the conversion copies the strings.
        for start in range(0, rows.len(), _ARROW_SLICE_ROWS):
            _update_with_values(digest, rows.slice(start, _ARROW_SLICE_ROWS))
        lo = hi
    return digest.hexdigest()[:length]
