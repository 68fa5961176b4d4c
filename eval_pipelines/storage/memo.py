"""Memo entries of a case: proposed, then approved (active) by a named person."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import duckdb
import polars as pl

from eval_pipelines.core.errors import ConflictError, NotFoundError
from eval_pipelines.core.holdout.memo import MemoEntry, parse_memo_entry
from eval_pipelines.core.tree import CodeTree
from eval_pipelines.storage.frames import query_frame


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def add_entry(conn: duckdb.DuckDBPyConnection, case_id: str, entry: MemoEntry) -> bool:
    """Add a proposed entry; returns False when the identical entry is already there.

    Re-adding the same content is a no-op (so scripts can be re-run); the same id with other
    content is a conflict.
    """
    existing = conn.execute(
        "SELECT entry_json FROM memo_entries WHERE case_id = ? AND entry_id = ?",
        [case_id, entry.entry_id],
    ).fetchone()
    if existing is not None:
        if json.loads(existing[0]) == entry.raw:
            return False
        raise ConflictError(
            f"memo.id={entry.entry_id!r}: an entry with this id and other content exists"
        )
    conn.execute(
        "INSERT INTO memo_entries VALUES (?, ?, 'proposed', ?, ?, ?, NULL, NULL)",
        [case_id, entry.entry_id, entry.instruction, json.dumps(entry.raw), _now()],
    )
    return True


def approve_entry(
    conn: duckdb.DuckDBPyConnection, case_id: str, entry_id: str, approved_by: str
) -> None:
    row = conn.execute(
        "SELECT status FROM memo_entries WHERE case_id = ? AND entry_id = ?", [case_id, entry_id]
    ).fetchone()
    if row is None:
        raise NotFoundError(f"entry={entry_id!r}: no such memo entry in case {case_id!r}")
    if row[0] == "active":
        raise ConflictError(f"entry={entry_id!r}: already approved")
    conn.execute(
        "UPDATE memo_entries SET status = 'active', approved_by = ?, approved_at = ? "
        "WHERE case_id = ? AND entry_id = ?",
        [approved_by, _now(), case_id, entry_id],
    )


def list_entries(conn: duckdb.DuckDBPyConnection, case_id: str) -> pl.DataFrame:
    return query_frame(
        conn,
        "SELECT entry_id, status, instruction, entry_json, created_at, approved_by, approved_at "
        "FROM memo_entries WHERE case_id = ? ORDER BY entry_id",
        [case_id],
    )


def load_entries(conn: duckdb.DuckDBPyConnection, case_id: str, tree: CodeTree) -> list[MemoEntry]:
    """Every entry of the case, parsed, with its status."""
    frame = list_entries(conn, case_id)
    entries = []
    for row in frame.iter_rows(named=True):
        entry = parse_memo_entry(json.loads(row["entry_json"]), tree)
        entries.append(
            MemoEntry(
                entry_id=entry.entry_id,
                instruction=entry.instruction,
                rule=entry.rule,
                status=row["status"],
                raw=entry.raw,
            )
        )
    return entries


def entry_status(conn: duckdb.DuckDBPyConnection, case_id: str, entry_id: str) -> str | None:
    """The entry's status, or None when the case has no such entry."""
    row = conn.execute(
        "SELECT status FROM memo_entries WHERE case_id = ? AND entry_id = ?", [case_id, entry_id]
    ).fetchone()
    return str(row[0]) if row else None


def entry_contents(
    conn: duckdb.DuckDBPyConnection, case_id: str
) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every entry of the case: id -> (status, normalised content as stored)."""
    rows = conn.execute(
        "SELECT entry_id, status, entry_json FROM memo_entries WHERE case_id = ? ORDER BY entry_id",
        [case_id],
    ).fetchall()
    return {entry_id: (status, json.loads(raw)) for entry_id, status, raw in rows}
