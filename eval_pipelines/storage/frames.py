"""Moving polars frames in and out of DuckDB with parameterised, idempotent writes."""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl

# Table names are fixed identifiers from this package, never user input; values are parameters.
_REPLACEABLE = {
    "records": "case_id",
    "tree_nodes": "case_id",
    "holdout_samples": "eval_id",
    "leave_out": "eval_id",
    "candidates": "eval_id",
    "predictions": "eval_id",
    "variant_runs": "eval_id",
    "variant_scores": "eval_id",
    "eval_reports": "eval_id",
}


def replace_rows(
    conn: duckdb.DuckDBPyConnection, table: str, key: str, frame: pl.DataFrame
) -> None:
    """Replace every row of ``table`` whose partition column equals ``key`` with ``frame``.

    Call inside a transaction. An empty frame deletes the partition's rows and writes nothing,
    which is the right result for "this stage produced no rows" (the Dagster DuckDB IO manager
    skips the delete's counterpart instead, leaving stale rows: see DESIGN.md).
    """
    column = _REPLACEABLE[table]
    conn.execute(f"DELETE FROM {table} WHERE {column} = ?", [key])
    if frame.height == 0:
        return
    conn.register("incoming_frame", frame.to_arrow())
    try:
        names = ", ".join(frame.columns)
        conn.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM incoming_frame")
    finally:
        conn.unregister("incoming_frame")


def query_frame(conn: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> pl.DataFrame:
    """Run a parameterised query and return a polars frame."""
    return conn.execute(sql, params).pl()
