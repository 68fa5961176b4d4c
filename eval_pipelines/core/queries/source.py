"""A table an evaluate query reads: a loaded data table or a case's records, in table order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import polars as pl

# Column kinds a query can bind and predict or estimate.
COLUMN_KINDS = ("string", "integer", "float", "boolean", "string_list")


@dataclass(frozen=True)
class Source:
    """One version of a table, rows in their stored order (a row's position is its index).

    ``kind`` is ``table`` (loaded with ``table load``) or ``case`` (a case's records: columns
    ``record_key``, ``text``, ``label`` and its metadata columns). ``links`` maps a column to
    the table whose ``key`` column its values name (one hop, for ``$get: "col.field"``).
    """

    name: str
    version: str
    kind: str
    frame: pl.DataFrame
    key: str | None = None
    links: Mapping[str, str] = field(default_factory=dict)

    @property
    def n_rows(self) -> int:
        return self.frame.height


def column_kind(dtype: pl.DataType) -> str | None:
    """The query-facing kind of a polars dtype, or None when a query cannot use it."""
    if dtype == pl.String or dtype == pl.Categorical:
        return "string"
    if dtype.is_integer():
        return "integer"
    if dtype.is_float():
        return "float"
    if dtype == pl.Boolean:
        return "boolean"
    if isinstance(dtype, pl.List) and dtype.inner == pl.String:
        return "string_list"
    return None
