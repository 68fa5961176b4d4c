"""Query evaluations (spec 003): the query as submitted, the versions of the tables its
id pins, and its result.

One result row per evaluation: materialising the partition again replaces it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import duckdb

from eval_pipelines.core.errors import NotFoundError
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import data_tables as data_tables_store


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class PinnedSource:
    """A table a query reads (a base table or one it follows a link to), at the version its
    evaluation id was computed on.

    ``kind`` is ``table`` (a loaded data table) or ``case`` (a case's records, versioned by
    its records version), in the order a query resolves a name: a table first.
    """

    name: str
    kind: str
    version: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "kind": self.kind, "version": self.version}


@dataclass(frozen=True)
class StoredQuery:
    """An evaluation as registered: the validated query document, the fold count of a k-fold
    sweep (``None`` for the query's own test selector) and the pinned base sources."""

    eval_id: str
    document: dict[str, Any]
    folds: int | None
    sources: tuple[PinnedSource, ...]
    created_at: datetime


@dataclass(frozen=True)
class StoredResult:
    """The result the evaluation's last successful run wrote.

    ``result`` is the 003 response; ``metrics`` every scalar metric whatever the query
    selected; ``sources`` the tables the run read (name, kind, version, rows).
    """

    eval_id: str
    run_id: str | None
    result: dict[str, Any]
    metrics: dict[str, float | int | None]
    sources: list[dict[str, Any]]
    elapsed_seconds: float
    created_at: datetime

    @property
    def truncated(self) -> bool:
        """Whether the run hit maxTime (003 always says so in the response)."""
        return bool(self.result.get("truncated"))


def pin_source(conn: duckdb.DuckDBPyConnection, name: str) -> PinnedSource:
    """The current version of the table or case ``name`` (a loaded data table first, as a
    query resolves it); :class:`NotFoundError` when neither exists."""
    if data_tables_store.table_exists(conn, name):
        return PinnedSource(name, "table", data_tables_store.head_version(conn, name))
    if cases_store.case_exists(conn, name):
        return PinnedSource(name, "case", cases_store.load_case(conn, name).records_version)
    raise NotFoundError(
        f"no table or case named {name!r}; `eval-pipelines table list` lists tables, "
        "`case list` cases"
    )


def _pinned(value: str) -> tuple[PinnedSource, ...]:
    return tuple(PinnedSource(s["name"], s["kind"], s["version"]) for s in json.loads(value))


_QUERY_COLUMNS = "eval_id, query_json, folds, sources_json, created_at"


def _query(row: tuple[Any, ...]) -> StoredQuery:
    eval_id, query_json, folds, sources_json, created_at = row
    return StoredQuery(eval_id, json.loads(query_json), folds, _pinned(sources_json), created_at)


def insert_query(conn: duckdb.DuckDBPyConnection, query: StoredQuery) -> bool:
    """Register the evaluation unless it is registered (its id is a hash of everything
    stored, so an existing row is the same); returns whether it was new."""
    if find_query(conn, query.eval_id) is not None:
        return False
    conn.execute(
        f"INSERT INTO query_evaluations ({_QUERY_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
        [
            query.eval_id,
            json.dumps(query.document, sort_keys=True),
            query.folds,
            json.dumps([s.to_json() for s in query.sources]),
            query.created_at,
        ],
    )
    return True


def find_query(conn: duckdb.DuckDBPyConnection, eval_id: str) -> StoredQuery | None:
    row = conn.execute(
        f"SELECT {_QUERY_COLUMNS} FROM query_evaluations WHERE eval_id = ?", [eval_id]
    ).fetchone()
    return _query(row) if row else None


def load_query(conn: duckdb.DuckDBPyConnection, eval_id: str) -> StoredQuery:
    found = find_query(conn, eval_id)
    if found is None:
        raise NotFoundError(
            f"evalId={eval_id!r}: no such query evaluation (queries are registered by "
            "`eval-pipelines evaluate --file QUERY.json` or api.run_query)"
        )
    return found


def list_queries(conn: duckdb.DuckDBPyConnection) -> list[StoredQuery]:
    """Every registered query evaluation, oldest first."""
    rows = conn.execute(
        f"SELECT {_QUERY_COLUMNS} FROM query_evaluations ORDER BY created_at, eval_id"
    ).fetchall()
    return [_query(row) for row in rows]


def all_eval_ids(conn: duckdb.DuckDBPyConnection) -> list[str]:
    return [row[0] for row in conn.execute("SELECT eval_id FROM query_evaluations").fetchall()]


def delete_query(conn: duckdb.DuckDBPyConnection, eval_id: str) -> None:
    """Forget an evaluation and its result (a query the run refused)."""
    conn.execute("DELETE FROM query_results WHERE eval_id = ?", [eval_id])
    conn.execute("DELETE FROM query_evaluations WHERE eval_id = ?", [eval_id])


_RESULT_COLUMNS = (
    "eval_id, run_id, result_json, metrics_json, sources_json, elapsed_seconds, created_at"
)


def save_result(conn: duckdb.DuckDBPyConnection, result: StoredResult) -> None:
    """Store the evaluation's result, replacing the one an earlier run wrote."""
    conn.execute("DELETE FROM query_results WHERE eval_id = ?", [result.eval_id])
    conn.execute(
        f"INSERT INTO query_results ({_RESULT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            result.eval_id,
            result.run_id,
            json.dumps(result.result),
            json.dumps(result.metrics),
            json.dumps(result.sources),
            result.elapsed_seconds,
            result.created_at,
        ],
    )


def find_result(conn: duckdb.DuckDBPyConnection, eval_id: str) -> StoredResult | None:
    row = conn.execute(
        f"SELECT {_RESULT_COLUMNS} FROM query_results WHERE eval_id = ?", [eval_id]
    ).fetchone()
    if row is None:
        return None
    eval_id, run_id, result_json, metrics_json, sources_json, elapsed, created_at = row
    return StoredResult(
        eval_id,
        run_id,
        json.loads(result_json),
        json.loads(metrics_json),
        json.loads(sources_json),
        float(elapsed),
        created_at,
    )


def new_result(
    eval_id: str,
    *,
    run_id: str | None,
    result: dict[str, Any],
    metrics: dict[str, float | int | None],
    sources: list[dict[str, Any]],
    elapsed_seconds: float,
) -> StoredResult:
    """A result stamped now."""
    return StoredResult(eval_id, run_id, result, metrics, sources, elapsed_seconds, _now())


def new_query(
    eval_id: str, document: dict[str, Any], folds: int | None, sources: tuple[PinnedSource, ...]
) -> StoredQuery:
    """A registration stamped now."""
    return StoredQuery(eval_id, document, folds, sources, _now())
