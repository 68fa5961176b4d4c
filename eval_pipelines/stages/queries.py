"""Evaluate queries (spec 003) as stored evaluations: the id that pins a query to the data it
reads, the stored query checked against the warehouse, one run of the engine, its result.

The engine runs outside the warehouse lock: the warehouse is opened briefly to read the query,
once per table the engine asks for, and once to store the result.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

import duckdb

from eval_pipelines.core.errors import ConflictError, InputError
from eval_pipelines.core.hashing import hash_json
from eval_pipelines.core.queries.engine import QueryOutcome, run_folds, run_query
from eval_pipelines.core.queries.query import Query, parse_query
from eval_pipelines.core.queries.source import Source
from eval_pipelines.storage import data_tables as data_tables_store
from eval_pipelines.storage import query_evaluations as query_evaluations_store
from eval_pipelines.storage.query_evaluations import PinnedSource, StoredQuery
from eval_pipelines.storage.warehouse import transaction

OpenWarehouse = Callable[..., AbstractContextManager[duckdb.DuckDBPyConnection]]
EVAL_ID_PREFIX = "q-"
# Progress reaches the run's log at most this often (a log line per scored row would drown it).
PROGRESS_SECONDS = 5.0


def evaluation_id(
    document: Mapping[str, Any], sources: tuple[PinnedSource, ...], folds: int | None = None
) -> str:
    """``q-`` and 12 hex digits of the SHA-256 of the query document's canonical JSON (sorted
    keys) with the sorted ``(name, kind, version)`` of the tables it reads (the tables its
    links lead to included), and the fold count of a k-fold sweep: the same query on the same
    data is the same evaluation."""
    pinned = sorted((s.name, s.kind, s.version) for s in sources)
    content: dict[str, Any] = {"query": dict(document), "sources": [list(p) for p in pinned]}
    if folds is not None:
        content["folds"] = folds
    return EVAL_ID_PREFIX + hash_json(content, length=12)


def validate_folds(folds: Any) -> int | None:
    """``None`` (the query's own test selector) or a fold count from 2 to 1000. (The engine
    checks that the query's test is the sweep's ``$index $mod`` selector.)"""
    if folds is None:
        return None
    if isinstance(folds, bool) or not isinstance(folds, int) or not 2 <= folds <= 1000:
        raise InputError("folds", folds, "must be a whole number of folds from 2 to 1000")
    return folds


def pin_sources(conn: duckdb.DuckDBPyConnection, query: Query) -> tuple[PinnedSource, ...]:
    """The current version of every table the query reads, sorted by name: the base tables
    and the tables their links lead to when the query follows that link (a linked table
    reloaded changes what the query reads, and so its id)."""
    names = list(query.table_names())
    used = set(query.link_columns())
    for name in query.table_names():
        if used and data_tables_store.table_exists(conn, name):
            links = data_tables_store.table_info(conn, name).links
            names += [target for column, target in links.items() if column in used]
    return tuple(
        sorted(
            (query_evaluations_store.pin_source(conn, name) for name in dict.fromkeys(names)),
            key=lambda s: s.name,
        )
    )


def load_pinned_query(conn: duckdb.DuckDBPyConnection, eval_id: str) -> tuple[StoredQuery, Query]:
    """The stored query, validated again, with its pinned tables still at their versions.

    Raises :class:`ConflictError` when a table was reloaded (or a case's records replaced)
    since the query was registered: its id names the old data, so the query must be submitted
    again.
    """
    stored = query_evaluations_store.load_query(conn, eval_id)
    query = parse_query(stored.document)
    for pinned in stored.sources:
        current = query_evaluations_store.pin_source(conn, pinned.name)
        _require_pinned(eval_id, pinned, current.kind, current.version)
    return stored, query


def _require_pinned(eval_id: str, pinned: PinnedSource, kind: str, version: str) -> None:
    if (kind, version) != (pinned.kind, pinned.version):
        raise ConflictError(
            f"evalId={eval_id!r}: {pinned.kind} {pinned.name!r} is now at {kind} version "
            f"{version}, the evaluation pins version {pinned.version}; submit the query again "
            "(eval-pipelines evaluate --file QUERY.json) to evaluate the current data"
        )


def _pinned_resolver(
    open_warehouse: OpenWarehouse, eval_id: str, pinned: tuple[PinnedSource, ...]
) -> Callable[[str], Source]:
    """``resolve(name)`` for the engine: each table read once, briefly, and checked against the
    version the evaluation pins."""
    by_name = {s.name: s for s in pinned}
    loaded: dict[str, Source] = {}

    def resolve(name: str) -> Source:
        if name not in loaded:
            with open_warehouse(read_only=True) as conn:
                source = data_tables_store.read_source(conn, name)
            if name in by_name:
                _require_pinned(eval_id, by_name[name], source.kind, source.version)
            loaded[name] = source
        return loaded[name]

    return resolve


def _progress_log(
    log: Callable[[str], None], clock: Callable[[], float], every: float
) -> Callable[[int, int], None]:
    """``progress(done, total)`` that logs at most every ``every`` seconds (and at the end)."""
    last = [clock()]

    def progress(done: int, total: int) -> None:
        now = clock()
        if done >= total or now - last[0] >= every:
            log(f"scored {done} of {total} test rows")
            last[0] = now

    return progress


def run_stored_query(
    open_warehouse: OpenWarehouse,
    eval_id: str,
    *,
    run_id: str | None,
    log: Callable[[str], None] = lambda _: None,
    clock: Callable[[], float] = time.monotonic,
    progress_seconds: float = PROGRESS_SECONDS,
) -> QueryOutcome:
    """Run the stored query (or its k-fold sweep) on its pinned tables and store the result,
    replacing the one an earlier run wrote."""
    with open_warehouse(read_only=True) as conn:
        stored, query = load_pinned_query(conn, eval_id)
    resolve = _pinned_resolver(open_warehouse, eval_id, stored.sources)
    progress = _progress_log(log, clock, progress_seconds)
    if stored.folds is not None:
        log(f"{stored.folds}-fold sweep of {query.kind} {query.target!r}")
        outcome = run_folds(query, resolve, folds=stored.folds, clock=clock, progress=progress)
    else:
        outcome = run_query(query, resolve, clock=clock, progress=progress)
    result = query_evaluations_store.new_result(
        eval_id,
        run_id=run_id,
        result=outcome.result,
        metrics=outcome.metrics,
        sources=[s.to_json() for s in outcome.sources],
        elapsed_seconds=outcome.elapsed_seconds,
    )
    with open_warehouse() as conn, transaction(conn):
        query_evaluations_store.save_result(conn, result)
    return outcome
