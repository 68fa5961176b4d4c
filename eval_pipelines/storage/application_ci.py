"""Recorded application-CI results (``application_ci_results``, migration 0018).

A result is keyed on its workspace, candidate, source, commit, suite and golden runs (none for
a harness; a later gate run of the same workflow revision is another result). Recording the
same result again (every field equal but the time it was recorded) is idempotent: nothing is
written and the stored one is returned. Another result under the same key is refused
(:class:`~eval_pipelines.core.errors.ConflictError` naming the stored one): a recorded result
is history, never overwritten; a harness re-run of the same commit is recorded under another
suite name.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import duckdb

from eval_pipelines.core.errors import ConflictError
from eval_pipelines.core.lift.evidence import ApplicationCI

__all__ = ["insert_result", "results"]

_COLUMNS = (
    "workspace_id, candidate, source, commit_id, suite, passed_count, failed_count, "
    "skipped_count, binds, golden_run_ids_json, detail, recorded_at"
)


def _result_of(row: tuple[Any, ...]) -> ApplicationCI:
    return ApplicationCI(
        workspace_id=row[0],
        candidate=row[1],
        source=row[2],
        commit=row[3],
        suite=row[4],
        passed_count=int(row[5]),
        failed_count=int(row[6]),
        skipped_count=int(row[7]),
        binds=row[8],
        golden_run_ids=tuple(json.loads(row[9])),
        detail=row[10],
        recorded_at=row[11],
    )


def _runs_json(result: ApplicationCI) -> str:
    return json.dumps(list(result.golden_run_ids))


def _stored(conn: duckdb.DuckDBPyConnection, result: ApplicationCI) -> ApplicationCI | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM application_ci_results WHERE workspace_id = ? AND "
        "candidate = ? AND source = ? AND commit_id = ? AND suite = ? AND golden_run_ids_json = ?",
        [
            result.workspace_id,
            result.candidate,
            result.source,
            result.commit,
            result.suite,
            _runs_json(result),
        ],
    ).fetchone()
    return _result_of(row) if row else None


def insert_result(
    conn: duckdb.DuckDBPyConnection, result: ApplicationCI
) -> tuple[ApplicationCI, bool]:
    """Store ``result``; returns the stored result and whether it is new (False: the same
    result was recorded before, and that one is returned).

    Raises
    ------
    ConflictError
        A result of the same workspace, candidate, source, commit, suite and golden runs is
        stored with other counts or detail (nothing written).
    """
    stored = _stored(conn, result)
    if stored is not None:
        if dataclasses.replace(stored, recorded_at=result.recorded_at) == result:
            return stored, False
        # Named as record_ci's parameters, so the CLI shows them as its flags.
        names = ("revision", "workflow") if result.source == "golden_gate" else ("commit", "suite")
        raise ConflictError(
            f"`{names[0]}`={result.commit!r}, `{names[1]}`={result.suite!r}: a {result.source} "
            f"result of candidate {result.candidate} (workspace {result.workspace_id}) is "
            f"already recorded for them ({stored.passed_count} passed, {stored.failed_count} "
            f"failed, {stored.skipped_count} skipped, golden runs "
            f"{list(stored.golden_run_ids)}, recorded {stored.recorded_at:%Y-%m-%d %H:%M:%S}): "
            "a recorded result is never replaced; record a re-run under another suite name "
            "(nothing was written)"
        )
    conn.execute(
        f"INSERT INTO application_ci_results ({_COLUMNS}) VALUES "
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            result.workspace_id,
            result.candidate,
            result.source,
            result.commit,
            result.suite,
            result.passed_count,
            result.failed_count,
            result.skipped_count,
            result.binds,
            _runs_json(result),
            result.detail,
            result.recorded_at,
        ],
    )
    return result, True


def results(
    conn: duckdb.DuckDBPyConnection, *, workspace_id: str | None = None
) -> list[ApplicationCI]:
    """Every recorded result (of one workspace when given), by workspace, candidate and time
    recorded."""
    where, params = ("WHERE workspace_id = ?", [workspace_id]) if workspace_id else ("", [])
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM application_ci_results {where} "
        "ORDER BY workspace_id, candidate, recorded_at, source, commit_id, suite",
        params,
    ).fetchall()
    return [_result_of(row) for row in rows]
