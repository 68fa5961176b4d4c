"""Holdout evaluations: stored specs and each stage's rows, replaced per evaluation."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import duckdb
import polars as pl

from eval_pipelines.core.errors import NotFoundError
from eval_pipelines.core.specs import HoldoutSpec, spec_from_json
from eval_pipelines.storage.frames import query_frame, replace_rows


def insert_evaluation(conn: duckdb.DuckDBPyConnection, spec: HoldoutSpec, sequence: int) -> None:
    conn.execute(
        "INSERT INTO evaluations VALUES (?, ?, ?, ?, ?, NULL, ?)",
        [
            spec.eval_id,
            spec.case_id,
            sequence,
            spec.seed,
            json.dumps(spec.to_json()),
            datetime.now(UTC).replace(tzinfo=None),
        ],
    )


def set_run_id(conn: duckdb.DuckDBPyConnection, eval_id: str, run_id: str) -> None:
    conn.execute("UPDATE evaluations SET run_id = ? WHERE eval_id = ?", [run_id, eval_id])


def load_spec(conn: duckdb.DuckDBPyConnection, eval_id: str) -> HoldoutSpec:
    row = conn.execute("SELECT spec_json FROM evaluations WHERE eval_id = ?", [eval_id]).fetchone()
    if row is None:
        raise NotFoundError(f"evalId={eval_id!r}: no such evaluation")
    return spec_from_json(json.loads(row[0]))


def evaluation_row(conn: duckdb.DuckDBPyConnection, eval_id: str) -> dict[str, Any]:
    frame = query_frame(
        conn,
        "SELECT eval_id, case_id, sequence, seed, spec_json, run_id, created_at "
        "FROM evaluations WHERE eval_id = ?",
        [eval_id],
    )
    if frame.height == 0:
        raise NotFoundError(f"evalId={eval_id!r}: no such evaluation")
    return frame.row(0, named=True)


def list_evaluations(conn: duckdb.DuckDBPyConnection, case_id: str) -> pl.DataFrame:
    """The case's evaluations, oldest first, with their spec and whether a report exists."""
    return query_frame(
        conn,
        "SELECT e.eval_id, e.seed, e.spec_json, e.run_id, e.created_at, "
        "r.eval_id IS NOT NULL AS has_report FROM evaluations e "
        "LEFT JOIN eval_reports r USING (eval_id) WHERE e.case_id = ? ORDER BY e.created_at",
        [case_id],
    )


def save_sample(
    conn: duckdb.DuckDBPyConnection,
    eval_id: str,
    keys: tuple[str, ...],
    sample_hash: str,
    requested_size: int,
) -> None:
    frame = pl.DataFrame(
        {
            "eval_id": eval_id,
            "position": list(range(len(keys))),
            "record_key": list(keys),
            "sample_hash": sample_hash,
            "requested_size": requested_size,
        },
        schema={
            "eval_id": pl.String,
            "position": pl.Int32,
            "record_key": pl.String,
            "sample_hash": pl.String,
            "requested_size": pl.Int32,
        },
    )
    replace_rows(conn, "holdout_samples", eval_id, frame)


def load_sample(conn: duckdb.DuckDBPyConnection, eval_id: str) -> pl.DataFrame:
    """``position, record_key, sample_hash, requested_size`` in draw order."""
    return query_frame(
        conn,
        "SELECT position, record_key, sample_hash, requested_size FROM holdout_samples "
        "WHERE eval_id = ? ORDER BY position",
        [eval_id],
    )


def sample_hash(conn: duckdb.DuckDBPyConnection, eval_id: str) -> str | None:
    """The drawn sample's hash, or None before ``holdout_sample`` has run."""
    row = conn.execute(
        "SELECT sample_hash FROM holdout_samples WHERE eval_id = ? LIMIT 1", [eval_id]
    ).fetchone()
    return row[0] if row else None


def save_stage_rows(
    conn: duckdb.DuckDBPyConnection, table: str, eval_id: str, frame: pl.DataFrame
) -> None:
    """Replace an evaluation's rows of one stage table (frame without ``eval_id``)."""
    replace_rows(conn, table, eval_id, frame.select(pl.lit(eval_id).alias("eval_id"), pl.all()))


def load_stage_rows(
    conn: duckdb.DuckDBPyConnection, table: str, eval_id: str, order_by: str
) -> pl.DataFrame:
    """An evaluation's rows of one stage table, without ``eval_id``.

    ``table`` and ``order_by`` are identifiers from this package, never user input.
    """
    frame = query_frame(
        conn, f"SELECT * FROM {table} WHERE eval_id = ? ORDER BY {order_by}", [eval_id]
    )
    return frame.drop("eval_id")


def save_report(
    conn: duckdb.DuckDBPyConnection, eval_id: str, report: dict[str, Any], markdown: str
) -> None:
    frame = pl.DataFrame(
        {
            "eval_id": [eval_id],
            "report_json": [json.dumps(report)],
            "markdown": [markdown],
            "created_at": [datetime.now(UTC).replace(tzinfo=None)],
        }
    )
    replace_rows(conn, "eval_reports", eval_id, frame)


def load_report(conn: duckdb.DuckDBPyConnection, eval_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT report_json FROM eval_reports WHERE eval_id = ?", [eval_id]
    ).fetchone()
    return json.loads(row[0]) if row else None
