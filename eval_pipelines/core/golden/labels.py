"""Turning a case's expected values, as authored, into labels keyed by field and column id.

Labels are stored keyed by identity, never by display name, so renaming a field keeps every
label attached to it. At authoring time a key may be an id or a current display name; it is
converted here, once. What maps onto nothing is reported back as unmapped paths (so the
author sees exactly what the case does not cover) and is not stored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.workflows.output import normalise_value
from eval_pipelines.core.workflows.schema import Column, Field, Schema

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class ResolvedLabels:
    """A case's labels in stored form.

    Attributes
    ----------
    labels
        Field id to expected value: a scalar for a header field, a list of rows (each keyed by
        column id) for a table. A label naming a bare column is kept under the column id as
        given; scoring leaves it out.
    unmapped
        Paths of authored values that map onto nothing (``totals.vat``, ``lines[2].colour``).
    key_columns
        Table id to the column ids its rows are matched by; tables absent here match by
        position.
    """

    labels: dict[str, Any]
    unmapped: tuple[str, ...]
    key_columns: dict[str, tuple[str, ...]]

    def to_json(self) -> dict[str, Any]:
        return {
            "labels": self.labels,
            "unmapped": list(self.unmapped),
            "keyColumns": {table: list(cols) for table, cols in self.key_columns.items()},
        }


def resolve_labels(
    schema: Schema, raw: Any, *, from_run: bool = False, node_id: str | None = None
) -> ResolvedLabels:
    """Convert authored labels to stored form, keyed by field and column id.

    Parameters
    ----------
    schema
        The scored node's current schema.
    raw
        A JSON object. Keys are field ids or current field names. A header field's value is a
        scalar; a table's is a list of rows (matched by position) or
        ``{"key": [column, ...], "rows": [...]}`` (matched by those columns). Row keys are
        column ids or names of that table.
    from_run
        The values come from an approved run's output: keys are field ids only and tables
        always match by position (the approved table came from the same document, in the same
        order), so a ``key`` is dropped.
    node_id
        The scored node, named in the error when nothing maps.

    Returns
    -------
    ResolvedLabels

    Raises
    ------
    InputError
        ``raw`` is not an object; a value has the wrong shape for its field; two keys name the
        same field; a key column is not a column of its table; or no key maps onto a field.
    """
    if not isinstance(raw, Mapping):
        raise InputError("labels", raw, "must be a JSON object keyed by field id")
    labels: dict[str, Any] = {}
    written_as: dict[str, str] = {}
    unmapped: list[str] = []
    key_columns: dict[str, tuple[str, ...]] = {}
    mapped_fields = 0
    for key, value in raw.items():
        target = _lookup(schema, key, by_name=not from_run)
        if target is None:
            unmapped.extend(_leaf_paths(str(key), value))
            continue
        if target in written_as:
            raise InputError(
                f"labels.{key}", value, f"labels {target} twice (also as {written_as[target]!r})"
            )
        written_as[target] = str(key)
        field = schema.field(target)
        if field is None:
            # A bare column: one value per row, so nothing to compare; kept so scoring can
            # list it as left out rather than silently dropping the author's work.
            labels[target] = value
            continue
        mapped_fields += 1
        if not field.is_table:
            if isinstance(value, Mapping | list):
                raise InputError(f"labels.{key}", value, "a header field's label is one value")
            check_type(value, field.type, f"labels.{key}")
            labels[target] = value
            continue
        rows, keys = _table_rows(field, key, value, from_run=from_run)
        labels[target] = [
            _resolve_row(field, row, f"{key}[{index}]", unmapped) for index, row in enumerate(rows)
        ]
        if keys:
            _require_key_cells(field, labels[target], keys, where=f"labels.{key}")
            key_columns[target] = keys
    if mapped_fields == 0:
        node = f"node {node_id}'s" if node_id else "the scored node's"
        bare = list(labels)  # with no field mapped, only bare columns were stored
        rule = f"no label maps onto a field of {node} schema; unmapped: {_listing(unmapped)}"
        if bare:
            rule += f"; bare columns (label their table instead): {', '.join(bare)}"
        raise InputError("labels", raw, rule)
    return ResolvedLabels(labels=labels, unmapped=tuple(unmapped), key_columns=key_columns)


def _lookup(schema: Schema, key: Any, *, by_name: bool) -> str | None:
    """The id a top-level key names: ids first (they are what is stored), then names."""
    if not isinstance(key, str):
        return None
    if schema.field(key) is not None or schema.table_of_column(key) is not None:
        return key
    if not by_name:
        return None
    field = next((f for f in schema.fields if f.name == key), None)
    if field is not None:
        return field.id
    column = next((c for f in schema.fields for c in f.columns if c.name == key), None)
    return column.id if column is not None else None


def _column(table: Field, key: Any) -> Column | None:
    """The column of ``table`` a row key or key-column entry names (id first, then name)."""
    if not isinstance(key, str):
        return None
    return table.column(key) or next((c for c in table.columns if c.name == key), None)


def _table_rows(
    table: Field, key: str, value: Any, *, from_run: bool
) -> tuple[list[Any], tuple[str, ...]]:
    """A table label's rows and its key column ids (empty: match by position)."""
    if isinstance(value, list):
        return value, ()
    if not isinstance(value, Mapping) or not isinstance(value.get("rows"), list):
        rule = 'a table\'s label is a list of rows or {"key": [...], "rows": [...]}'
        raise InputError(f"labels.{key}", value, rule)
    raw_keys = value.get("key")
    if from_run or raw_keys is None:
        return value["rows"], ()
    if isinstance(raw_keys, str):
        raw_keys = [raw_keys]
    if not isinstance(raw_keys, list) or not raw_keys:
        raise InputError(f"{table.id}.key", raw_keys, "must be a non-empty list of columns")
    keys: list[str] = []
    for raw_key in raw_keys:
        column = _column(table, raw_key)
        if column is None:
            columns = ", ".join(c.id for c in table.columns)
            raise InputError(
                f"{table.id}.key",
                raw_key,
                f"not a column of table {table.id} (its columns: {columns})",
            )
        if column.id not in keys:
            keys.append(column.id)
    return value["rows"], tuple(keys)


def _resolve_row(table: Field, row: Any, path: str, unmapped: list[str]) -> dict[str, Any]:
    if not isinstance(row, Mapping):
        raise InputError(f"labels.{path}", row, "a row is a JSON object keyed by column id")
    resolved: dict[str, Any] = {}
    for key, value in row.items():
        column = _column(table, key)
        if column is None:
            unmapped.extend(_leaf_paths(f"{path}.{key}", value))
            continue
        if column.id in resolved:
            raise InputError(f"labels.{path}.{key}", value, f"labels column {column.id} twice")
        if isinstance(value, Mapping | list):
            raise InputError(f"labels.{path}.{key}", value, "a cell's label is one value")
        check_type(value, column.type, f"labels.{path}.{key}")
        resolved[column.id] = value
    return resolved


_TYPE_RULES = {
    "number": 'must be a number (e.g. 1267.39 or "1,267.39")',
    "date": "must be a date written YYYY-MM-DD",
    "boolean": "must be true or false",
}


def check_type(value: Any, value_type: str, path: str) -> None:
    """Refuse a label its field's type can never match (``"abc"`` for a number): such a case
    could never pass. ``null`` is allowed (the value is expected to be absent)."""
    if value is None or value_type == "string":
        return
    normal = normalise_value(value, value_type)
    fits = {
        "number": isinstance(normal, float),
        "date": isinstance(normal, str) and _ISO_DATE.fullmatch(normal) is not None,
        "boolean": isinstance(normal, bool),
    }[value_type]
    if not fits:
        raise InputError(
            path, value, f"{_TYPE_RULES[value_type]} (the field's type is {value_type})"
        )


def _require_key_cells(
    table: Field, rows: list[dict[str, Any]], keys: tuple[str, ...], *, where: str
) -> None:
    # A row without its key cannot be matched to anything, which would score it as missing
    # for a reason that is the label's fault, not the extraction's.
    for index, row in enumerate(rows):
        missing = [k for k in keys if k not in row]
        if missing:
            raise InputError(
                f"{where}.rows[{index}]",
                row,
                f"a row of {table.id} matched by key labels every key column "
                f"(missing: {', '.join(missing)})",
            )


def _leaf_paths(path: str, value: Any) -> list[str]:
    """Every value under an unmapped key, as a path, so a nested object reports its leaves."""
    if isinstance(value, Mapping) and value:
        return [p for k, v in value.items() for p in _leaf_paths(f"{path}.{k}", v)]
    if isinstance(value, list) and value:
        return [p for i, v in enumerate(value) for p in _leaf_paths(f"{path}[{i}]", v)]
    return [path]


def _listing(paths: list[str]) -> str:
    return ", ".join(paths) if paths else "(none)"
