"""Golden runs: every enabled case of a workflow's golden sets run as a test run against one
revision, four at a time, and scored field by field; and the activation gate's decision.

The warehouse is opened briefly before and after the cases run (never while nodes run), so
status readers and the sensor are not locked out.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from eval_pipelines import settings
from eval_pipelines.core.golden.gate import Gate, GatingEvidence, decide_gate
from eval_pipelines.core.golden.run import GoldenRun, ScoredRun
from eval_pipelines.core.golden.scoring import (
    CaseScore,
    RunScore,
    schema_drift,
    score_case,
    skipped_case,
    summarise_run,
)
from eval_pipelines.core.workflows.definition import Node, Workflow, check_plugins
from eval_pipelines.core.workflows.execute import (
    CachedStep,
    CacheKey,
    Execution,
    cache_keys,
    execute,
)
from eval_pipelines.core.workflows.nodes import StepContext, StepUsage
from eval_pipelines.core.workflows.output import map_output
from eval_pipelines.core.workflows.step_worker import cancel_on
from eval_pipelines.stages.shared_files import run_index_dir
from eval_pipelines.stages.workflow_chat import step_context
from eval_pipelines.storage import golden as golden_store
from eval_pipelines.storage import workflows as workflows_store
from eval_pipelines.storage.warehouse import transaction

OpenWarehouse = Callable[..., AbstractContextManager[duckdb.DuckDBPyConnection]]
CASES_AT_ONCE = 4  # 001: "Cases run four at a time"


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class Charge:
    """What the steps of one document's execution charged (001: a cached step bills
    nothing); ``usage``: its model calls (None: no metered step)."""

    executed_steps: int
    cached_steps: int
    cost_units: float
    usage: StepUsage | None = None


def sum_usage(usages: Collection[StepUsage | None]) -> StepUsage | None:
    """The usage of several executions (None when none had a metered step)."""
    found = [u for u in usages if u is not None]
    if not found:
        return None
    total = StepUsage()
    for usage in found:
        total = total + usage
    return total


@dataclass(frozen=True)
class RunOutcome:
    """What one golden run of one set did (for the asset's metadata and the CLI); ``charges``
    are its documents' executions, by document id (one execution per document, however many
    sets use it)."""

    golden_run_id: str
    set_name: str
    cases: int
    executed_steps: int
    cached_steps: int
    cost_units: float
    skipped: int
    charges: dict[str, Charge] = field(default_factory=dict)


def total_charge(outcomes: list[RunOutcome]) -> tuple[int, Charge]:
    """Distinct documents, and what their executions charged, over the runs of the sets run
    together: a document two sets share ran once, so it is counted once (each set's own run
    still reports the steps of its own documents)."""
    charges = {d: c for o in outcomes for d, c in o.charges.items()}
    return len(charges), Charge(
        sum(c.executed_steps for c in charges.values()),
        sum(c.cached_steps for c in charges.values()),
        sum(c.cost_units for c in charges.values()),
        sum_usage([c.usage for c in charges.values()]),
    )


def run_golden_sets(
    open_warehouse: OpenWarehouse,
    revision: str,
    *,
    set_names: list[str] | None = None,
    dagster_run_id: str | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    log: Callable[[str], None] = lambda _: None,
    index_dir: Path | None = None,
    threads: int = 1,
    warehouse_path: settings.WarehouseLocation | None = None,
) -> list[RunOutcome]:
    """Run the workflow's golden sets (all of them, or ``set_names``) against ``revision``.

    Each distinct document runs once, however many sets use it. When the run is interrupted
    (or ``should_stop`` turns true), cases not yet started are recorded as skipped and the
    golden run as ``stopped`` (a stopped run never opens the gate); the interrupt is raised
    again once that is stored. ``warehouse_path`` (default ``$EVAL_PIPELINES_WAREHOUSE``) is
    the file ``open_warehouse`` opens: a ``chat`` node's calls are cached there.
    """
    with open_warehouse(read_only=True) as conn:
        workflow = workflows_store.load_revision(conn, revision)
        check_plugins(workflow)  # before anything is written: the run would not be this revision
        sets = [s for s in golden_store.list_sets(conn, workflow.name)]
        if set_names is not None:
            sets = [s for s in sets if s.set_name in set_names]
        cases = {
            s.set_name: [c for c in golden_store.list_cases(conn, s.set_name) if c.enabled]
            for s in sets
        }
        document_ids = sorted({c.document_id for found in cases.values() for c in found})
        documents = {d: workflows_store.load_document(conn, d) for d in document_ids}
        until = _last_scored_node(workflow, [s.node_id for s in sets])
        keys: list[CacheKey] = [k for d in document_ids for k in cache_keys(workflow, d, until)]
        cache = workflows_store.cached_steps(conn, keys)
    started = _now()
    runs = {
        s.set_name: GoldenRun(
            f"g-{uuid.uuid4().hex[:12]}",
            s.set_name,
            workflow.name,
            revision,
            dagster_run_id,
            "running",
            started,
            None,
            0,
            0,
            0.0,
            s.threshold,
        )
        for s in sets
    }
    with open_warehouse() as conn, transaction(conn):
        for run in runs.values():
            golden_store.start_run(conn, run)
    log(
        f"running {sum(map(len, cases.values()))} case(s) of {len(sets)} set(s) over "
        f"{len(document_ids)} document(s), {CASES_AT_ONCE} at a time"
    )
    interrupted: BaseException | None = None
    if workflow.kind == "classify":
        from eval_pipelines.stages.golden_classify import classify_executions

        executions = classify_executions(
            open_warehouse,
            workflow,
            documents,
            cache,
            index_dir=index_dir or run_index_dir(settings.warehouse_location()),
            threads=threads,
        )
    else:
        context = step_context(warehouse_path or settings.warehouse_location())
        executions, interrupted = _execute_all(
            workflow, documents, cache, until, should_stop, log, context
        )
    stopped = len(executions) < len(documents)
    outcomes = []
    with open_warehouse() as conn, transaction(conn):
        workflows_store.cache_steps(
            conn,
            [(*key, output) for e in executions.values() for key, output in e.new_cache.items()],
        )
        for golden_set in sets:
            node = workflow.scored_node(golden_set.node_id)
            results = []
            for case in cases[golden_set.set_name]:
                execution = executions.get(case.document_id)
                results.append((golden_set.set_name, _case_result(case, execution, node, workflow)))
            run = runs[golden_set.set_name]
            # A document used by two cases ran once: its steps are counted and charged once.
            used = {
                d: Charge(
                    executions[d].executed_steps,
                    executions[d].cached_steps,
                    executions[d].cost_units,
                    executions[d].total_usage(),
                )
                for d in sorted({c.document_id for c in cases[golden_set.set_name]})
                if d in executions
            }
            cost = sum(c.cost_units for c in used.values())
            executed = sum(c.executed_steps for c in used.values())
            cached = sum(c.cached_steps for c in used.values())
            golden_store.finish_run(
                conn,
                run.golden_run_id,
                results,
                status="stopped" if stopped else "completed",
                cost_units=cost,
                executed_steps=executed,
                cached_steps=cached,
                usage=sum_usage([c.usage for c in used.values()]),
            )
            outcomes.append(
                RunOutcome(
                    run.golden_run_id,
                    golden_set.set_name,
                    len(results),
                    executed,
                    cached,
                    cost,
                    sum(1 for _, r in results if not r.ran),
                    used,
                )
            )
    if interrupted is not None:
        raise interrupted
    return outcomes


def close_abandoned_runs(
    conn: duckdb.DuckDBPyConnection, ended: Callable[[list[str]], dict[str, str]]
) -> list[str]:
    """Close as ``failed`` the runs still marked ``running`` whose Dagster run is over (its
    process killed, or a failure outside the path that closes them) or gone; ``ended`` maps
    Dagster run ids to why their run is over (live runs left out). Returns the runs closed.
    A run without a Dagster run id cannot be checked and is left as it is."""
    running = [r for r in golden_store.running_runs(conn) if r.dagster_run_id is not None]
    if not running:
        return []
    reasons = ended(sorted({r.dagster_run_id for r in running if r.dagster_run_id}))
    closed = []
    for run in running:
        reason = reasons.get(run.dagster_run_id or "")
        if reason is not None and golden_store.close_abandoned_run(
            conn, run.golden_run_id, f"left running: {reason}"
        ):
            closed.append(run.golden_run_id)
    return closed


def _last_scored_node(workflow: Workflow, node_ids: list[str]) -> str | None:
    """The last node any of the sets scores: later nodes need not run."""
    positions = [i for i, n in enumerate(workflow.nodes) if n.id in node_ids]
    return workflow.nodes[max(positions)].id if positions else None


def _execute_all(
    workflow: Workflow,
    documents: dict[str, Any],
    cache: dict[CacheKey, CachedStep],
    until: str | None,
    should_stop: Callable[[], bool],
    log: Callable[[str], None],
    context: StepContext | None = None,
) -> tuple[dict[str, Execution], BaseException | None]:
    """Run the documents four at a time. An interrupt (the run terminated from the UI, or
    Ctrl-C) stops new documents from starting; the ones already done are kept, and the
    interrupt is returned for the caller to raise once they are stored."""
    stop = threading.Event()

    def one(document_id: str) -> Execution | None:
        if stop.is_set() or should_stop():
            return None
        # A step under way when the run is interrupted is abandoned (its worker process
        # killed), so the pool below can wind down; the document counts as not reached.
        with cancel_on(stop):
            return execute(workflow, documents[document_id], cache, until=until, context=context)

    started = time.perf_counter()
    done: dict[str, Execution] = {}
    interrupted: BaseException | None = None
    pool = ThreadPoolExecutor(max_workers=CASES_AT_ONCE)
    futures = {document_id: pool.submit(one, document_id) for document_id in documents}
    try:
        for document_id, future in futures.items():
            execution = future.result()
            if execution is not None:
                done[document_id] = execution
                if len(done) % 20 == 0 or len(done) == len(documents):
                    usage = sum_usage([e.total_usage() for e in done.values()])
                    elapsed = time.perf_counter() - started
                    left = len(documents) - len(done)
                    eta = f", ETA {elapsed / len(done) * left:.0f} s" if left else ""
                    log(
                        f"{len(done)}/{len(documents)} documents ({elapsed:.1f} s{eta})"
                        + (f"; {usage.summary()}" if usage is not None else "")
                    )
    except BaseException as error:  # noqa: BLE001 - Dagster's interrupt is a BaseException
        interrupted = error
        stop.set()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if interrupted is not None:
        # Documents that finished while the pool wound down still count.
        for document_id, future in futures.items():
            if document_id not in done and future.done() and not future.cancelled():
                if future.exception() is None and future.result() is not None:
                    done[document_id] = future.result()  # type: ignore[assignment]
    return done, interrupted


def _case_result(
    case: golden_store.GoldenCase, execution: Execution | None, node: Node, workflow: Workflow
) -> golden_store.CaseResult:
    if execution is None:
        return golden_store.CaseResult(
            case.case_id,
            workflow.revision,
            False,
            None,
            None,
            "the run stopped before this case",
            0,
            0,
        )
    raw = execution.outputs.get(node.id)
    output = map_output(node.schema, raw) if raw is not None else None
    return golden_store.CaseResult(
        case.case_id,
        execution.revision,
        True,
        output,
        execution.error if raw is None else None,
        None,
        execution.executed_steps,
        execution.cached_steps,
        execution.total_usage(),
    )


def score_run(
    conn: duckdb.DuckDBPyConnection,
    golden_run_id: str,
    *,
    case_ids: Collection[str] | None = None,
) -> ScoredRun:
    """Score a stored run: each case's stored output against its labels, with the schema of
    the revision the run scored (so stale labels are judged against that revision); only the
    results of ``case_ids`` when given (the gate scores the set's enabled cases)."""
    run = golden_store.load_run(conn, golden_run_id)
    golden_set = golden_store.load_set(conn, run.set_name)
    workflow = workflows_store.load_revision(conn, run.revision)
    schema = workflow.scored_node(golden_set.node_id).schema
    cases = {c.case_id: c for c in golden_store.list_cases(conn, run.set_name)}
    scored: dict[str, CaseScore] = {}
    usage: dict[str, StepUsage] = {}
    drifted = []
    mixed = []
    for result in golden_store.results_of_run(conn, golden_run_id):
        case = cases.get(result.case_id)
        if case is None:
            continue  # deleted since: its results went with it
        if case_ids is not None and result.case_id not in case_ids:
            continue
        if result.usage is not None:
            usage[result.case_id] = result.usage
        if result.revision != run.revision:
            mixed.append(result.case_id)
        if schema_drift(case.schema_fingerprint, schema):
            drifted.append(result.case_id)
        if not result.ran:
            scored[result.case_id] = skipped_case(result.skip_reason or "not reached")
            continue
        scored[result.case_id] = score_case(
            schema,
            case.labels,
            result.output,
            key_columns={k: tuple(v) for k, v in case.key_columns.items()},
            output_error=result.error,
        )
    return ScoredRun(
        run,
        summarise_run(list(scored.values()), schema=schema),
        scored,
        tuple(drifted),
        tuple(mixed),
        usage,
    )


def gate_decision(
    conn: duckdb.DuckDBPyConnection,
    revision: str,
    *,
    step_succeeded: Callable[[str | None], bool],
) -> Gate:
    """The activation gate for exactly this revision: the evidence of every golden set marked
    ``--gate``, read here, judged by :func:`~eval_pipelines.core.golden.gate.decide_gate`
    (where the rule lives). The ``golden_report`` asset (once per gating run; the check reads
    its stored decision), ``workflow activate`` and ``workflow status`` call this.

    ``step_succeeded`` says whether the ``golden_run`` step of a Dagster run (given its id,
    None for a golden run made outside Dagster) succeeded: a golden run counts only then. The
    step stores the run as completed before it ends, so an interrupt in between leaves a
    completed run of a canceled step, which must never open the gate."""
    workflow = workflows_store.load_revision(conn, revision)
    evidence = [
        _gating_evidence(conn, golden_set, revision, step_succeeded)
        for golden_set in golden_store.list_sets(conn, workflow.name)
        if golden_set.gate
    ]
    return decide_gate(workflow.name, revision, evidence)


def counted_runs(
    conn: duckdb.DuckDBPyConnection,
    set_name: str,
    step_succeeded: Callable[[str | None], bool],
    *,
    revision: str | None = None,
    limit: int = 50,
) -> list[GoldenRun]:
    """The set's completed runs (newest first, at most ``limit``) whose ``golden_run`` step
    succeeded (see :func:`gate_decision`)."""
    fetched = limit
    while True:
        completed = golden_store.runs_of_set(
            conn, set_name, revision=revision, status="completed", limit=fetched
        )
        counted = [run for run in completed if step_succeeded(run.dagster_run_id)]
        if len(counted) >= limit or len(completed) < fetched:
            return counted[:limit]
        fetched += limit - len(counted)  # as many more as were left out


def _gating_evidence(
    conn: duckdb.DuckDBPyConnection,
    golden_set: golden_store.GoldenSet,
    revision: str,
    step_succeeded: Callable[[str | None], bool],
) -> GatingEvidence:
    """What the gate needs of one set: its newest completed run against the revision whose
    step succeeded, scored on the cases enabled now. Case ids are never reused and a case's
    labels are never edited, so a result belongs to the case as it is."""
    runs = counted_runs(conn, golden_set.set_name, step_succeeded, revision=revision, limit=1)
    if not runs:
        newest = golden_store.runs_of_set(conn, golden_set.set_name, revision=revision, limit=1)
        return GatingEvidence(
            golden_set.set_name,
            golden_set.threshold,
            None,
            unfinished=_unfinished(newest[0], step_succeeded) if newest else None,
        )
    run_id = runs[0].golden_run_id
    enabled = tuple(
        c.case_id for c in golden_store.list_cases(conn, golden_set.set_name) if c.enabled
    )
    covered = frozenset(r.case_id for r in golden_store.results_of_run(conn, run_id))
    scored = score_run(conn, run_id, case_ids=set(enabled))
    return GatingEvidence(
        golden_set.set_name,
        golden_set.threshold,
        run_id,
        enabled=enabled,
        covered=covered,
        score=scored.score,
        mixed_revisions=scored.mixed_revisions,
        without_output=tuple(_without_output(scored)),
    )


def _unfinished(run: GoldenRun, step_succeeded: Callable[[str | None], bool]) -> str:
    """Why the newest run does not count: its status, or that its step did not succeed."""
    if run.status == "completed" and not step_succeeded(run.dagster_run_id):
        return (
            f"{run.golden_run_id}, stored as completed by Dagster run {run.dagster_run_id} "
            "whose golden_run step did not succeed, so it does not count"
        )
    return run.status + (f", {run.reason}" if run.reason else "")


def ensure_revision(
    open_warehouse: OpenWarehouse, revision: str, workflow_file: str | None
) -> tuple[Workflow, bool]:
    """The stored revision; a revision the sensor found in a committed file is saved here
    first (the sensor itself writes nothing). Returns the workflow and whether it was saved
    now."""
    from eval_pipelines.core.errors import ConflictError, NotFoundError
    from eval_pipelines.core.workflows.files import load_workflow_file
    from eval_pipelines.stages.golden_classify import pin_workflow

    with open_warehouse(read_only=True) as conn:
        if workflows_store.has_revision(conn, revision):
            return workflows_store.load_revision(conn, revision), False
    if workflow_file is None:
        raise NotFoundError(
            f"revision={revision!r}: no such workflow revision; save one with "
            "'eval-pipelines workflow save NAME --file FILE' (its partition is added for you)"
        )
    from pathlib import Path

    with open_warehouse(read_only=True) as conn:
        workflow = pin_workflow(conn, load_workflow_file(Path(workflow_file)))
    if workflow.revision != revision:
        raise ConflictError(
            f"revision={revision!r}: {workflow_file} changed since the sensor read it (it is "
            f"now revision {workflow.revision}, which the sensor gates on its next tick)"
        )
    with open_warehouse() as conn, transaction(conn):
        saved = workflows_store.save_revision(
            conn, workflow, source=f"file:{workflow_file}", saved_by=None
        )
        workflows_store.record_file_revision(conn, workflow_file, workflow.name, revision)
    return workflow, saved


def runs_for_dagster_run(
    conn: duckdb.DuckDBPyConnection, dagster_run_id: str, revision: str
) -> list[GoldenRun]:
    """The golden runs a Dagster run made; for a report materialised on its own, each set's
    newest run against the revision."""
    made = golden_store.runs_of_dagster_run(conn, dagster_run_id)
    if made:
        return made
    workflow = workflows_store.load_revision(conn, revision)
    newest = []
    for golden_set in golden_store.list_sets(conn, workflow.name):
        runs = golden_store.runs_of_set(conn, golden_set.set_name, revision=revision, limit=1)
        newest.extend(runs)
    return newest


def _without_output(scored: ScoredRun) -> list[tuple[str, str]]:
    """``(case id, why)`` of the cases the revision produced no output for."""
    return [
        (case_id, (case.reason or "").removeprefix("no output: "))
        for case_id, case in scored.cases.items()
        if case.status == "errored" and (case.reason or "").startswith("no output")
    ]


def field_accuracy(score: RunScore, field: str | None) -> tuple[float | None, int]:
    """Overall field accuracy, or one field's (``table.column`` for a column); ``None`` when
    the run did not score it (a gap in a trend, never a zero)."""
    if field is None:
        return score.field_accuracy, score.field_scored
    found = score.field(field)
    if found is None or found.scored == 0:
        return None, 0
    return found.accuracy, found.scored
