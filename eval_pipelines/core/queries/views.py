"""Rows of a source as a query sees them: a subset (a tenant's rows) in table order, whose
columns are read by name or through one link hop (``link.column``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.queries.source import Source, column_kind


class TableView:
    """``rows`` (indices into the source's frame) of a source; position ``i`` of the view is
    the ``i``-th of those rows, so positions count within a narrowed scope."""

    def __init__(
        self, source: Source, resolve: Callable[[str], Source], rows: np.ndarray | None = None
    ) -> None:
        self.source = source
        self._resolve = resolve
        self.rows = np.arange(source.n_rows) if rows is None else rows
        self._columns: dict[str, pl.Series] = {}

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def n_rows(self) -> int:
        return len(self.rows)

    def narrowed(self, mask: np.ndarray) -> TableView:
        """The view of the rows where ``mask`` (over this view's positions) is true."""
        return TableView(self.source, self._resolve, self.rows[mask])

    def has(self, path: str) -> bool:
        try:
            self.column(path, field="")
        except InputError:
            return False
        return True

    def kind(self, path: str, *, field: str) -> str:
        kind = column_kind(self.column(path, field=field).dtype)
        if kind is None:
            raise InputError(field, path, "is a column of a type queries cannot use")
        return kind

    def column(self, path: str, *, field: str) -> pl.Series:
        """The values of ``path`` for the view's rows; refuses a column that resolves nowhere
        (a typo, a dropped column, a link that is not one) by name, never binds nothing."""
        if path not in self._columns:
            self._columns[path] = self._full_column(path, field=field)
        series = self._columns[path]
        return (
            series
            if len(self.rows) == len(series) and _is_identity(self.rows)
            else (series.gather(self.rows))
        )

    def _full_column(self, path: str, *, field: str) -> pl.Series:
        frame = self.source.frame
        if "." not in path:
            if path not in frame.columns:
                raise InputError(
                    field,
                    path,
                    f"no column {path!r} in {self.name!r} (columns: {', '.join(frame.columns)})",
                )
            return frame.get_column(path)
        link, _, target = path.partition(".")
        if link not in frame.columns:
            raise InputError(
                field, path, f"no column {link!r} in {self.name!r} to follow to {target!r}"
            )
        linked_name = self.source.links.get(link)
        if linked_name is None:
            raise InputError(
                field,
                path,
                f"column {link!r} of {self.name!r} is not a link (load the table with "
                f"`eval-pipelines table load {self.name} --file PATH --link {link}=TABLE` "
                "to follow it)",
            )
        linked = self._resolve(linked_name)
        if linked.key is None or target not in linked.frame.columns:
            raise InputError(
                field,
                path,
                f"no column {target!r} in linked table {linked.name!r} "
                f"(columns: {', '.join(linked.frame.columns)})",
            )
        keys = linked.frame.get_column(linked.key).cast(pl.String)
        values = linked.frame.get_column(target)
        lookup = pl.DataFrame({"__key": keys, "__value": values})
        left = pl.DataFrame({"__key": frame.get_column(link).cast(pl.String)})
        joined = left.join(lookup, on="__key", how="left", maintain_order="left")
        return joined.get_column("__value").alias(path)


def _is_identity(rows: np.ndarray) -> bool:
    return len(rows) == 0 or (rows[0] == 0 and rows[-1] == len(rows) - 1)
