"""The base of every typed result the API returns: a frozen dataclass whose ``to_json()`` is
the documented JSON document (camelCase keys), built once, where the CLI prints or a caller
wants a document. Python callers read attributes; the JSON shape is the documents' contract."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import date, datetime
from pathlib import PurePath
from typing import Any

JSON_NAME = "json_name"
OMIT_NONE = "omit_none"


def json_field(name: str | None = None, *, omit_none: bool = False, **options: Any) -> Any:
    """A dataclass field whose JSON key is ``name`` (default: the field's name in camelCase),
    left out of the document when ``omit_none`` and the value is None."""
    metadata = {JSON_NAME: name, OMIT_NONE: omit_none}
    return dataclasses.field(metadata=metadata, **options)


def camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclasses.dataclass(frozen=True)
class JsonResult:
    """Subclass with ``@dataclass(frozen=True)``; fields are snake_case Python names."""

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {}
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            if spec.metadata.get(OMIT_NONE) and value is None:
                continue
            document[spec.metadata.get(JSON_NAME) or camel_case(spec.name)] = to_jsonable(value)
        return document


def to_jsonable(value: Any) -> Any:
    """Results, mappings, sequences and paths as plain JSON values (datetimes as ``str()``, as
    the CLI always printed them)."""
    if isinstance(value, JsonResult):
        return value.to_json()
    if isinstance(value, Mapping):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | frozenset | set):
        return [to_jsonable(item) for item in value]
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, datetime | date):
        return str(value)
    return value
