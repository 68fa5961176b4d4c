"""Holdout evaluations: each one's spec, the run launched last and its report (tables
``evaluations`` and ``eval_reports``, whose ``kind`` is ``holdout`` on every row; query
evaluations are in :mod:`eval_pipelines.storage.query_evaluations`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import duckdb
import polars as pl

from eval_pipelines.core.errors import NotFoundError
from eval_pipelines.storage.frames import query_frame


@dataclass(frozen=True)
class EvaluationRow:
    eval_id: str
    kind: str
    case_id: str
    seed: int
    spec: dict[str, Any]
    run_id: str | None
    created_at: datetime


@dataclass(frozen=True)
class StoredReport:
    report: dict[str, Any]
    markdown: str
    run_id: str | None
    created_at: datetime


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def insert_evaluation(
    conn: duckdb.DuckDBPyConnection,
    *,
    eval_id: str,
    kind: str,
    case_id: str,
    sequence: int,
    seed: int,
    spec: dict[str, Any],
    run_id: str | None,
) -> None:
    conn.execute(
        "INSERT INTO evaluations (eval_id, case_id, sequence, seed, spec_json, run_id, "
        "created_at, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [eval_id, case_id, sequence, seed, json.dumps(spec), run_id, _now(), kind],
    )


def set_run_id(conn: duckdb.DuckDBPyConnection, eval_id: str, run_id: str) -> None:
    """Remember the run launched last for this evaluation (runs from the UI count too: the
    run model reads the newest run of the partition from Dagster)."""
    conn.execute("UPDATE evaluations SET run_id = ? WHERE eval_id = ?", [run_id, eval_id])


def evaluation_row(conn: duckdb.DuckDBPyConnection, eval_id: str) -> EvaluationRow:
    row = conn.execute(
        "SELECT eval_id, kind, case_id, seed, spec_json, run_id, created_at FROM evaluations "
        "WHERE eval_id = ?",
        [eval_id],
    ).fetchone()
    if row is None:
        raise NotFoundError(f"evalId={eval_id!r}: no such evaluation")
    return EvaluationRow(
        eval_id=row[0],
        kind=row[1] or "holdout",
        case_id=row[2],
        seed=int(row[3]),
        spec=json.loads(row[4]),
        run_id=row[5],
        created_at=row[6],
    )


def list_evaluations(conn: duckdb.DuckDBPyConnection, case_id: str) -> pl.DataFrame:
    """The case's evaluations, oldest first, with their spec, whether a report exists and the
    run that wrote it."""
    return query_frame(
        conn,
        "SELECT e.eval_id, e.kind, e.seed, e.spec_json, e.run_id, e.created_at, "
        "r.eval_id IS NOT NULL AS has_report, r.run_id AS report_run_id FROM evaluations e "
        "LEFT JOIN eval_reports r USING (eval_id) WHERE e.case_id = ? "
        "ORDER BY e.created_at, e.eval_id",
        [case_id],
    )


def all_evaluation_ids(conn: duckdb.DuckDBPyConnection, kind: str) -> list[str]:
    rows = conn.execute(
        "SELECT eval_id FROM evaluations WHERE kind = ? ORDER BY eval_id", [kind]
    ).fetchall()
    return [row[0] for row in rows]


def save_report(
    conn: duckdb.DuckDBPyConnection,
    eval_id: str,
    report: dict[str, Any],
    markdown: str,
    *,
    run_id: str | None,
) -> None:
    """Replace the evaluation's report. Call inside a transaction."""
    conn.execute("DELETE FROM eval_reports WHERE eval_id = ?", [eval_id])
    conn.execute(
        "INSERT INTO eval_reports (eval_id, report_json, markdown, created_at, run_id) "
        "VALUES (?, ?, ?, ?, ?)",
        [eval_id, json.dumps(report), markdown, _now(), run_id],
    )


def load_report(conn: duckdb.DuckDBPyConnection, eval_id: str) -> StoredReport | None:
    row = conn.execute(
        "SELECT report_json, markdown, run_id, created_at FROM eval_reports WHERE eval_id = ?",
        [eval_id],
    ).fetchone()
    if row is None:
        return None
    return StoredReport(
        report=json.loads(row[0]), markdown=row[1], run_id=row[2], created_at=row[3]
    )


def reports_newest_first(conn: duckdb.DuckDBPyConnection, kind: str) -> list[tuple[str, dict]]:
    """``(eval_id, report)`` of every stored report of one kind, newest first."""
    rows = conn.execute(
        "SELECT r.eval_id, r.report_json FROM eval_reports r JOIN evaluations e "
        "ON e.eval_id = r.eval_id WHERE e.kind = ? ORDER BY r.created_at DESC",
        [kind],
    ).fetchall()
    return [(eval_id, json.loads(text)) for eval_id, text in rows]


def has_report(conn: duckdb.DuckDBPyConnection, eval_id: str) -> bool:
    row = conn.execute("SELECT count(*) FROM eval_reports WHERE eval_id = ?", [eval_id]).fetchone()
    return bool(row and row[0])
