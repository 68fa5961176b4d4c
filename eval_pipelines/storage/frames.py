"""Moving polars frames in and out of DuckDB. SQL text is always a literal of the calling
module; values travel as parameters or as the registered frame."""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl

INCOMING = "incoming_frame"


def insert_frame(conn: duckdb.DuckDBPyConnection, insert_sql: str, frame: pl.DataFrame) -> None:
    """Run ``insert_sql`` (``INSERT INTO t (...) SELECT ... FROM incoming_frame``) over
    ``frame``. An empty frame inserts nothing."""
    if frame.height == 0:
        return
    conn.register(INCOMING, frame.to_arrow())
    try:
        conn.execute(insert_sql)
    finally:
        conn.unregister(INCOMING)


def query_frame(conn: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> pl.DataFrame:
    """Run a parameterised query and return a polars frame."""
    return conn.execute(sql, params).pl()
