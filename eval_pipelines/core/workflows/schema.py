"""A node's field schema: every field and table column has a stable id and a display name.

Labels and scores are keyed by id, so renaming a field (changing ``name``) keeps every label
attached to it. ``source`` is the key the node's raw output uses for the value. A workflow
must name it for every field and column (:func:`parse_schema` with ``require_source``): it
used to default to the display name at every parse, so a rename silently pointed the field at
a key the node never outputs and its values were scored as misses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.hashing import hash_json

VALUE_TYPES = ("string", "number", "date", "boolean")
FIELD_TYPES = (*VALUE_TYPES, "table")
ID_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True)
class Column:
    """One column of a table field."""

    id: str
    name: str
    type: str
    source: str


@dataclass(frozen=True)
class Field:
    """A header field (``type`` a value type) or a line-item table (``type == "table"``)."""

    id: str
    name: str
    type: str
    source: str
    columns: tuple[Column, ...] = ()

    @property
    def is_table(self) -> bool:
        return self.type == "table"

    def column(self, column_id: str) -> Column | None:
        return next((c for c in self.columns if c.id == column_id), None)


@dataclass(frozen=True)
class Schema:
    """The output fields of one node."""

    fields: tuple[Field, ...]

    def field(self, field_id: str) -> Field | None:
        return next((f for f in self.fields if f.id == field_id), None)

    def table_of_column(self, column_id: str) -> Field | None:
        """The table that has a column with this id (column ids are unique in a schema)."""
        return next((f for f in self.fields if f.column(column_id) is not None), None)

    def fingerprint(self) -> str:
        """The schema's structure (ids, types, columns), without names or sources: renames
        leave it unchanged, so it is what schema-drift flags compare."""
        return hash_json([[f.id, f.type, [[c.id, c.type] for c in f.columns]] for f in self.fields])

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {
                "id": f.id,
                "name": f.name,
                "type": f.type,
                "source": f.source,
                **(
                    {
                        "columns": [
                            {"id": c.id, "name": c.name, "type": c.type, "source": c.source}
                            for c in f.columns
                        ]
                    }
                    if f.is_table
                    else {}
                ),
            }
            for f in self.fields
        ]


def _text(item: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = item.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}.{key}", value, "must be a non-empty string")
    return value


SOURCE_RULE = (
    "name the key the node outputs for this value (e.g. source: amount); it is never taken "
    "from the display name, so renaming the field keeps its values"
)


def _identity(
    item: Any, where: str, seen: dict[str, str], require_source: bool
) -> tuple[str, str, str]:
    if not isinstance(item, dict):
        raise InputError(where, item, "must be a mapping with at least 'id' and 'name'")
    field_id = _text(item, "id", where)
    if not ID_PATTERN.fullmatch(field_id):
        raise InputError(
            f"{where}.id", field_id, "an id is a letter then up to 63 letters, digits or '_'"
        )
    if field_id in seen:
        raise InputError(
            f"{where}.id", field_id, f"field ids must be unique; already used by {seen[field_id]}"
        )
    seen[field_id] = where
    name = _text(item, "name", where)
    if require_source and item.get("source") is None:
        raise InputError(f"{where}.source", None, SOURCE_RULE)
    return field_id, name, _text(item, "source", where, default=name)


def parse_schema(document: Any, where: str, *, require_source: bool = False) -> Schema:
    """Validate a ``schema`` mapping: ``{fields: [{id, name, type, source, [columns]}]}``.

    Ids are unique across fields and columns. With ``require_source`` (a workflow's schema)
    every field and column names its ``source``; without it (scoring tests, stored revisions,
    which always carry it) a missing source is the name. Raises :class:`InputError` naming
    the path of the offending entry.
    """
    if not isinstance(document, dict) or not isinstance(document.get("fields"), list):
        raise InputError(where, document, "must be a mapping with a 'fields' list")
    if not document["fields"]:
        raise InputError(f"{where}.fields", [], "declare at least one field")
    seen: dict[str, str] = {}
    fields = []
    for index, item in enumerate(document["fields"]):
        at = f"{where}.fields[{index}]"
        field_id, name, source = _identity(item, at, seen, require_source)
        kind = item.get("type", "string")
        if kind not in FIELD_TYPES:
            raise InputError(f"{at}.type", kind, f"must be one of {', '.join(FIELD_TYPES)}")
        columns: list[Column] = []
        if kind == "table":
            raw_columns = item.get("columns")
            if not isinstance(raw_columns, list) or not raw_columns:
                raise InputError(f"{at}.columns", raw_columns, "a table declares its columns")
            for position, column in enumerate(raw_columns):
                column_at = f"{at}.columns[{position}]"
                column_id, column_name, column_source = _identity(
                    column, column_at, seen, require_source
                )
                column_type = column.get("type", "string")
                if column_type not in VALUE_TYPES:
                    raise InputError(
                        f"{column_at}.type", column_type, f"must be one of {', '.join(VALUE_TYPES)}"
                    )
                columns.append(Column(column_id, column_name, column_type, column_source))
        elif "columns" in item:
            raise InputError(f"{at}.columns", item["columns"], "only a table field has columns")
        fields.append(Field(field_id, name, kind, source, tuple(columns)))
    return Schema(tuple(fields))
