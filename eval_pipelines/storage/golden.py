"""Golden sets, their cases, and the runs that scored them."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import duckdb

from eval_pipelines.core.errors import ConflictError, NotFoundError
from eval_pipelines.core.golden.run import GoldenRun
from eval_pipelines.core.workflows.nodes import StepUsage


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class GoldenSet:
    set_name: str
    workflow: str
    node_id: str
    threshold: float
    gate: bool
    created_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "set": self.set_name,
            "workflow": self.workflow,
            "node": self.node_id,
            "threshold": self.threshold,
            "gate": self.gate,
            "createdAt": self.created_at.isoformat(timespec="seconds"),
        }


def create_set(conn: duckdb.DuckDBPyConnection, golden_set: GoldenSet) -> None:
    if find_set(conn, golden_set.set_name) is not None:
        raise ConflictError(f"set={golden_set.set_name!r}: a golden set with this name exists")
    conn.execute(
        "INSERT INTO golden_sets (set_name, workflow, node_id, threshold, gate, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [
            golden_set.set_name,
            golden_set.workflow,
            golden_set.node_id,
            golden_set.threshold,
            golden_set.gate,
            golden_set.created_at,
        ],
    )


def find_set(conn: duckdb.DuckDBPyConnection, set_name: str) -> GoldenSet | None:
    row = conn.execute(
        "SELECT set_name, workflow, node_id, threshold, gate, created_at FROM golden_sets "
        "WHERE set_name = ?",
        [set_name],
    ).fetchone()
    return GoldenSet(*row) if row else None


def load_set(conn: duckdb.DuckDBPyConnection, set_name: str) -> GoldenSet:
    found = find_set(conn, set_name)
    if found is None:
        names = [s.set_name for s in list_sets(conn)]
        raise NotFoundError(
            f"set={set_name!r}: no such golden set (sets: {', '.join(names) if names else 'none'})"
        )
    return found


def list_sets(conn: duckdb.DuckDBPyConnection, workflow: str | None = None) -> list[GoldenSet]:
    rows = conn.execute(
        "SELECT set_name, workflow, node_id, threshold, gate, created_at FROM golden_sets "
        "WHERE ? IS NULL OR workflow = ? ORDER BY set_name",
        [workflow, workflow],
    ).fetchall()
    return [GoldenSet(*row) for row in rows]


@dataclass(frozen=True)
class GoldenCase:
    set_name: str
    case_id: str
    document_id: str
    labels: dict[str, Any]
    key_columns: dict[str, list[str]]
    from_test_run: str | None
    schema_fingerprint: str
    authored_revision: str
    enabled: bool
    created_at: datetime


_CASE_COLUMNS = (
    "set_name, case_id, document_id, labels, key_columns, from_test_run, schema_fingerprint, "
    "authored_revision, enabled, created_at"
)


def _case(row: tuple[Any, ...]) -> GoldenCase:
    values = list(row)
    values[3] = json.loads(values[3])
    values[4] = json.loads(values[4])
    return GoldenCase(*values)


def next_case_id(conn: duckdb.DuckDBPyConnection, set_name: str) -> str:
    """``case-0001``, ``case-0002``, ...: never reused, even after a case is deleted."""
    # UPDATE then SELECT, not UPDATE ... RETURNING: DuckDB's postgres extension has no
    # RETURNING for a PostgreSQL table (a shared warehouse).
    conn.execute(
        "UPDATE golden_sets SET cases_created = cases_created + 1 WHERE set_name = ?", [set_name]
    )
    row = conn.execute(
        "SELECT cases_created FROM golden_sets WHERE set_name = ?", [set_name]
    ).fetchone()
    if row is None:
        raise NotFoundError(f"set={set_name!r}: no such golden set")
    return f"case-{int(row[0]):04d}"


def add_case(conn: duckdb.DuckDBPyConnection, case: GoldenCase) -> None:
    conn.execute(
        f"INSERT INTO golden_cases ({_CASE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            case.set_name,
            case.case_id,
            case.document_id,
            json.dumps(case.labels, sort_keys=True),
            json.dumps(case.key_columns, sort_keys=True),
            case.from_test_run,
            case.schema_fingerprint,
            case.authored_revision,
            case.enabled,
            case.created_at,
        ],
    )


def list_cases(conn: duckdb.DuckDBPyConnection, set_name: str) -> list[GoldenCase]:
    rows = conn.execute(
        f"SELECT {_CASE_COLUMNS} FROM golden_cases WHERE set_name = ? ORDER BY case_id",
        [set_name],
    ).fetchall()
    return [_case(row) for row in rows]


def load_case(conn: duckdb.DuckDBPyConnection, set_name: str, case_id: str) -> GoldenCase:
    row = conn.execute(
        f"SELECT {_CASE_COLUMNS} FROM golden_cases WHERE set_name = ? AND case_id = ?",
        [set_name, case_id],
    ).fetchone()
    if row is None:
        raise NotFoundError(f"case={case_id!r}: no such case in golden set {set_name!r}")
    return _case(row)


def set_case_enabled(
    conn: duckdb.DuckDBPyConnection, set_name: str, case_id: str, enabled: bool
) -> None:
    load_case(conn, set_name, case_id)
    conn.execute(
        "UPDATE golden_cases SET enabled = ? WHERE set_name = ? AND case_id = ?",
        [enabled, set_name, case_id],
    )


def delete_case(conn: duckdb.DuckDBPyConnection, set_name: str, case_id: str) -> int:
    """Delete a case and its results from every run; returns how many results went."""
    load_case(conn, set_name, case_id)
    row = conn.execute(
        "SELECT count(*) FROM golden_results WHERE set_name = ? AND case_id = ?",
        [set_name, case_id],
    ).fetchone()
    conn.execute(
        "DELETE FROM golden_results WHERE set_name = ? AND case_id = ?", [set_name, case_id]
    )
    conn.execute("DELETE FROM golden_cases WHERE set_name = ? AND case_id = ?", [set_name, case_id])
    return int(row[0]) if row else 0


_RUN_COLUMNS = (
    "golden_run_id, set_name, workflow, revision, dagster_run_id, status, started_at, "
    "finished_at, executed_steps, cached_steps, cost_units, threshold, reason"
)
USAGE_COLUMNS = (
    "model_calls",
    "model_calls_from_cache",
    "model_calls_failed",
    "input_tokens",
    "output_tokens",
    "model_cost",
    "model_cost_note",
)
_SELECT_RUN = f"{_RUN_COLUMNS}, {', '.join(USAGE_COLUMNS)}"


def usage_values(usage: StepUsage | None) -> list[Any]:
    """The usage columns' values (all NULL: no metered step)."""
    if usage is None:
        return [None] * len(USAGE_COLUMNS)
    return [
        usage.calls,
        usage.from_cache,
        usage.failed,
        usage.input_tokens,
        usage.output_tokens,
        usage.cost,
        usage.cost_note,
    ]


def usage_of_row(values: tuple[Any, ...] | list[Any]) -> StepUsage | None:
    if values[0] is None:
        return None
    calls, from_cache, failed, input_tokens, output_tokens = (int(v) for v in values[:5])
    return StepUsage(calls, from_cache, failed, input_tokens, output_tokens, values[5], values[6])


def _run_of(row: tuple[Any, ...]) -> GoldenRun:
    base = len(row) - len(USAGE_COLUMNS)
    return dataclasses.replace(GoldenRun(*row[:base]), usage=usage_of_row(row[base:]))


def start_run(conn: duckdb.DuckDBPyConnection, run: GoldenRun) -> None:
    conn.execute(
        f"INSERT INTO golden_runs ({_RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            run.golden_run_id,
            run.set_name,
            run.workflow,
            run.revision,
            run.dagster_run_id,
            run.status,
            run.started_at,
            run.finished_at,
            run.executed_steps,
            run.cached_steps,
            run.cost_units,
            run.threshold,
            run.reason,
        ],
    )


@dataclass(frozen=True)
class CaseResult:
    case_id: str
    revision: str
    ran: bool
    output: dict[str, Any] | None
    error: str | None
    skip_reason: str | None
    executed_steps: int
    cached_steps: int
    usage: StepUsage | None = None  # the model calls of its document's metered steps


def finish_run(
    conn: duckdb.DuckDBPyConnection,
    golden_run_id: str,
    results: list[tuple[str, CaseResult]],
    *,
    status: str,
    cost_units: float,
    executed_steps: int,
    cached_steps: int,
    usage: StepUsage | None = None,
) -> None:
    """Store every case's result and close the run (``completed``, ``failed``) with what it
    charged: steps of distinct documents (a document two cases use ran once), and ``usage``
    (their model calls)."""
    for set_name, result in results:
        conn.execute(
            "INSERT INTO golden_results (golden_run_id, set_name, case_id, revision, ran, "
            "output, error, skip_reason, executed_steps, cached_steps, "
            f"{', '.join(USAGE_COLUMNS)}) VALUES ({', '.join(['?'] * 17)})",
            [
                golden_run_id,
                set_name,
                result.case_id,
                result.revision,
                result.ran,
                json.dumps(result.output, sort_keys=True) if result.output is not None else None,
                result.error,
                result.skip_reason,
                result.executed_steps,
                result.cached_steps,
                *usage_values(result.usage),
            ],
        )
    conn.execute(
        "UPDATE golden_runs SET status = ?, finished_at = ?, executed_steps = ?, "
        f"cached_steps = ?, cost_units = ?, {' = ?, '.join(USAGE_COLUMNS)} = ? "
        "WHERE golden_run_id = ?",
        [
            status,
            _now(),
            executed_steps,
            cached_steps,
            cost_units,
            *usage_values(usage),
            golden_run_id,
        ],
    )


def load_run(conn: duckdb.DuckDBPyConnection, golden_run_id: str) -> GoldenRun:
    row = conn.execute(
        f"SELECT {_SELECT_RUN} FROM golden_runs WHERE golden_run_id = ?", [golden_run_id]
    ).fetchone()
    if row is None:
        raise NotFoundError(f"run={golden_run_id!r}: no such golden run")
    return _run_of(row)


def runs_of_set(
    conn: duckdb.DuckDBPyConnection,
    set_name: str,
    *,
    revision: str | None = None,
    status: str | None = None,
    limit: int = 50,
) -> list[GoldenRun]:
    """The set's runs, newest first (optionally of one revision, one status)."""
    rows = conn.execute(
        f"SELECT {_SELECT_RUN} FROM golden_runs WHERE set_name = ? "
        "AND (? IS NULL OR revision = ?) AND (? IS NULL OR status = ?) "
        "ORDER BY started_at DESC, golden_run_id DESC LIMIT ?",
        [set_name, revision, revision, status, status, limit],
    ).fetchall()
    return [_run_of(row) for row in rows]


def running_runs(conn: duckdb.DuckDBPyConnection) -> list[GoldenRun]:
    """Every run still marked ``running`` (live, or left so by a killed process)."""
    rows = conn.execute(
        f"SELECT {_SELECT_RUN} FROM golden_runs WHERE status = 'running' "
        "ORDER BY started_at, golden_run_id"
    ).fetchall()
    return [_run_of(row) for row in rows]


def close_abandoned_run(conn: duckdb.DuckDBPyConnection, golden_run_id: str, reason: str) -> bool:
    """Close a run left ``running`` as ``failed`` with ``reason`` (its results, if any, are
    kept); False when it was closed meanwhile."""
    # The count of updated rows, not RETURNING: DuckDB's postgres extension refuses that.
    row = conn.execute(
        "UPDATE golden_runs SET status = 'failed', finished_at = ?, reason = ? "
        "WHERE golden_run_id = ? AND status = 'running'",
        [_now(), reason, golden_run_id],
    ).fetchone()
    return bool(row and row[0])  # the count of rows updated (no RETURNING on PostgreSQL)


def runs_of_dagster_run(conn: duckdb.DuckDBPyConnection, dagster_run_id: str) -> list[GoldenRun]:
    rows = conn.execute(
        f"SELECT {_SELECT_RUN} FROM golden_runs WHERE dagster_run_id = ? ORDER BY set_name",
        [dagster_run_id],
    ).fetchall()
    return [_run_of(row) for row in rows]


def results_of_run(conn: duckdb.DuckDBPyConnection, golden_run_id: str) -> list[CaseResult]:
    rows = conn.execute(
        "SELECT case_id, revision, ran, output, error, skip_reason, executed_steps, "
        f"cached_steps, {', '.join(USAGE_COLUMNS)} FROM golden_results "
        "WHERE golden_run_id = ? ORDER BY case_id",
        [golden_run_id],
    ).fetchall()
    return [
        dataclasses.replace(
            CaseResult(r[0], r[1], r[2], json.loads(r[3]) if r[3] else None, *r[4:8]),
            usage=usage_of_row(r[8:]),
        )
        for r in rows
    ]
