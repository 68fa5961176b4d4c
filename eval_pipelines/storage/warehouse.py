"""The DuckDB warehouse: one file, one writer at a time, schema created on first use."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS cases (
        case_id VARCHAR NOT NULL, tree_mode VARCHAR NOT NULL, prefix_lengths VARCHAR,
        target_depth VARCHAR NOT NULL, records_version VARCHAR NOT NULL,
        tree_version VARCHAR NOT NULL, n_records BIGINT NOT NULL, metadata_columns VARCHAR,
        source VARCHAR, created_at TIMESTAMP NOT NULL, eval_sequence BIGINT NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS records (
        case_id VARCHAR NOT NULL, record_key VARCHAR NOT NULL, text VARCHAR NOT NULL,
        label VARCHAR NOT NULL, label_node VARCHAR NOT NULL, metadata VARCHAR NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS tree_nodes (
        case_id VARCHAR NOT NULL, code VARCHAR NOT NULL, parent VARCHAR, depth INTEGER NOT NULL,
        title VARCHAR, kind VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS memo_entries (
        case_id VARCHAR NOT NULL, entry_id VARCHAR NOT NULL, status VARCHAR NOT NULL,
        instruction VARCHAR NOT NULL, entry_json VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL,
        approved_by VARCHAR, approved_at TIMESTAMP)""",
    """CREATE TABLE IF NOT EXISTS evaluations (
        eval_id VARCHAR NOT NULL, case_id VARCHAR NOT NULL, sequence BIGINT NOT NULL,
        seed BIGINT NOT NULL, spec_json VARCHAR NOT NULL, run_id VARCHAR,
        created_at TIMESTAMP NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS holdout_samples (
        eval_id VARCHAR NOT NULL, position INTEGER NOT NULL, record_key VARCHAR NOT NULL,
        sample_hash VARCHAR NOT NULL, requested_size INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS leave_out (
        eval_id VARCHAR NOT NULL, sample_key VARCHAR NOT NULL, excluded_key VARCHAR NOT NULL,
        reason VARCHAR NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS candidates (
        eval_id VARCHAR NOT NULL, sample_key VARCHAR NOT NULL, rank INTEGER NOT NULL,
        evidence_key VARCHAR NOT NULL, similarity FLOAT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS predictions (
        eval_id VARCHAR NOT NULL, variant VARCHAR NOT NULL, record_key VARCHAR NOT NULL,
        code VARCHAR, confidence DOUBLE NOT NULL, route VARCHAR NOT NULL,
        candidates VARCHAR NOT NULL, requested_candidates INTEGER NOT NULL,
        effective_candidates INTEGER NOT NULL, memo_applied VARCHAR NOT NULL, error VARCHAR,
        tokens BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS variant_runs (
        eval_id VARCHAR NOT NULL, variant VARCHAR NOT NULL, position INTEGER NOT NULL,
        memo_version VARCHAR NOT NULL, usage_json VARCHAR NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS variant_scores (
        eval_id VARCHAR NOT NULL, variant VARCHAR NOT NULL, position INTEGER NOT NULL,
        score_json VARCHAR NOT NULL, failed_rows INTEGER NOT NULL,
        leave_out_json VARCHAR NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS eval_reports (
        eval_id VARCHAR NOT NULL, report_json VARCHAR NOT NULL, markdown VARCHAR NOT NULL,
        created_at TIMESTAMP NOT NULL)""",
]


class WarehouseBusy(RuntimeError):
    """Another process holds the DuckDB file's write lock."""


def _is_lock_error(error: duckdb.Error) -> bool:
    text = str(error).lower()
    return "lock" in text or "conflicting" in text


@contextmanager
def connect(
    path: Path, *, read_only: bool = False, wait_seconds: float = 120.0
) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the warehouse, retrying while another process holds the lock.

    DuckDB locks the file per process; runs and the CLI keep connections short, so waiting a
    little is enough. Raises :class:`WarehouseBusy` when the lock is still held after
    ``wait_seconds``. A read-only open of a missing file raises ``FileNotFoundError``.
    """
    if read_only and not path.exists():
        raise FileNotFoundError(f"warehouse {path} does not exist yet: create a case first")
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_seconds
    delay = 0.05
    while True:
        try:
            conn = duckdb.connect(str(path), read_only=read_only)
            break
        except duckdb.IOException as error:
            if not _is_lock_error(error) or time.monotonic() > deadline:
                if _is_lock_error(error):
                    raise WarehouseBusy(
                        f"warehouse {path} is busy (locked by another process)"
                    ) from None
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
    try:
        if not read_only:
            for statement in SCHEMA:
                conn.execute(statement)
        yield conn
    finally:
        conn.close()


@contextmanager
def transaction(conn: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """All-or-nothing: a failure rolls back, so bad input or a crash never leaves half a write."""
    conn.execute("BEGIN TRANSACTION")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
