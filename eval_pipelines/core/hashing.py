"""Content hashes: versions of records, trees and memos, and sample hashes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

import polars as pl


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


def hash_frame(frame: pl.DataFrame, *, length: int = 16) -> str:
    """Content version of a frame: independent of row and column order, sensitive to every value.

    Each row is rendered as text (unit-separator between cells, nulls marked) and the sorted
    rows are hashed with SHA-256, so the version is stable across polars releases.
    """
    columns = sorted(frame.columns)
    cells = [
        pl.col(name).cast(pl.String).fill_null("\\N").str.replace_all("\x1f", " ", literal=True)
        for name in columns
    ]
    rows = frame.select(pl.concat_str(cells, separator="\x1f").alias("row")).sort("row")
    return hash_strings([canonical_json(columns), *rows.get_column("row").to_list()], length=length)
