"""Loading a case's labelled records: read, validate (pandera), normalise.

The normalised frame has ``record_key``, ``text``, ``label`` and ``metadata`` (a JSON object of
every other column, usable as a ``groupField``). Validation happens before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.files import check_table_file, read_json_lines
from eval_pipelines.core.tree import CodeTree

SUPPORTED_SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def read_table(path: Path, *, what: str) -> pl.DataFrame:
    """Read a Parquet, CSV or JSON Lines file, chosen by its suffix."""
    if not path.exists():
        raise InputError(what, str(path), "file does not exist")
    kind = SUPPORTED_SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise InputError(
            what, str(path), f"unsupported file type; use one of {sorted(SUPPORTED_SUFFIXES)}"
        )
    check_table_file(path, what)
    try:
        if kind == "parquet":
            return pl.read_parquet(path)
        if kind == "csv":
            return pl.read_csv(path, infer_schema=False)
        return read_json_lines(path, what)
    except InputError:
        raise
    except (pl.exceptions.PolarsError, OSError, ValueError) as error:
        raise InputError(what, str(path), f"could not be read as {kind}: {error}") from error


def _not_blank(data: Any) -> pl.LazyFrame:
    return data.lazyframe.select(pl.col(data.key).str.strip_chars().str.len_chars() > 0)


def _records_schema() -> Any:
    # pandera is slow to import (docs/benchmarks.md); only loading a case needs it, not every
    # CLI command.
    import pandera.polars as pa

    not_blank = pa.Check(_not_blank, name="not_blank", error="must not be empty or blank")
    return pa.DataFrameSchema(
        {
            "record_key": pa.Column(str, nullable=False, unique=True, checks=[not_blank]),
            "text": pa.Column(str, nullable=False, checks=[not_blank]),
            "label": pa.Column(str, nullable=False, checks=[not_blank]),
        },
        strict=False,
    )


# Rows checked at a time by _valid: its stripped copies of the texts stay this small.
_CHECK_BATCH_ROWS = 1_000_000


def _valid(core: pl.DataFrame) -> bool:
    """Whether ``core`` passes :func:`_records_schema`, checked with plain polars.

    The same rules (no nulls, unique keys, nothing blank by the same expression), without
    importing pandera (slow to import, docs/benchmarks.md) or building its failure report
    (seconds at millions of rows); pandera runs only when a rule is broken, to name the first
    failure.
    """
    if any(core.null_count().row(0)) or core.get_column("record_key").n_unique() < core.height:
        return False
    not_blank = [pl.col(c).str.strip_chars().str.len_chars().gt(0).all() for c in core.columns]
    return all(
        all(core.slice(lo, _CHECK_BATCH_ROWS).select(not_blank).row(0))
        for lo in range(0, core.height, _CHECK_BATCH_ROWS)
    )


def _raise_first_failure(core: pl.DataFrame, roles: dict[str, str]) -> None:
    """Validate with pandera and raise :class:`InputError` naming its first failure."""
    from pandera.errors import SchemaErrors

    try:
        _records_schema().validate(core, lazy=True)
    except SchemaErrors as errors:
        first = errors.failure_cases.sort("index", nulls_last=True).row(0, named=True)
        role = first["column"]
        rule = _RULES.get(first["check"], str(first["check"]))
        row = first["index"]
        raise InputError(
            f"records.{roles.get(role, role)}",
            first["failure_case"],
            f"{rule}" + (f" (row {row})" if row is not None else ""),
        ) from None


_RULES = {
    "not_nullable": "must be present on every row",
    "field_uniqueness": "keys must be unique",
    "must not be empty or blank": "must not be empty or blank",
}


def normalise_records(
    frame: pl.DataFrame,
    *,
    key_column: str = "record_key",
    text_column: str = "text",
    label_column: str = "label",
) -> pl.DataFrame:
    """Validate a records frame and return ``record_key, text, label, metadata``.

    Raises
    ------
    InputError
        Naming the column, the first offending value (with its row) and the rule broken.
    """
    roles = {"record_key": key_column, "text": text_column, "label": label_column}
    for role, column in roles.items():
        if column not in frame.columns:
            raise InputError(
                f"{role.replace('record_', '')}_column",
                column,
                f"column not found in the records file (columns: {frame.columns})",
            )
    if frame.height == 0:
        raise InputError("records", 0, "the records file has no rows")
    metadata_columns = [c for c in frame.columns if c not in roles.values()]
    core = frame.select(
        pl.col(key_column).cast(pl.String).alias("record_key"),
        pl.col(text_column).cast(pl.String).alias("text"),
        pl.col(label_column).cast(pl.String).alias("label"),
    )
    if not _valid(core):
        _raise_first_failure(core, roles)
    if metadata_columns:
        metadata = frame.select(
            pl.struct([pl.col(c) for c in metadata_columns]).struct.json_encode().alias("metadata")
        )
    else:
        metadata = pl.DataFrame({"metadata": pl.repeat("{}", frame.height, eager=True)})
    return pl.concat([core, metadata], how="horizontal")


def check_labels_in_tree(records: pl.DataFrame, tree: CodeTree) -> pl.DataFrame:
    """Add ``label_node`` (the label's tree node); a label the tree does not know is an error."""
    labels = records.get_column("label").unique().to_list()
    nodes = {label: tree.node_of(label) for label in labels}
    missing = sorted(label for label, node in nodes.items() if node is None)
    if missing:
        raise InputError(
            "records.label",
            missing[0],
            f"label is not a code of the case's tree ({len(missing)} unknown labels)",
        )
    # A lookup adds the one column and keeps the others (and the row order) as they are,
    # where a join copied every column of every record.
    return records.with_columns(
        pl.col("label")
        .replace_strict(list(nodes), [nodes[label] for label in nodes], return_dtype=pl.String)
        .alias("label_node")
    )


def metadata_keys(records: pl.DataFrame) -> set[str]:
    """Metadata keys present on the records (from the first row: all rows share columns)."""
    if records.height == 0:
        return set()
    return set(json.loads(records.get_column("metadata")[0]))
