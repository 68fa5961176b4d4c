"""Loading a data table for evaluate queries: read a file, validate it (pandera), version it.

A table's columns are what a query names: ``where`` binds them, ``predict``/``estimate``
targets them, and ``col.field`` follows a link column to another table's key. So the rules
are about names and kinds, checked before anything is written:

- column names match ``^[A-Za-z_][A-Za-z0-9_]*$``, do not start with ``__`` (reserved for
  storage, e.g. ``__position``) and are unique ignoring case (DuckDB's identifiers are);
- every column has a kind (:func:`~eval_pipelines.core.queries.source.column_kind`):
  string, integer, float, boolean or list of strings;
- at least one row; the key column (if any) is a string or integer column with a value on
  every row and no value twice; a link column is a string or integer column.

Row order is part of the table: queries select test rows by position.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl
import polars.selectors as cs

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.files import check_table_file, read_json_lines
from eval_pipelines.core.queries.source import COLUMN_KINDS, column_kind

__all__ = [
    "COLUMN_NAME_RULE",
    "TABLE_SUFFIXES",
    "read_table_file",
    "table_columns",
    "table_version",
    "validate_table",
]

TABLE_SUFFIXES = {
    ".parquet": "parquet",
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
}

# Polars' regex engine has no look-ahead, so "not starting with __" is spelled out.
_NAME_PATTERN = r"^([A-Za-z][A-Za-z0-9_]*|_|_[A-Za-z0-9][A-Za-z0-9_]*)$"
COLUMN_NAME_RULE = (
    "a column name must match ^[A-Za-z_][A-Za-z0-9_]*$ and not start with __ "
    "(queries use '.' for link hops and '$' for operators); rename the column"
)
_KIND_NAMES = "string, integer, float, boolean or list of strings"
_CANONICAL_DTYPES: dict[str, pl.DataType] = {
    "string": pl.String(),
    "integer": pl.Int64(),
    "float": pl.Float64(),
    "boolean": pl.Boolean(),
    "string_list": pl.List(pl.String()),
}
_HASH_CHUNK_ROWS = 100_000


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _csv_header(path: Path) -> list[str]:
    with open(path, encoding="utf-8", newline="") as handle:
        return next(csv.reader(handle), [])


def _check_unique_names(names: list[str], path: Path) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InputError(
                "path", str(path), f"column {name!r} appears twice; column names must be unique"
            )
        seen.add(name)


def _json_array_start(path: Path) -> str:
    with open(path, "rb") as handle:
        head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head[:1].decode("ascii", errors="replace")


# Spellings of "missing" that CSV exports (R's write.csv, spreadsheets) put in numeric
# columns. Only a column whose every other value is a number is converted: a text column
# keeps "NA" (a country code, an abbreviation) as it is.
CSV_NULL_MARKERS = ("NA", "N/A", "n/a", "NaN", "nan", "null", "NULL", "None", "#N/A", "-", "")


def _numbers_behind_null_markers(frame: pl.DataFrame) -> pl.DataFrame:
    """CSV string columns that are numbers apart from null markers, as numbers."""
    converted = []
    for name, dtype in frame.schema.items():
        if dtype != pl.String:
            continue
        column = frame.get_column(name)
        values = column.filter(~column.is_in(CSV_NULL_MARKERS) & column.is_not_null())
        if values.len() == 0 or values.len() == column.drop_nulls().len():
            continue  # no marker, or nothing but markers: leave it as read
        for target in (pl.Int64, pl.Float64):
            if values.str.strip_chars().cast(target, strict=False).null_count() == 0:
                masked = pl.when(column.is_in(CSV_NULL_MARKERS)).then(None).otherwise(column)
                converted.append(masked.str.strip_chars().cast(target).alias(name))
                break
    return frame.with_columns(converted) if converted else frame


def read_table_file(path: Path | str) -> pl.DataFrame:
    """Read a table file, chosen by its suffix, with its rows in file order.

    Parquet (``.parquet``), CSV (``.csv``, header row; column types inferred from every row;
    a column of numbers with null markers such as ``NA`` becomes numeric with nulls),
    JSON Lines (``.jsonl``/``.ndjson``: one object per line) or a JSON array of objects
    (``.json``, e.g. vega-datasets' ``cars.json``).

    Raises
    ------
    InputError
        For a missing, empty or unreadable file, an unknown suffix, a file without columns or
        with a column name twice.
    """
    path = Path(path)
    if not path.exists():
        raise InputError("path", str(path), "file does not exist")
    if path.is_dir():
        raise InputError("path", str(path), "is a directory; give a table file")
    kind = TABLE_SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise InputError(
            "path", str(path), f"unsupported file type; use one of {sorted(TABLE_SUFFIXES)}"
        )
    if path.stat().st_size == 0:
        raise InputError("path", str(path), "the file is empty; a table needs rows")
    check_table_file(path, "path")
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            _check_unique_names(list(pq.read_schema(path).names), path)
            frame = pl.read_parquet(path)
        elif kind == "csv":
            _check_unique_names(_csv_header(path), path)
            frame = _numbers_behind_null_markers(pl.read_csv(path, infer_schema_length=None))
        elif kind == "jsonl":
            frame = read_json_lines(path, "path")
        else:
            if _json_array_start(path) != "[":
                raise InputError(
                    "path",
                    str(path),
                    "a .json file must hold one JSON array of objects "
                    "(name a file of one object per line .jsonl)",
                )
            frame = pl.read_json(path, infer_schema_length=None)
    except InputError:
        raise
    except (pl.exceptions.PolarsError, OSError, ValueError) as error:
        raise InputError(
            "path", str(path), f"could not be read as {kind}: {_first_line(error)}"
        ) from None
    if frame.width == 0:
        raise InputError("path", str(path), "the file holds no columns; a table needs some")
    return frame


def _failure_cases(schema: Any, frame: pl.DataFrame) -> pl.DataFrame | None:
    """Every failure of ``schema`` on ``frame`` (lazy validation), or None when it passes."""
    from pandera.errors import SchemaErrors

    try:
        schema.validate(frame, lazy=True)
    except SchemaErrors as errors:
        return errors.failure_cases
    return None


def _has_query_kind(data: Any) -> bool:
    return column_kind(data.lazyframe.collect_schema()[data.key]) is not None


def _is_string_or_integer(data: Any) -> bool:
    return column_kind(data.lazyframe.collect_schema()[data.key]) in ("string", "integer")


def _has_rows(data: Any) -> pl.LazyFrame:
    return data.lazyframe.select(pl.len() > 0)


def _check_names(frame: pl.DataFrame) -> None:
    import pandera.polars as pa

    names = pa.DataFrameSchema(
        {_NAME_PATTERN: pa.Column(nullable=True, regex=True, required=False)}, strict=True
    )
    failures = _failure_cases(names, frame)
    if failures is not None:
        bad = set(failures.get_column("failure_case").cast(pl.String).to_list())
        first = next(name for name in frame.columns if name in bad)
        raise InputError("table.columns", first, COLUMN_NAME_RULE)
    folded: dict[str, str] = {}
    for name in frame.columns:
        other = folded.setdefault(name.lower(), name)
        if other != name:
            raise InputError(
                "table.columns",
                name,
                f"differs from column {other!r} only in case; column names must be unique "
                "ignoring case",
            )


def _check_kinds(frame: pl.DataFrame) -> None:
    import pandera.polars as pa

    kinds = pa.DataFrameSchema(
        {
            name: pa.Column(nullable=True, checks=[pa.Check(_has_query_kind, name="query_kind")])
            for name in frame.columns
        }
    )
    if _failure_cases(kinds, frame) is not None:
        first = next(name for name in frame.columns if column_kind(frame.schema[name]) is None)
        raise InputError(
            f"table.{first}",
            str(frame.schema[first]),
            f"unsupported column type; a query column is {_KIND_NAMES} (flatten or drop it)",
        )


def _check_rows(frame: pl.DataFrame) -> None:
    import pandera.polars as pa

    rows = pa.DataFrameSchema(checks=[pa.Check(_has_rows, name="has_rows")])
    if _failure_cases(rows, frame) is not None:
        raise InputError("table.rows", 0, "the table has no rows; a table needs at least one")


def _check_finite(frame: pl.DataFrame) -> None:
    """Refuse an infinite float (CSV ``inf``, Parquet): it would enter every mean and sum the
    query takes. (A NaN is read as missing before this check.)"""
    for name in frame.select(cs.float()).columns:
        infinite = frame.get_column(name).is_infinite()
        if infinite.any():
            row = int(infinite.arg_true()[0])
            raise InputError(
                f"table.{name}",
                frame.get_column(name)[row],
                f"row {row} (positions from 0): numbers must be finite (infinity is refused; "
                "NaN is read as missing)",
            )


def _failed(failures: pl.DataFrame | None) -> set[tuple[str, str]]:
    """``(column, check)`` pairs of the failure cases (a missing column names itself)."""
    if failures is None:
        return set()
    return {
        (row["column"] if row["column"] is not None else str(row["failure_case"]), row["check"])
        for row in failures.select("column", "failure_case", "check").iter_rows(named=True)
    }


def _check_key_and_links(frame: pl.DataFrame, key: str | None, links: Mapping[str, str]) -> None:
    """Three passes, because pandera cannot stack failure cases of different types: the
    columns exist, they are string or integer, then the key is complete and unique."""
    import pandera.polars as pa

    named = [*([key] if key is not None else []), *links]
    exist = pa.DataFrameSchema({c: pa.Column(nullable=True, required=True) for c in named})
    _raise_key_or_link(frame, key, links, _failed(_failure_cases(exist, frame)))
    string_or_integer = pa.Check(_is_string_or_integer, name="string_or_integer")
    kinds = pa.DataFrameSchema(
        {c: pa.Column(nullable=True, checks=[string_or_integer]) for c in named}
    )
    _raise_key_or_link(frame, key, links, _failed(_failure_cases(kinds, frame)))
    if key is not None:
        unique = pa.DataFrameSchema({key: pa.Column(nullable=False, unique=True)})
        _raise_key_or_link(frame, key, links, _failed(_failure_cases(unique, frame)))


def _raise_key_or_link(
    frame: pl.DataFrame, key: str | None, links: Mapping[str, str], failed: set[tuple[str, str]]
) -> None:
    if not failed:
        return
    if key is not None:
        _raise_key_failure(frame, key, failed)
    for column, table in links.items():
        link = f"{column}={table}"
        if (column, "column_in_dataframe") in failed:
            raise InputError(
                "links", link, f"column {column!r} not found (columns: {frame.columns})"
            )
        if (column, "string_or_integer") in failed:
            raise InputError(
                "links",
                link,
                f"column {column!r} is {column_kind(frame.schema[column])}; a link column "
                "holds string or integer keys of the linked table",
            )
    raise AssertionError(f"unexpected validation failures: {sorted(failed)}")


def _raise_key_failure(frame: pl.DataFrame, key: str, failed: set[tuple[str, str]]) -> None:
    if (key, "column_in_dataframe") in failed:
        raise InputError("key", key, f"column not found (columns: {frame.columns})")
    if (key, "string_or_integer") in failed:
        raise InputError(
            "key",
            key,
            f"the key column is {column_kind(frame.schema[key])}; a key holds strings or integers",
        )
    values = frame.get_column(key)
    if (key, "not_nullable") in failed:
        row = int(values.is_null().arg_true()[0])
        raise InputError(
            f"table.{key}",
            None,
            f"the key column must have a value on every row (row {row}, positions from 0)",
        )
    if (key, "field_uniqueness") in failed:
        duplicated = values.is_duplicated()
        value = values[int(duplicated.arg_true()[0])]
        rows = (values == value).arg_true().to_list()
        shown = ", ".join(map(str, rows[:10])) + (
            f" and {len(rows) - 10} more" if len(rows) > 10 else ""
        )
        raise InputError(
            f"table.{key}",
            value,
            f"key values must be unique; this one is on rows {shown} (positions from 0)",
        )


def validate_table(
    frame: pl.DataFrame, *, key: str | None = None, links: Mapping[str, str] | None = None
) -> pl.DataFrame:
    """Check a table against the query rules and return it with canonical column types.

    Float NaN becomes null (a missing value, as in the other kinds), a column whose every
    value is null (JSON's ``null`` type) becomes a string column, and each kind gets one
    dtype (String, Int64, Float64, Boolean, List(String)), so the same values make the same
    table whichever format they came from. Rows keep their order.

    Parameters
    ----------
    frame
        The table as read (:func:`read_table_file`).
    key
        The column whose values identify rows (what other tables' links name), if any.
    links
        ``column -> table`` for columns holding another table's key values. Whether the
        linked table exists is the warehouse's question, not this function's.

    Raises
    ------
    InputError
        The first broken rule, naming the column, the value and the rule: a column name,
        an unsupported type (e.g. a nested struct), an infinite number, no rows, a missing
        key or link column, a key or link column that is not string or integer, a missing or
        repeated key value (with its row positions).
    """
    links = dict(links or {})
    _check_names(frame)
    frame = frame.with_columns(cs.float().fill_nan(None), pl.col(pl.Null).cast(pl.String))
    _check_kinds(frame)
    _check_finite(frame)
    _check_rows(frame)
    _check_key_and_links(frame, key, links)
    for name, dtype in frame.schema.items():
        target = _CANONICAL_DTYPES[column_kind(dtype) or ""]
        if dtype == target:
            continue
        try:
            frame = frame.with_columns(pl.col(name).cast(target, strict=True))
        except pl.exceptions.InvalidOperationError:  # UInt64 beyond Int64
            raise InputError(
                f"table.{name}", str(dtype), "integers must fit in 64 signed bits"
            ) from None
    return frame


def table_columns(frame: pl.DataFrame) -> tuple[tuple[str, str], ...]:
    """``(name, kind)`` of every column, in order."""
    columns = []
    for name, dtype in frame.schema.items():
        kind = column_kind(dtype)
        if kind is None or kind not in COLUMN_KINDS:
            raise ValueError(f"column {name!r} has no query kind ({dtype}); validate it first")
        columns.append((name, kind))
    return tuple(columns)


def table_version(
    frame: pl.DataFrame, *, key: str | None = None, links: Mapping[str, str] | None = None
) -> str:
    """The table's content version: SHA-256 hex of its columns, key, links and rows in order.

    The header is canonical JSON of ``(name, kind)`` per column, the key and the links; the
    rows follow as JSON Lines (``DataFrame.write_ndjson``), written in chunks whose bytes do
    not depend on how the frame is chunked in memory. So equal tables get equal versions in
    any process; a changed value, column, row order, key or link gives a new one.
    """
    header = {
        "columns": [list(column) for column in table_columns(frame)],
        "key": key,
        "links": dict(sorted((links or {}).items())),
    }
    digest = hashlib.sha256()
    digest.update(json.dumps(header, sort_keys=True, separators=(",", ":")).encode())
    digest.update(b"\n")
    for start in range(0, frame.height, _HASH_CHUNK_ROWS):
        digest.update(frame.slice(start, _HASH_CHUNK_ROWS).write_ndjson().encode())
    return digest.hexdigest()
