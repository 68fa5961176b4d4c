"""The optional cost and execution-envelope columns of a lift log, typed and checked.

A row may say what its model invocation cost, and the envelope it ran in (specification 004:
"cost and quality always refer to the same retained model invocation, over the complete
execution envelope"). Every column is optional; a value that is there is checked:

=====================  ============================================================
column                 rule
=====================  ============================================================
``input_tokens``       whole number >= 0; with ``output_tokens`` (both or neither)
``output_tokens``      whole number >= 0; with ``input_tokens``
``cost``               finite number >= 0, in ``currency`` (used as is, not priced)
``currency``           3 upper-case letters (ISO 4217 style); required with ``cost``
``model``              text, not blank (also the price table's key for tokens)
``provider``           text, not blank
``tools``              digest of the tool definitions; ``none`` when no tools
``response_format``    text, not blank
``generation_params``  digest or canonical text of the generation parameters
``streaming``          true or false
``provider_policy``    text, not blank
=====================  ============================================================

:mod:`eval_pipelines.core.lift.logs` types them with the rest of the row and reports a bad value
with its file line like any other.
"""

from __future__ import annotations

from typing import Any

import polars as pl

__all__ = [
    "COST_COLUMNS",
    "CURRENCY_PATTERN",
    "ENVELOPE",
    "NO_TOOLS",
    "TEXT_COLUMNS",
    "TOKEN_COLUMNS",
    "cost_row_problems",
    "schema_columns",
    "typed_boolean",
    "typed_cost_columns",
    "typed_whole_number",
]

#: The execution envelope, in the order an ineligible claim names its first element.
ENVELOPE = (
    "model",
    "provider",
    "tools",
    "response_format",
    "generation_params",
    "streaming",
    "provider_policy",
)
#: What ``tools`` says of an invocation that declares no tools.
NO_TOOLS = "none"
TOKEN_COLUMNS = ("input_tokens", "output_tokens")
TEXT_COLUMNS = tuple(c for c in ("currency", *ENVELOPE) if c != "streaming")
#: Every optional cost and envelope column with its type after validation.
COST_COLUMNS: dict[str, Any] = {
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "cost": pl.Float64,
    "currency": pl.String,
    **{name: pl.Boolean if name == "streaming" else pl.String for name in ENVELOPE},
}
CURRENCY_PATTERN = r"^[A-Z]{3}$"
TOKENS_RULE = "must be a whole number >= 0 (tokens)"
COST_RULE = "must be a finite number >= 0"
STREAMING_RULE = "must be true, false or null"
BOTH_TOKENS_RULE = "input_tokens and output_tokens go together: log both or neither"
CURRENCY_WITH_COST_RULE = "required with cost (the currency the cost is in)"
CURRENCY_RULE = "must be 3 upper-case letters (ISO 4217, e.g. USD)"

Problem = tuple[int, str, Any, str]


def typed_whole_number(
    frame: pl.DataFrame, name: str, *, minimum: int, rule: str
) -> tuple[pl.Expr, list[Problem]]:
    """Column ``name`` as Int64, and its values that are not a whole number >= ``minimum``
    (row, column, value as logged, ``rule``). Mixed JSON values arrive as text: digits are
    read as a number; a fractional value is refused, not rounded."""
    dtype, column = frame.schema[name], pl.col(name)
    if dtype == pl.Null or dtype.is_integer():
        typed, good = column.cast(pl.Int64), pl.lit(True)
    elif dtype.is_float():
        good = column.is_finite() & (column == column.floor())
        typed = pl.when(good).then(column).cast(pl.Int64)
    elif dtype == pl.String:
        good = column.str.strip_chars().str.contains(r"^[0-9]+$")
        typed = pl.when(good).then(column.str.strip_chars()).cast(pl.Int64)
    else:
        typed, good = pl.lit(None, pl.Int64), pl.lit(False)
    return typed, _bad(frame, name, good & (typed >= minimum), rule)


def typed_boolean(frame: pl.DataFrame, name: str, *, rule: str) -> tuple[pl.Expr, list[Problem]]:
    """Column ``name`` as Boolean (``true``/``false`` text read as such), and its other values."""
    dtype, column = frame.schema[name], pl.col(name)
    if dtype in (pl.Boolean, pl.Null):
        typed, good = column.cast(pl.Boolean), pl.lit(True)
    elif dtype == pl.String:
        text = column.str.strip_chars().str.to_lowercase()
        good = text.is_in(["true", "false"])
        typed = pl.when(text == "true").then(True).when(text == "false").then(False)
    else:
        typed, good = pl.lit(None, pl.Boolean), pl.lit(False)
    return typed, _bad(frame, name, good, rule)


def _typed_cost(frame: pl.DataFrame) -> tuple[pl.Expr, list[Problem]]:
    """``cost`` as Float64, and its values that are not a finite number >= 0. Mixed JSON values
    arrive as text: a number's text is read as that number (``NaN`` and ``inf`` are not
    finite, refused)."""
    dtype, column = frame.schema["cost"], pl.col("cost")
    if dtype == pl.Null or dtype.is_integer() or dtype.is_float():
        typed = column.cast(pl.Float64)
    elif dtype == pl.String:
        typed = column.str.strip_chars().cast(pl.Float64, strict=False)
    else:
        typed = pl.lit(None, pl.Float64)
    good = typed.is_finite() & (typed >= 0)
    return pl.when(good).then(typed), _bad(frame, "cost", good, COST_RULE)


def _bad(frame: pl.DataFrame, name: str, good: pl.Expr, rule: str) -> list[Problem]:
    bad = frame.with_row_index("__row").filter(pl.col(name).is_not_null() & ~good.fill_null(False))
    return [(row["__row"], name, row[name], rule) for row in bad.iter_rows(named=True)]


def typed_cost_columns(frame: pl.DataFrame) -> tuple[list[pl.Expr], list[Problem]]:
    """The casts of the cost and envelope columns ``frame`` has, and the values that could
    not be typed (row, column, value as logged, rule). Text columns are typed by the caller
    with the log's other text columns (:data:`TEXT_COLUMNS`)."""
    casts: list[pl.Expr] = []
    problems: list[Problem] = []
    for name in (c for c in TOKEN_COLUMNS if c in frame.columns):
        typed, bad = typed_whole_number(frame, name, minimum=0, rule=TOKENS_RULE)
        casts.append(typed.alias(name))
        problems.extend(bad)
    if "cost" in frame.columns:
        typed, bad = _typed_cost(frame)
        casts.append(typed.alias("cost"))
        problems.extend(bad)
    if "streaming" in frame.columns:
        typed, bad = typed_boolean(frame, "streaming", rule=STREAMING_RULE)
        casts.append(typed.alias("streaming"))
        problems.extend(bad)
    return casts, problems


def cost_row_problems(typed: pl.DataFrame) -> list[Problem]:
    """Rules across a typed row's columns: both token counts or neither, a currency with
    every cost."""
    problems: list[Problem] = []
    indexed = typed.with_row_index("__row")
    if any(c in typed.columns for c in TOKEN_COLUMNS):
        inputs, outputs = (
            pl.col(c) if c in typed.columns else pl.lit(None, pl.Int64) for c in TOKEN_COLUMNS
        )
        for row in indexed.filter(inputs.is_null() != outputs.is_null()).iter_rows(named=True):
            present = next(c for c in TOKEN_COLUMNS if row.get(c) is not None)
            problems.append((row["__row"], present, row[present], BOTH_TOKENS_RULE))
    if "cost" in typed.columns:
        currency = pl.col("currency") if "currency" in typed.columns else pl.lit(None, pl.String)
        lacking = indexed.filter(pl.col("cost").is_not_null() & currency.is_null())
        for row in lacking.iter_rows(named=True):
            problems.append((row["__row"], "currency", None, CURRENCY_WITH_COST_RULE))
    return problems


def schema_columns(pa: Any, text_checks: list[Any]) -> dict[str, Any]:
    """The pandera columns of the cost and envelope columns (all optional and nullable):
    ``text_checks`` (not blank) on every text column, the currency's pattern on ``currency``.
    ``pa`` is ``pandera.polars``, imported by the caller (it is slow to import)."""
    columns = {
        name: pa.Column(dtype, nullable=True, required=False)
        for name, dtype in COST_COLUMNS.items()
        if name not in TEXT_COLUMNS
    }
    for name in TEXT_COLUMNS:
        columns[name] = pa.Column(str, nullable=True, required=False, checks=text_checks)
    currency = pa.Check.str_matches(CURRENCY_PATTERN, error=CURRENCY_RULE)
    columns["currency"] = pa.Column(str, nullable=True, required=False, checks=[currency])
    return columns
