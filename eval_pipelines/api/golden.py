"""Python API: golden sets, their golden cases, golden runs, comparisons and trends (001).

A *golden case* is one document of a golden set with the values it should produce (not a
labelled dataset: that is a case of :mod:`eval_pipelines.api.cases`). Every function returns a
frozen result; ``to_json()`` is the document the CLI prints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

import duckdb

from eval_pipelines.api._golden_state import (
    close_abandoned_runs,
    gate_decision,
    golden_run_step_succeeded,
    sync_workflow_files,
)
from eval_pipelines.api._shared import EvalFailed, require_run_warehouse, resolve_warehouse
from eval_pipelines.core.errors import ConflictError, InputError
from eval_pipelines.core.files import read_json
from eval_pipelines.core.golden.case import CaseScore
from eval_pipelines.core.golden.compare import CaseChange, FieldDelta
from eval_pipelines.core.golden.gate import SetGate
from eval_pipelines.core.golden.labels import resolve_labels
from eval_pipelines.core.golden.scoring import RunScore, compare_runs, validate_threshold
from eval_pipelines.core.golden.shares import json_difference, json_share
from eval_pipelines.core.results import JsonResult, json_field
from eval_pipelines.core.workflows.definition import validate_name
from eval_pipelines.core.workflows.documents import read_document
from eval_pipelines.core.workflows.nodes import StepUsage
from eval_pipelines.core.workflows.schema import Schema
from eval_pipelines.stages import golden as golden_stage
from eval_pipelines.stages.golden_report import case_why
from eval_pipelines.storage import golden as golden_store
from eval_pipelines.storage import workflows as workflows_store
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, connect, transaction


@dataclass(frozen=True, kw_only=True)
class GoldenSetResult(JsonResult):
    """A golden set; ``created`` is False when an identical set existed (a script re-run)."""

    set_name: str = json_field("set")
    workflow: str
    node: str
    threshold: float
    gate: bool
    created_at: str
    created: bool


@dataclass(frozen=True, kw_only=True)
class GoldenCaseResult(JsonResult):
    """A golden case: a document of the set and the values it should produce (``labels``,
    keyed by field id), its tables' key columns, the test run it was seeded from."""

    set_name: str = json_field("set")
    case_id: str
    document_id: str
    labels: Mapping[str, object]
    key_columns: Mapping[str, tuple[str, ...]]
    from_test_run: str | None
    enabled: bool
    authored_revision: str


@dataclass(frozen=True, kw_only=True)
class ListedGoldenCaseResult(GoldenCaseResult):
    """A golden case with its schema-drift flag against the workflow's newest revision."""

    schema_drift: bool


@dataclass(frozen=True, kw_only=True)
class AddedGoldenCaseResult(GoldenCaseResult):
    """A golden case added (``added`` False: the same one existed), with the label keys that
    map onto no field (``unmapped``, not labels)."""

    unmapped: tuple[str, ...]
    added: bool


@dataclass(frozen=True)
class RecordGoldenCaseResult(JsonResult):
    """A golden case made from a labelled record of a classify workflow's case."""

    case_id: str
    record: str
    labels: Mapping[str, object]


@dataclass(frozen=True, kw_only=True)
class AddedRecordsResult(JsonResult):
    """The golden cases added from records; records already in the set are counted in
    ``skipped_as_present``."""

    set_name: str = json_field("set")
    added: tuple[RecordGoldenCaseResult, ...]
    skipped_as_present: int


@dataclass(frozen=True, kw_only=True)
class DeletedGoldenCaseResult(JsonResult):
    set_name: str = json_field("set")
    case_id: str
    deleted: bool
    results_deleted: int


@dataclass(frozen=True, kw_only=True)
class GoldenRunLaunchResult(JsonResult):
    """The Dagster run of job ``golden_gate`` that runs the set, and its state."""

    set_name: str = json_field("set")
    revision: str
    run_id: str
    state: str


@dataclass(frozen=True)
class ModelUsageResult(JsonResult):
    """What the model calls of a run's (or a case's) ``chat`` steps did: ``calls`` answered
    by the endpoint now (paid), ``from_cache`` served from a cache (free), ``failed`` without
    an answer; the endpoint's token counts of the calls made now; ``cost`` theirs from the
    node's price table, None when the model has no price (``cost_note`` says so)."""

    calls: int
    from_cache: int
    failed: int
    input_tokens: int
    output_tokens: int
    cost: float | None
    cost_note: str | None = json_field(omit_none=True, default=None)


def _model_usage(usage: StepUsage | None) -> ModelUsageResult | None:
    if usage is None:
        return None
    return ModelUsageResult(
        usage.calls,
        usage.from_cache,
        usage.failed,
        usage.input_tokens,
        usage.output_tokens,
        usage.cost,
        usage.cost_note,
    )


@dataclass(frozen=True)
class ChargedResult(JsonResult):
    """What a golden run's steps charged (a cached step bills nothing); ``model``: its
    ``chat`` steps' calls, tokens and cost (absent when it has none)."""

    executed_steps: int
    cached_steps: int
    cost_units: float
    model: ModelUsageResult | None = json_field(omit_none=True, default=None)


@dataclass(frozen=True)
class GoldenCaseScoreResult(CaseScore):
    """A golden case's score in a run, with ``why`` it did not pass (None when it did)."""

    why: str | None = None
    model: ModelUsageResult | None = None  # its document's chat calls (absent: none)

    def to_json(self) -> dict[str, object]:
        document: dict[str, object] = {**super().to_json(), "why": self.why}
        if self.model is not None:
            document["model"] = self.model.to_json()
        return document


@dataclass(frozen=True, kw_only=True)
class GoldenReportResult(JsonResult):
    """A golden run scored: ``score`` is the run's figures (the 001 score document in JSON),
    ``cases`` each golden case's score by case id."""

    golden_run_id: str
    set_name: str = json_field("set")
    workflow: str
    revision: str
    dagster_run_id: str | None
    status: str
    reason: str | None = json_field(omit_none=True, default=None)
    started_at: str
    finished_at: str | None
    threshold: float
    charged: ChargedResult
    score: RunScore
    mixed_revisions: tuple[str, ...]
    schema_drift: tuple[str, ...]
    cases: Mapping[str, GoldenCaseScoreResult]


@dataclass(frozen=True, kw_only=True)
class GoldenRunResult(GoldenReportResult):
    """:func:`run_and_report`'s report, with this set's gate verdict (None unless the set is a
    gate)."""

    gate: SetGate | None = None


@dataclass(frozen=True)
class ComparedRunResult(JsonResult):
    """One side of a comparison: its run, revision and the counts its deltas come from."""

    golden_run_id: str
    revision: str
    field_correct: int
    field_scored: int
    passed: int
    pass_rate_n: int


@dataclass(frozen=True, kw_only=True)
class GoldenComparisonResult(JsonResult):
    """Run ``b`` against run ``a`` of one set: deltas are ``b - a``, exact here; the JSON
    writes a delta with a side of fewer than 20 observations as ``insufficient_evidence``
    (each side's counts are in ``a`` and ``b``)."""

    set_name: str = json_field("set")
    a: ComparedRunResult
    b: ComparedRunResult
    field_accuracy_delta: float | None
    pass_rate_delta: float | None
    fields: tuple[FieldDelta, ...]
    cases: tuple[CaseChange, ...]

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        document["fieldAccuracyDelta"] = json_difference(
            self.field_accuracy_delta, self.a.field_scored, self.b.field_scored
        )
        document["passRateDelta"] = json_difference(
            self.pass_rate_delta, self.a.pass_rate_n, self.b.pass_rate_n
        )
        return document


@dataclass(frozen=True)
class TrendPointResult(JsonResult):
    """One run's accuracy (exact here; ``insufficient_evidence`` in the JSON from fewer than
    20 values) and its n."""

    golden_run_id: str
    revision: str
    finished_at: str | None
    accuracy: float | None
    n: int

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        document["accuracy"] = json_share(self.accuracy, self.n)
        return document


@dataclass(frozen=True, kw_only=True)
class GoldenTrendResult(JsonResult):
    """Accuracy over a set's last completed runs (``field`` None: overall)."""

    set_name: str = json_field("set")
    field: str | None
    points: tuple[TrendPointResult, ...]


def _open(warehouse: Path | str | None) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
    return connect(resolve_warehouse(warehouse), wait_seconds=CLI_WAIT_SECONDS)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _set_result(golden_set: golden_store.GoldenSet, created: bool) -> GoldenSetResult:
    return GoldenSetResult(
        set_name=golden_set.set_name,
        workflow=golden_set.workflow,
        node=golden_set.node_id,
        threshold=golden_set.threshold,
        gate=golden_set.gate,
        created_at=golden_set.created_at.isoformat(timespec="seconds"),
        created=created,
    )


class _CaseFields(TypedDict):
    set_name: str
    case_id: str
    document_id: str
    labels: Mapping[str, object]
    key_columns: Mapping[str, tuple[str, ...]]
    from_test_run: str | None
    enabled: bool
    authored_revision: str


def _case_fields(case: golden_store.GoldenCase) -> _CaseFields:
    return {
        "set_name": case.set_name,
        "case_id": case.case_id,
        "document_id": case.document_id,
        "labels": case.labels,
        "key_columns": {k: tuple(v) for k, v in case.key_columns.items()},
        "from_test_run": case.from_test_run,
        "enabled": case.enabled,
        "authored_revision": case.authored_revision,
    }


def _case_result(case: golden_store.GoldenCase) -> GoldenCaseResult:
    return GoldenCaseResult(**_case_fields(case))


def _added(
    case: golden_store.GoldenCase, unmapped: tuple[str, ...], added: bool
) -> AddedGoldenCaseResult:
    return AddedGoldenCaseResult(**_case_fields(case), unmapped=unmapped, added=added)


def _report(scored: golden_stage.ScoredRun) -> GoldenReportResult:
    run = scored.run
    return GoldenReportResult(
        golden_run_id=run.golden_run_id,
        set_name=run.set_name,
        workflow=run.workflow,
        revision=run.revision,
        dagster_run_id=run.dagster_run_id,
        status=run.status,
        reason=run.reason or None,
        started_at=run.started_at.isoformat(timespec="seconds"),
        finished_at=run.finished_at.isoformat(timespec="seconds") if run.finished_at else None,
        threshold=run.threshold,
        charged=ChargedResult(
            run.executed_steps, run.cached_steps, run.cost_units, _model_usage(run.usage)
        ),
        score=scored.score,
        mixed_revisions=scored.mixed_revisions,
        schema_drift=scored.drifted,
        cases={
            case_id: GoldenCaseScoreResult(
                **{f.name: getattr(case, f.name) for f in dataclasses.fields(case)},
                why=case_why(case) if case.status != "passed" else None,
                model=_model_usage(scored.usage.get(case_id)),
            )
            for case_id, case in scored.cases.items()
        },
    )


def create_set(
    set_name: str,
    *,
    workflow: str,
    node: str | None = None,
    threshold: float = 1.0,
    gate: bool = False,
    warehouse: Path | str | None = None,
) -> GoldenSetResult:
    """A golden set scores one node of one workflow; ``gate`` makes it block activation."""
    validate_name(set_name, "set_name")
    limit = validate_threshold(threshold)
    with _open(warehouse) as conn, transaction(conn):
        sync_workflow_files(conn)
        revisions = workflows_store.require_workflow(conn, workflow)
        scored = workflows_store.load_revision(conn, revisions[0].revision).scored_node(node)
        existing = golden_store.find_set(conn, set_name)
        if existing is not None:
            same = (existing.workflow, existing.node_id, existing.threshold, existing.gate)
            if same == (workflow, scored.id, limit, bool(gate)):
                return _set_result(existing, False)  # re-running a script
            raise ConflictError(
                f"set={set_name!r}: a golden set with this name and other settings exists "
                f"({existing.to_json()})"
            )
        created = golden_store.GoldenSet(set_name, workflow, scored.id, limit, bool(gate), _now())
        golden_store.create_set(conn, created)
    return _set_result(created, True)


def _store_case(
    conn: duckdb.DuckDBPyConnection,
    set_name: str,
    document_id: str,
    labels: dict[str, object],
    *,
    schema: Schema,
    revision: str,
    key_columns: Mapping[str, Sequence[str]] | None = None,
    from_test_run: str | None = None,
) -> golden_store.GoldenCase:
    """Store a new enabled golden case, remembering the scored node's structure (schema
    drift)."""
    case = golden_store.GoldenCase(
        set_name,
        golden_store.next_case_id(conn, set_name),
        document_id,
        labels,
        {k: list(v) for k, v in (key_columns or {}).items()},
        from_test_run,
        schema.fingerprint(),
        revision,
        True,
        _now(),
    )
    golden_store.add_case(conn, case)
    return case


def add_golden_case(
    set_name: str,
    *,
    document: Path | str,
    labels: Path | str | Mapping[str, object],
    warehouse: Path | str | None = None,
) -> AddedGoldenCaseResult:
    """Add a golden case: a document and the values it should produce (keyed by field id, or
    by a field's current name). Values that map onto no field are reported back as
    unmapped."""
    content, doc = read_document(Path(document))
    raw = dict(labels) if isinstance(labels, Mapping) else read_json(labels, "labels")
    with _open(warehouse) as conn, transaction(conn):
        golden_set = golden_store.load_set(conn, set_name)
        workflow = workflows_store.load_revision(
            conn, workflows_store.require_workflow(conn, golden_set.workflow)[0].revision
        )
        schema = workflow.scored_node(golden_set.node_id).schema
        resolved = resolve_labels(schema, raw)
        key_columns = {k: list(v) for k, v in resolved.key_columns.items()}
        for existing in golden_store.list_cases(conn, set_name):
            if (
                existing.document_id == doc.document_id
                and existing.labels == resolved.labels
                and existing.key_columns == key_columns
            ):
                # The same document with the same labels matched the same way: re-running a
                # script adds nothing. Rows matched by key and by position score differently.
                return _added(existing, tuple(resolved.unmapped), False)
        workflows_store.save_document(conn, content, doc)
        case = _store_case(
            conn,
            set_name,
            doc.document_id,
            resolved.labels,
            schema=schema,
            revision=workflow.revision,
            key_columns=dict(resolved.key_columns),
        )
    return _added(case, tuple(resolved.unmapped), True)


def add_golden_cases_from_records(
    set_name: str,
    *,
    records: list[str] | None = None,
    sample_size: int | None = None,
    seed: int = 7,
    warehouse: Path | str | None = None,
) -> AddedRecordsResult:
    """Golden cases of a classify workflow's set: labelled records of its case (named, or a
    seeded sample), each labelled with its code at the target depth. Records already in the
    set are not added twice."""
    from eval_pipelines.core.holdout.spec import validate_sample_size, validate_seed
    from eval_pipelines.stages.golden_classify import golden_records

    if sample_size is not None:
        sample_size = validate_sample_size(sample_size)
    seed = validate_seed(seed)
    with _open(warehouse) as conn, transaction(conn):
        golden_set = golden_store.load_set(conn, set_name)
        workflow = workflows_store.load_revision(
            conn, workflows_store.require_workflow(conn, golden_set.workflow)[0].revision
        )
        if workflow.kind != "classify":
            raise InputError(
                "set_name",
                set_name,
                "scores an extract workflow; add documents with add-case",
            )
        chosen = golden_records(conn, workflow, keys=records, sample_size=sample_size, seed=seed)
        schema = workflow.nodes[0].schema
        present = {c.document_id for c in golden_store.list_cases(conn, set_name)}
        added = []
        for content, document, labels in chosen:
            if document.document_id in present:
                continue
            workflows_store.save_document(conn, content, document)
            case = _store_case(
                conn,
                set_name,
                document.document_id,
                labels,
                schema=schema,
                revision=workflow.revision,
            )
            present.add(document.document_id)
            added.append(RecordGoldenCaseResult(case.case_id, document.name, labels))
    return AddedRecordsResult(
        set_name=set_name, added=tuple(added), skipped_as_present=len(chosen) - len(added)
    )


def add_golden_case_from_run(
    set_name: str, test_run_id: str, *, warehouse: Path | str | None = None
) -> AddedGoldenCaseResult:
    """Seed a golden case from an approved test run: the reviewed values become its labels
    (tables matched by position: the approved table came from that document, in that
    order)."""
    with _open(warehouse) as conn, transaction(conn):
        golden_set = golden_store.load_set(conn, set_name)
        run = workflows_store.load_test_run(conn, test_run_id)
        if run.approved_values is None:
            raise ConflictError(
                f"run={test_run_id!r}: not approved; approve it first "
                "(eval-pipelines workflow approve RUN_ID --values FILE --by NAME)"
            )
        if run.workflow != golden_set.workflow:
            raise InputError(
                "test_run_id",
                test_run_id,
                f"is a run of workflow {run.workflow}, the set scores {golden_set.workflow}",
            )
        if run.approved_node != golden_set.node_id:
            raise InputError(
                "test_run_id",
                test_run_id,
                f"approved node {run.approved_node}, the set scores {golden_set.node_id}",
            )
        for existing in golden_store.list_cases(conn, set_name):
            if existing.from_test_run == test_run_id:
                # Seeding twice from one review would count that document twice.
                return _added(existing, (), False)
        workflows_store.load_document(conn, run.document_id)  # deleted since the run: refused
        workflow = workflows_store.load_revision(conn, run.revision)
        schema = workflow.scored_node(golden_set.node_id).schema
        resolved = resolve_labels(schema, run.approved_values, from_run=True)
        case = _store_case(
            conn,
            set_name,
            run.document_id,
            resolved.labels,
            schema=schema,
            revision=run.revision,
            from_test_run=test_run_id,
        )
    return _added(case, tuple(resolved.unmapped), True)


def list_golden_cases(
    set_name: str, *, warehouse: Path | str | None = None
) -> tuple[ListedGoldenCaseResult, ...]:
    """The set's golden cases, each with its schema-drift flag against the workflow's newest
    revision (a warning, never a block; renames alone never raise it)."""
    from eval_pipelines.core.golden.scoring import schema_drift

    with _open(warehouse) as conn:
        golden_set = golden_store.load_set(conn, set_name)
        newest = workflows_store.revisions_of(conn, golden_set.workflow)[0].revision
        schema = workflows_store.load_revision(conn, newest).scored_node(golden_set.node_id).schema
        return tuple(
            ListedGoldenCaseResult(
                **_case_fields(c),
                schema_drift=schema_drift(c.schema_fingerprint, schema),
            )
            for c in golden_store.list_cases(conn, set_name)
        )


def set_golden_case_enabled(
    set_name: str, case_id: str, enabled: bool, *, warehouse: Path | str | None = None
) -> GoldenCaseResult:
    """Disable a golden case (left out of the next runs, its labels kept) or enable it
    again."""
    with _open(warehouse) as conn, transaction(conn):
        golden_store.set_case_enabled(conn, set_name, case_id, enabled)
        return _case_result(golden_store.load_case(conn, set_name, case_id))


def delete_golden_case(
    set_name: str, case_id: str, *, yes: bool = False, warehouse: Path | str | None = None
) -> DeletedGoldenCaseResult:
    """Delete a golden case and its results from every past run (``yes`` confirms)."""
    if not yes:
        raise InputError(
            "yes",
            False,
            "deleting a case deletes its results from every past run; confirm with `yes`, "
            "or disable the case instead",
        )
    with _open(warehouse) as conn, transaction(conn):
        removed = golden_store.delete_case(conn, set_name, case_id)
    return DeletedGoldenCaseResult(
        set_name=set_name, case_id=case_id, deleted=True, results_deleted=removed
    )


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
    with _open(warehouse) as conn, transaction(conn):
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
    with _open(warehouse) as conn:
        close_abandoned_runs(conn)
        return tuple(
            _report(golden_stage.score_run(conn, r.golden_run_id))
            for r in golden_store.runs_of_dagster_run(conn, dagster_run_id)
        )


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
    uncounted = (
        reports
        and reports[0].status == "completed"
        and not golden_run_step_succeeded()(started.run_id)
    )
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
    with _open(warehouse) as conn:
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
            with _open(warehouse) as conn:
                gate = gate_decision(conn, reports[0].revision)
    verdict = next((s for s in gate.sets if s.set_name == set_name), None) if gate else None
    return GoldenRunResult(
        **{f.name: getattr(reports[0], f.name) for f in dataclasses.fields(reports[0])},
        gate=verdict,
    )


def run_report(golden_run_id: str, *, warehouse: Path | str | None = None) -> GoldenReportResult:
    """A stored golden run's report, scored on its golden cases as they are now."""
    with _open(warehouse) as conn:
        close_abandoned_runs(conn)
        return _report(golden_stage.score_run(conn, golden_run_id))


def compare_golden_runs(
    run_a: str, run_b: str, *, warehouse: Path | str | None = None
) -> GoldenComparisonResult:
    """Per-field deltas (largest regression first) and the golden cases whose result changed
    (passed to failed first), keyed by case and field id; each side names its revision."""
    with _open(warehouse) as conn:
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


def _compared_side(golden_run_id: str, scored: golden_stage.ScoredRun) -> ComparedRunResult:
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
    with _open(warehouse) as conn:
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
