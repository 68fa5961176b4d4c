"""From a node's raw output to values keyed by field id, normalised for comparison.

Nodes return whatever their extractor gives, keyed by the schema's ``source`` names. Scoring
compares :func:`map_output` of that against labels normalised with the same
:func:`normalise_value`, so ``" ACME  Ltd "`` equals ``"ACME Ltd"`` and ``"1,234.50"`` equals
``1234.5``. A value that cannot be normalised is kept as text: it compares as a mismatch and
never crashes a run.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from eval_pipelines.core.workflows.schema import Schema

# An optional sign, digits (optionally in groups of three separated by ","), an optional
# "." decimal part. Other locales ("1.234,50") are not guessed: such a text stays text.
NUMBER_TEXT = re.compile(r"^[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?$|^[+-]?\.\d+$")
BOOLEAN_TEXT = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def to_jsonable(value: Any) -> Any:
    """Raw extractor output made JSON-friendly: datetimes become ISO dates (``YYYY-MM-DD``,
    or the full ISO form when there is a time of day), ``Decimal`` becomes ``float``,
    tuples become lists, mapping keys become strings; anything else unknown becomes text."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, dt.datetime):
        midnight = value.time() == dt.time(0) and value.tzinfo is None
        return value.date().isoformat() if midnight else value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, Mapping):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(item) for item in value]
    return str(value)


def _as_text(value: Any) -> str:
    """The fallback for a value that cannot be normalised: the string itself, or JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(to_jsonable(value), ensure_ascii=False, sort_keys=True)


def _string(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # a number read as 7740001454.0 is the text "7740001454"
    if isinstance(value, int | float | Decimal):
        return str(value)
    if isinstance(value, dt.date):
        return _date(value)
    if isinstance(value, str):
        return " ".join(value.split())
    return _as_text(value)


def _number(value: Any) -> Any:
    if isinstance(value, bool):
        return _as_text(value)  # True is an int in Python, not a number in a document
    if isinstance(value, int | float | Decimal):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if NUMBER_TEXT.fullmatch(text):
            return float(text.replace(",", ""))
    return _as_text(value)


def _date(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.date().isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value.strip()).date().isoformat()
        except ValueError:
            pass
    return _as_text(value)


def _boolean(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in BOOLEAN_TEXT:
        return BOOLEAN_TEXT[value.strip().lower()]
    return _as_text(value)


_NORMALISERS = {"string": _string, "number": _number, "date": _date, "boolean": _boolean}


def normalise_value(value: Any, value_type: str) -> Any:
    """One value in the comparable form of its type.

    Parameters
    ----------
    value
        An extracted value or a label.
    value_type
        ``string``: text with leading/trailing whitespace removed and inner runs collapsed
        to one space (numbers become their text, ``7740001454.0`` -> ``"7740001454"``).
        ``number``: ``float``; text is accepted as ``[+-]digits[.digits]`` with optional
        ``,`` thousands separators in groups of three (``"1,234.50"`` -> ``1234.5``).
        ``date``: ``"YYYY-MM-DD"`` from a date, a datetime (the time is dropped) or ISO text.
        ``boolean``: ``bool``; also ``0``/``1`` and the text true/false, yes/no, 1/0.

    Returns
    -------
    Any
        The normalised value; ``None`` stays ``None``. A value that does not fit the type is
        returned as text (the original string, or JSON of anything else), so it compares as
        a mismatch. Normalising twice gives the same result.
    """
    if value is None:
        return None
    try:
        normaliser = _NORMALISERS[value_type]
    except KeyError:
        raise ValueError(f"unknown value type {value_type!r}") from None
    return normaliser(value)


def map_output(schema: Schema, raw: Mapping[str, Any]) -> dict[str, Any]:
    """A node's raw output (keyed by ``source``) as normalised values keyed by field id.

    A field whose source is absent from ``raw`` (or ``None``) is left out: it is missing,
    which scoring counts as such. A table's raw value should be a list of row mappings; each
    row becomes a dict keyed by column id holding only the cells whose source is present.
    A table whose raw value is not a list is recorded as no rows (``[]``), and a row that is
    not a mapping as an empty row, so scoring counts its cells as missing.
    """
    values: dict[str, Any] = {}
    for field in schema.fields:
        value = raw.get(field.source)
        if value is None:
            continue
        if not field.is_table:
            values[field.id] = normalise_value(value, field.type)
            continue
        rows = value if isinstance(value, list) else []
        values[field.id] = [
            {
                column.id: normalise_value(row[column.source], column.type)
                for column in field.columns
                if row.get(column.source) is not None
            }
            if isinstance(row, Mapping)
            else {}
            for row in rows
        ]
    return values
