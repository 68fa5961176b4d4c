"""The pure half of a workflow's ``chat`` extract node: the node's field schema as a JSON
schema, the extraction prompt, and the strict reading of the model's answer.

The answer is one JSON object whose keys are the schema's ``source`` names (the keys every
node's raw output uses, so the values flow into the field-by-field golden scoring exactly as
an invoice2data node's do): a header field is a string (``string`` and ``date`` fields: a
date as ``YYYY-MM-DD`` text), a number or a boolean, or null when the document does not give
it; a line-item table is an array of objects keyed by its columns' sources, each cell typed
the same way. Every key must be present and no other key may be: the JSON schema sent as
``response_format`` says so (OpenAI's ``strict`` mode: every property required,
``additionalProperties: false``, nullable types), and :func:`parse_extraction` checks it
again, because an endpoint asked for ``json_object`` or nothing, or one that ignores schemas,
can answer anything. A bad answer is a failure with its reason, never an exception.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from eval_pipelines.core.chat.answer import json_object_of
from eval_pipelines.core.chat.settings import ChatSettings
from eval_pipelines.core.results import JsonResult
from eval_pipelines.core.workflows.schema import Column, Field, Schema

SCHEMA_NAME = "extraction"
DEFAULT_EXTRACTION_PROMPT = (
    "You extract fields from a document. Answer with one JSON object only, with exactly the "
    "keys listed under Fields: each value as the type given, or null when the document does "
    "not give it; a table is a list of row objects with exactly the columns listed for it."
)
# The JSON type of each value type; dates travel as ISO text.
JSON_TYPES = {"string": "string", "date": "string", "number": "number", "boolean": "boolean"}
PROMPT_TYPES = {
    "string": "text",
    "date": "date YYYY-MM-DD",
    "number": "number",
    "boolean": "true/false",
}


def _value_schema(kind: str, name: str) -> dict[str, Any]:
    return {"type": [JSON_TYPES[kind], "null"], "description": name}


def _table_schema(field: Field) -> dict[str, Any]:
    return {
        "type": "array",
        "description": field.name,
        "items": {
            "type": "object",
            "properties": {c.source: _value_schema(c.type, c.name) for c in field.columns},
            "required": [c.source for c in field.columns],
            "additionalProperties": False,
        },
    }


def extraction_json_schema(schema: Schema) -> dict[str, Any]:
    """The answer's JSON schema: an object with one property per field (its ``source``),
    every one required, nothing else allowed."""
    return {
        "type": "object",
        "properties": {
            f.source: _table_schema(f) if f.is_table else _value_schema(f.type, f.name)
            for f in schema.fields
        },
        "required": [f.source for f in schema.fields],
        "additionalProperties": False,
    }


def extraction_format(settings: ChatSettings, schema: Schema) -> dict[str, Any] | None:
    """The ``response_format`` the node's settings ask for: the schema's JSON schema
    (``json_schema``, the default), any JSON object (``json_object``), a JSON object with the
    schema inside (``json_object_schema``, llama-cpp-python's server's form) or none (``none``)."""
    if settings.response_format == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {
                "name": SCHEMA_NAME,
                "strict": True,
                "schema": extraction_json_schema(schema),
            },
        }
    if settings.response_format == "json_object":
        return {"type": "json_object"}
    if settings.response_format == "json_object_schema":
        return {"type": "json_object", "schema": extraction_json_schema(schema)}
    return None


def _field_line(key: str, kind: str, name: str, indent: str = "") -> str:
    return f"{indent}- {key} ({kind}): {name}"


def extraction_prompt(document_text: str, schema: Schema) -> str:
    """The user message: the fields after a line ``Fields:`` (one line ``- key (type): display
    name`` per field; a table's columns indented under it), then the document's text after a
    line ``Document:``."""
    lines = ["Fields:"]
    for field in schema.fields:
        if field.is_table:
            lines.append(_field_line(field.source, "table", field.name))
            lines.extend(
                _field_line(c.source, PROMPT_TYPES[c.type], c.name, "  ") for c in field.columns
            )
        else:
            lines.append(_field_line(field.source, PROMPT_TYPES[field.type], field.name))
    lines.extend(["", "Document:", document_text])
    return "\n".join(lines)


def extraction_messages(
    settings: ChatSettings, document_text: str, schema: Schema
) -> list[tuple[str, str]]:
    """System message (the settings' ``prompt`` or the default) and the user message."""
    return [
        ("system", settings.prompt or DEFAULT_EXTRACTION_PROMPT),
        ("user", extraction_prompt(document_text, schema)),
    ]


@dataclasses.dataclass(frozen=True)
class ParsedExtraction(JsonResult):
    """The raw output of a good answer (keyed by source), or ``failure``: why there is none."""

    output: dict[str, Any] | None
    failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


def _failed(reason: str) -> ParsedExtraction:
    return ParsedExtraction(None, reason)


def _type_error(value: Any, kind: str) -> str | None:
    """Why ``value`` is not a JSON value of ``kind`` (None: it is, or it is null)."""
    if value is None:
        return None
    if kind == "number":
        good = (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    elif kind == "boolean":
        good = isinstance(value, bool)
    else:  # string, date
        good = isinstance(value, str)
    return None if good else f"is {json.dumps(value)[:40]}, not {PROMPT_TYPES[kind]} or null"


def _keys_error(value: dict[str, Any], expected: list[str], at: str) -> str | None:
    missing = [k for k in expected if k not in value]
    extra = sorted(set(value) - set(expected))
    if missing:
        return f"{at} lacks key(s) {missing}"
    if extra:
        return f"{at} has unexpected key(s) {extra}"
    return None


def _row_error(row: Any, columns: tuple[Column, ...], at: str) -> str | None:
    if not isinstance(row, dict):
        return f"{at} is not an object"
    problem = _keys_error(row, [c.source for c in columns], at)
    if problem:
        return problem
    for column in columns:
        wrong = _type_error(row[column.source], column.type)
        if wrong:
            return f"{at}.{column.source} {wrong}"
    return None


def parse_extraction(content: str | None, schema: Schema) -> ParsedExtraction:
    """The raw output in ``content``, checked strictly against ``schema``: a JSON object
    with exactly the fields' sources as keys, each value of its type or null, each table an
    array (or null) of objects with exactly its columns."""
    value, problem = json_object_of(content)
    if value is None:
        return _failed(problem or "empty answer")
    problem = _keys_error(value, [f.source for f in schema.fields], "answer")
    if problem:
        return _failed(problem)
    for field in schema.fields:
        item = value[field.source]
        at = f"answer's {field.source}"
        if not field.is_table:
            wrong = _type_error(item, field.type)
            if wrong:
                return _failed(f"{at} {wrong}")
            continue
        if item is None:
            continue
        if not isinstance(item, list):
            return _failed(f"{at} is not a list of rows")
        for index, row in enumerate(item):
            wrong = _row_error(row, field.columns, f"{at}[{index}]")
            if wrong:
                return _failed(wrong)
    return ParsedExtraction(value)
