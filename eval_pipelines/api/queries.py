"""Queries (spec 003) as Dagster-materialised evaluations: :func:`run_query`,
:func:`get_query`, :func:`list_queries` (the CLI's ``evaluate`` and ``evaluations``).

A query is validated, stored and registered as a key of the dynamic partitions
``query_evaluations``; a run of job ``evaluate_query_job`` computes it. The key is the
evaluation id, a hash of the query with the versions of the tables it reads: the same query
on the same data is answered from the stored result, without a run.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from eval_pipelines.api._shared import (
    EvalFailed,
    open_warehouse,
    require_run_warehouse,
    step_refusal,
    stored_by_a_succeeded_step,
)
from eval_pipelines.core.errors import InputError, RunRefusal
from eval_pipelines.core.files import parse_json_text, read_json
from eval_pipelines.core.queries.engine import check_query
from eval_pipelines.core.queries.query import parse_query
from eval_pipelines.core.queries.report import headline
from eval_pipelines.core.results import JsonResult, json_field
from eval_pipelines.runs.states import RunState
from eval_pipelines.stages import queries as stage
from eval_pipelines.storage import data_tables as data_tables_store
from eval_pipelines.storage import query_evaluations as query_evaluations_store
from eval_pipelines.storage.query_evaluations import StoredQuery, StoredResult
from eval_pipelines.storage.warehouse import transaction

__all__ = [
    "QueryEvaluation",
    "QueryListing",
    "QueryRefused",
    "QueryResult",
    "StoredQueryEvaluation",
    "StoredQueryResult",
    "get_query",
    "list_queries",
    "parse_query_text",
    "read_query",
    "run_query",
]

KIND = "query"
RESULT_STEP = "evaluate_result"  # the step that stores the result: it counts once that succeeded
# The longest maxTime (3600 s) and room for the run to start and store its result.
DEFAULT_TIMEOUT = 3900.0


class QueryRefused(RunRefusal):
    """The run refused the query (a column or table the query names is not in the data, a
    table reloaded since it was submitted); nothing is stored."""

    def __init__(self, message: str) -> None:
        super().__init__("query", message)


@dataclass(frozen=True, kw_only=True)
class QueryEvaluation(JsonResult):
    """What identifies a query's answer: the evaluation id, the run that computed it (None
    for a result stored before runs were recorded), whether it was ``cached`` (answered from
    the stored result), the fold count of a k-fold sweep (None: the query's own test), the
    sources read (name, kind, version, rows) and every scalar metric."""

    eval_id: str
    run_id: str | None = None
    cached: bool | None = json_field(omit_none=True, default=None)
    folds: int | None = None
    sources: tuple[dict[str, Any], ...] | None = json_field(omit_none=True, default=None)
    metrics: dict[str, float | int | None] | None = json_field(omit_none=True, default=None)
    elapsed_seconds: float | None = json_field(omit_none=True, default=None)


@dataclass(frozen=True, kw_only=True)
class StoredQueryEvaluation(QueryEvaluation):
    """A stored evaluation (:func:`get_query`): beside what identifies its answer (none of it
    before a run stored one), its query, the sources it pins, ``status`` (``complete``,
    ``truncated`` or ``no result``), the newest run's state (``runId``, ``state``,
    ``dagsterStatus``, ``reason``; None before any run) and when it was registered."""

    query: dict[str, Any]
    pinned: tuple[dict[str, str], ...]
    status: str
    run: dict[str, str | None] | None
    created_at: str

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        if self.sources is None:  # no run stored a result: no answer to identify
            del document["runId"]
        return document


@dataclass(frozen=True)
class QueryResult(JsonResult):
    """A query's answer: ``response`` is the 003 response document (the selected metrics,
    case lists when selected, ``truncated``/``requested``/``message`` when relevant),
    ``evaluation`` what identifies it. Its JSON is the 003 response with ``evaluation``
    beside its keys."""

    response: dict[str, Any]
    evaluation: QueryEvaluation

    def to_json(self) -> dict[str, Any]:
        return {**self.response, "evaluation": self.evaluation.to_json()}


@dataclass(frozen=True)
class StoredQueryResult(JsonResult):
    """A stored evaluation: its 003 response once a run stored one (None before), and what
    identifies it. Its JSON is the 003 response (if any) with ``evaluation`` beside."""

    response: dict[str, Any] | None
    evaluation: StoredQueryEvaluation

    def to_json(self) -> dict[str, Any]:
        return {**(self.response or {}), "evaluation": self.evaluation.to_json()}


@dataclass(frozen=True)
class QueryListing(JsonResult):
    """One stored evaluation in :func:`list_queries`: what it predicts or estimates (one of
    ``predict``, ``estimate``) from which ``tables``, its fold count, status, headline and the
    run of its result."""

    eval_id: str
    created_at: str
    predict: str | None = json_field(omit_none=True)
    estimate: str | None = json_field(omit_none=True)
    tables: tuple[str, ...] = json_field("from")
    folds: int | None = None
    status: str = "no result"
    headline: str | None = None
    run_id: str | None = None


def parse_query_text(
    text: str, *, field: str = "query", value: object = None
) -> Mapping[str, object]:
    """A query document from JSON text; a refusal names ``field`` and ``value`` (default the
    text itself)."""
    return _query_object(parse_json_text(text, field, text if value is None else value))


def _query_object(document: object) -> dict[str, Any]:
    if not isinstance(document, dict):
        raise InputError("query", document, "must be a JSON object (spec 003)")
    return document


def read_query(query: Mapping[str, object] | str | Path) -> Mapping[str, object]:
    """The query document: a mapping, JSON text, or the path of a JSON file."""
    if isinstance(query, Mapping):
        return dict(query)
    if isinstance(query, str) and query.lstrip().startswith("{"):
        return parse_query_text(query)
    return _query_object(read_json(query, "query"))


def _evaluation(
    stored: StoredQuery, result: StoredResult, *, cached: bool | None = None
) -> QueryEvaluation:
    return QueryEvaluation(
        eval_id=stored.eval_id,
        run_id=result.run_id,
        cached=cached,
        folds=stored.folds,
        sources=tuple(result.sources),
        metrics=result.metrics,
        elapsed_seconds=result.elapsed_seconds,
    )


def _response(stored: StoredQuery, result: StoredResult, *, cached: bool) -> QueryResult:
    """The 003 response as stored, and beside it what identifies it."""
    return QueryResult(result.result, _evaluation(stored, result, cached=cached))


def run_query(
    query: Mapping[str, object] | str | Path,
    *,
    folds: int | None = None,
    submit: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    warehouse: Path | str | None = None,
) -> QueryResult:
    """Evaluate a query (spec 003) and return its answer (the CLI's ``evaluate``).

    The response's keys are exactly 003's (the selected metrics, case lists when selected,
    ``truncated``/``requested``/``message`` when relevant); beside them, ``evaluation`` holds
    the evaluation id, the run that computed it, whether it was ``cached``, the fold count,
    the sources read (name, kind, version, rows) and every scalar metric.

    ``folds`` runs a deterministic k-fold sweep (fold r tests the rows at positions ≡ r mod k)
    and averages it. The answer is what this returns, so it always waits for the run, as
    golden's ``run_and_report`` and lift's ``ingest`` do (no ``wait=``: in this API
    ``wait=False`` means "submit and return"). The run is launched as every run is
    (:func:`eval_pipelines.runs.launch`): by default it executes in this process when a run
    slot is free; ``submit`` sends it to the instance's run queue instead (the daemon or the
    dispatcher executes it, as the CLI's ``evaluate --submit``). A queued run is waited for up
    to ``timeout`` seconds. A complete, untruncated result stored for the same query on the
    same table versions is returned without a run.

    Raises :class:`InputError` for a query 003 refuses (before anything is stored),
    :class:`QueryRefused` when the run refuses it against the data (nothing stored),
    :class:`EvalFailed` when the run fails.
    """
    if not isinstance(submit, bool):
        raise InputError("submit", submit, "must be true or false")
    require_run_warehouse(warehouse)
    parsed = parse_query(read_query(query))
    folds = stage.validate_folds(folds)
    with open_warehouse(warehouse) as conn, transaction(conn):
        pinned = stage.pin_sources(conn, parsed)
        eval_id = stage.evaluation_id(parsed.document, pinned, folds)
        stored = query_evaluations_store.find_query(conn, eval_id)
        result = query_evaluations_store.find_result(conn, eval_id)
        if stored is not None and result is not None and not result.truncated:
            from eval_pipelines.runs.instance import dagster_instance

            if stored_by_a_succeeded_step(dagster_instance(), result.run_id, RESULT_STEP):
                return _response(stored, result, cached=True)
        # Refuse what the data cannot answer (a column, a link, a target's kind, a sweep's
        # selector) before anything is stored or a run is launched.
        check_query(parsed, lambda name: data_tables_store.read_source(conn, name), folds=folds)
        stored = query_evaluations_store.new_query(eval_id, parsed.document, folds, pinned)
        new = query_evaluations_store.insert_query(conn, stored)
    run_id = str(uuid.uuid4())
    state = _run(eval_id, submit, run_id, timeout)
    if state.state != "succeeded":
        refusal = _refusal(run_id)
        if refusal is not None:
            if new:
                _forget(eval_id, warehouse)
            raise QueryRefused(refusal)
        raise EvalFailed(
            f"evaluation {eval_id}: run {run_id} {state.state}: "
            f"{state.reason or 'see the run in the Dagster UI'}",
            state.to_json(),
        )
    with open_warehouse(warehouse, read_only=True) as conn:
        result = query_evaluations_store.find_result(conn, eval_id)
    if result is None or result.run_id != run_id:
        raise EvalFailed(
            f"evaluation {eval_id}: run {run_id} succeeded without storing its result",
            state.to_json(),
        )
    return _response(stored, result, cached=False)


def _run(eval_id: str, submit: bool, run_id: str, timeout: float) -> RunState:
    """Run job ``evaluate_query_job`` on the evaluation's partition, in this process or
    (``submit``) through the run queue; returns the ended run's state (a submitted run is
    waited for)."""
    from eval_pipelines import runs

    state = runs.launch(KIND, eval_id, wait=not submit, run_id=run_id, timeout=timeout)
    if not state.finished:
        state = runs.wait(state.run_id, timeout)
    return state


def _refusal(run_id: str) -> str | None:
    """The refusal a step of the run raised (see ``defs.queries``), if any."""
    from eval_pipelines.defs.queries import REFUSED

    return step_refusal(run_id, REFUSED)


def _forget(eval_id: str, warehouse: Path | str | None) -> None:
    """Remove a refused evaluation: its stored query and its partition key."""
    from eval_pipelines import runs
    from eval_pipelines.runs.instance import dagster_instance

    with open_warehouse(warehouse) as conn, transaction(conn):
        query_evaluations_store.delete_query(conn, eval_id)
    instance = dagster_instance()
    partitions = runs.kind_of(KIND).partitions
    assert partitions is not None  # query evaluations are partitions
    if instance.has_dynamic_partition(partitions, eval_id):
        instance.delete_dynamic_partition(partitions, eval_id)


def get_query(eval_id: str, *, warehouse: Path | str | None = None) -> StoredQueryResult:
    """A stored evaluation (the CLI's ``evaluations show``): its 003 response once a run
    stored one, and under ``evaluation`` its id, query, fold count, pinned sources, the newest
    run's state and ``status`` (``complete``, ``truncated`` or ``no result``)."""
    from eval_pipelines import runs
    from eval_pipelines.runs.instance import dagster_instance

    with open_warehouse(warehouse, read_only=True) as conn:
        stored = query_evaluations_store.load_query(conn, eval_id)
        result = query_evaluations_store.find_result(conn, eval_id)
    instance = dagster_instance()
    if result is not None and not stored_by_a_succeeded_step(instance, result.run_id, RESULT_STEP):
        result = None  # stored by a step that did not succeed: it does not count
    newest = runs.newest_run(instance, eval_id)
    about = StoredQueryEvaluation(
        eval_id=eval_id,
        folds=stored.folds,
        query=stored.document,
        pinned=tuple(s.to_json() for s in stored.sources),
        status=_status(result),
        run=runs.run_state(instance, newest).to_json() if newest is not None else None,
        created_at=stored.created_at.isoformat(timespec="seconds"),
    )
    if result is None:
        return StoredQueryResult(None, about)
    answered = _evaluation(stored, result)
    return StoredQueryResult(
        result.result,
        replace(
            about,
            run_id=answered.run_id,
            sources=answered.sources,
            metrics=answered.metrics,
            elapsed_seconds=answered.elapsed_seconds,
        ),
    )


def _status(result: StoredResult | None) -> str:
    if result is None:
        return "no result"
    return "truncated" if result.truncated else "complete"


def list_queries(*, warehouse: Path | str | None = None) -> tuple[QueryListing, ...]:
    """Every query evaluation, oldest first (the CLI's ``evaluations list``): id, what it
    predicts or estimates and from which tables, its fold count, status and headline."""
    with open_warehouse(warehouse, read_only=True) as conn:
        stored = query_evaluations_store.list_queries(conn)
        results = {q.eval_id: query_evaluations_store.find_result(conn, q.eval_id) for q in stored}
    listed = []
    for query in stored:
        parsed = parse_query(query.document)
        result = results[query.eval_id]
        listed.append(
            QueryListing(
                eval_id=query.eval_id,
                created_at=query.created_at.isoformat(timespec="seconds"),
                predict=parsed.target if parsed.kind == "predict" else None,
                estimate=parsed.target if parsed.kind == "estimate" else None,
                tables=parsed.table_names(),
                folds=query.folds,
                status=_status(result),
                headline=headline(result.metrics) if result is not None else None,
                run_id=result.run_id if result is not None else None,
            )
        )
    return tuple(listed)
