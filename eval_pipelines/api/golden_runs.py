"""Golden runs (spec 001): a set run against a revision as a Dagster run of ``golden_gate``,
its report and the activation gate's decision, two runs compared, a set's trend."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import duckdb

from eval_pipelines.api._golden_state import (
    close_abandoned_runs,
    gate_decision,
    golden_run_step_succeeded,
    sync_workflow_files,
)
from eval_pipelines.api._shared import (
    EvalFailed,
    open_warehouse,
    require_run_warehouse,
)
from eval_pipelines.api.golden_results import (
    ComparedRunResult,
    GoldenComparisonResult,
    GoldenReportResult,
    GoldenRunLaunchResult,
    GoldenRunResult,
    GoldenTrendResult,
    TrendPointResult,
)
from eval_pipelines.core.errors import ConflictError, InputError
from eval_pipelines.core.golden.run import ScoredRun
from eval_pipelines.core.golden.scoring import compare_runs
from eval_pipelines.stages import golden as golden_stage
from eval_pipelines.storage import golden as golden_store
from eval_pipelines.storage import workflows as workflows_store
from eval_pipelines.storage.warehouse import transaction


def run_set(
    set_name: str,
    *,
    revision: str | None = None,
    wait: bool = False,
    timeout: float | None = None,
    warehouse: Path | str | None = None,
) -> GoldenRunLaunchResult:
    """Run the set against ``revision`` (default the workflow's newest) as a Dagster run of
    job ``golden_gate`` on the revision's partition, launched as every run is
    (:func:`eval_pipelines.runs.launch`: ``wait`` executes it in this process when a run slot
    is free, else waits up to ``timeout`` s for it; without ``wait`` it is submitted to the
    queue)."""
    if not isinstance(wait, bool):
        raise InputError("wait", wait, "must be true or false")
    # The run reads $EVAL_PIPELINES_WAREHOUSE: its results would land there, not here.
    require_run_warehouse(warehouse)
    with open_warehouse(warehouse) as conn, transaction(conn):
        sync_workflow_files(conn)
        close_abandoned_runs(conn)
        golden_set = golden_store.load_set(conn, set_name)
        revisions = workflows_store.require_workflow(conn, golden_set.workflow)
        chosen = (
            workflows_store.revision_of_workflow(conn, golden_set.workflow, revision)
            if revision
            else revisions[0].revision
        )
        if not any(c.enabled for c in golden_store.list_cases(conn, set_name)):
            raise ConflictError(f"set={set_name!r}: no enabled case to run; add cases first")
    from eval_pipelines import runs
    from eval_pipelines.defs.golden import SETS_TAG, WORKFLOW_TAG

    state = runs.launch(
        "golden",
        chosen,
        wait=wait,
        tags={SETS_TAG: set_name, WORKFLOW_TAG: golden_set.workflow},
        timeout=timeout,
    )
    return GoldenRunLaunchResult(
        set_name=set_name, revision=chosen, run_id=state.run_id, state=state.state
    )


def golden_runs_of(
    dagster_run_id: str, *, warehouse: Path | str | None = None
) -> tuple[GoldenReportResult, ...]:
    """The scored golden runs a Dagster run made (its reports)."""
    succeeded = golden_run_step_succeeded()
    with open_warehouse(warehouse) as conn:
        close_abandoned_runs(conn)
        return tuple(
            _report(golden_stage.score_run(conn, r.golden_run_id), succeeded)
            for r in golden_store.runs_of_dagster_run(conn, dagster_run_id)
        )


def _report(scored: ScoredRun, step_succeeded: Callable[[str | None], bool]) -> GoldenReportResult:
    """The run's report, saying whether it counts (its ``golden_run`` step succeeded)."""
    return GoldenReportResult.of(scored, step_succeeded=step_succeeded(scored.run.dagster_run_id))


def run_and_report(
    set_name: str,
    *,
    revision: str | None = None,
    timeout: float = 1800,
    warehouse: Path | str | None = None,
) -> GoldenRunResult:
    """Run the set, wait (the run executes in this process when a run slot is free), and
    return its report (raises EvalFailed when the run failed without a result for the set,
    or when its result was stored as completed by a ``golden_run`` step that did not succeed:
    such a golden run does not count)."""
    from eval_pipelines import runs
    from eval_pipelines.runs.instance import dagster_instance

    started = run_set(set_name, revision=revision, wait=True, timeout=timeout, warehouse=warehouse)
    reports = [
        r for r in golden_runs_of(started.run_id, warehouse=warehouse) if r.set_name == set_name
    ]
    instance = dagster_instance()
    uncounted = bool(reports) and not reports[0].counts
    if (started.state != "succeeded" and not reports) or uncounted:
        run = instance.get_run_by_id(started.run_id)
        assert run is not None
        state = runs.run_state(instance, run).to_json()
        note = (
            f"; golden run {reports[0].golden_run_id} was stored before its golden_run step "
            "ended and does not count: run the set again"
            if uncounted
            else ""
        )
        raise EvalFailed(
            f"golden run of {set_name} ({started.run_id}) {state['state']}: "
            f"{state['reason'] or 'no reason recorded'}{note}",
            state,
        )
    if not reports:
        raise EvalFailed(f"golden run {started.run_id} wrote no result for {set_name}")
    with open_warehouse(warehouse) as conn:
        close_abandoned_runs(conn)
        is_gate = golden_store.load_set(conn, set_name).gate
    gate = None
    if is_gate:
        from eval_pipelines.defs.golden import stored_gate_decision

        # The decision the run's golden_report took (the check shows the same one); taken
        # here only when the run ended before it.
        stored = stored_gate_decision(instance, started.run_id, reports[0].revision)
        if stored is not None:
            gate = stored[0]
        else:
            with open_warehouse(warehouse) as conn:
                gate = gate_decision(conn, reports[0].revision)
    verdict = next((s for s in gate.sets if s.set_name == set_name), None) if gate else None
    return GoldenRunResult(
        **{f.name: getattr(reports[0], f.name) for f in dataclasses.fields(reports[0])},
        gate=verdict,
    )


def run_report(golden_run_id: str, *, warehouse: Path | str | None = None) -> GoldenReportResult:
    """A stored golden run's report, scored on its golden cases as they are now."""
    with open_warehouse(warehouse) as conn:
        close_abandoned_runs(conn)
        scored = golden_stage.score_run(conn, golden_run_id)
    return _report(scored, golden_run_step_succeeded())


def compare_golden_runs(
    run_a: str, run_b: str, *, warehouse: Path | str | None = None
) -> GoldenComparisonResult:
    """Per-field deltas (largest regression first) and the golden cases whose result changed
    (passed to failed first), keyed by case and field id; each side names its revision."""
    with open_warehouse(warehouse) as conn:
        close_abandoned_runs(conn)
        a = golden_stage.score_run(conn, run_a)
        b = golden_stage.score_run(conn, run_b)
    if a.run.set_name != b.run.set_name:
        raise InputError(
            "run_b",
            run_b,
            f"is a run of set {b.run.set_name}, {run_a} of {a.run.set_name}: "
            "compare runs of one set",
        )
    result = compare_runs(a.score, a.cases, b.score, b.cases)
    return GoldenComparisonResult(
        set_name=a.run.set_name,
        a=_compared_side(run_a, a),
        b=_compared_side(run_b, b),
        field_accuracy_delta=result.field_accuracy_delta,
        pass_rate_delta=result.pass_rate_delta,
        fields=result.fields,
        cases=result.cases,
    )


def _compared_side(golden_run_id: str, scored: ScoredRun) -> ComparedRunResult:
    score = scored.score
    return ComparedRunResult(
        golden_run_id,
        scored.run.revision,
        field_correct=score.field_correct,
        field_scored=score.field_scored,
        passed=score.passed,
        pass_rate_n=score.pass_rate_n,
    )


def _field_keys(conn: duckdb.DuckDBPyConnection, golden_set: golden_store.GoldenSet) -> set[str]:
    """Every field key (``field``, ``table.column``) the set's node had in any revision."""
    keys: set[str] = set()
    for row in workflows_store.revisions_of(conn, golden_set.workflow):
        node = workflows_store.load_revision(conn, row.revision).node(golden_set.node_id)
        if node is None:
            continue
        for field in node.schema.fields:
            keys.add(field.id)
            keys.update(f"{field.id}.{column.id}" for column in field.columns)
    return keys


def trend(
    set_name: str,
    *,
    field: str | None = None,
    last: int = 10,
    warehouse: Path | str | None = None,
) -> GoldenTrendResult:
    """Accuracy over the set's last completed runs, overall or for one field; a run that did
    not score the field is a gap (``None``), never a zero. A run stored by a ``golden_run``
    step that did not succeed is left out: it does not count."""
    if isinstance(last, bool) or not isinstance(last, int) or last < 1:
        raise InputError("last", last, "must be a whole number of runs, at least 1")
    points = []
    with open_warehouse(warehouse) as conn:
        golden_set = golden_store.load_set(conn, set_name)
        if field is not None:
            known = _field_keys(conn, golden_set)
            if field not in known:
                raise InputError(
                    "field",
                    field,
                    f"names no field of node {golden_set.node_id} in any revision "
                    f"of {golden_set.workflow} (fields: {', '.join(sorted(known))})",
                )
        counted = golden_stage.counted_runs(conn, set_name, golden_run_step_succeeded(), limit=last)
        for run in reversed(counted):
            scored = golden_stage.score_run(conn, run.golden_run_id)
            value, n = golden_stage.field_accuracy(scored.score, field)
            points.append(
                TrendPointResult(
                    run.golden_run_id,
                    run.revision,
                    run.finished_at.isoformat(timespec="seconds") if run.finished_at else None,
                    value,
                    n,
                )
            )
    return GoldenTrendResult(set_name=set_name, field=field, points=tuple(points))
