"""Python API: workflows, their revisions, test runs, review and activation (001).

Saving is never blocked; activation is, by the golden sets marked as gates. Every function
returns a frozen result; ``to_json()`` is the document the CLI prints.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import duckdb

from eval_pipelines.api._golden_state import (
    close_abandoned_runs,
    gate_decision,
    sync_workflow_files,
)
from eval_pipelines.api._shared import open_warehouse, resolve_warehouse
from eval_pipelines.core.errors import ConflictError, InputError
from eval_pipelines.core.files import read_json
from eval_pipelines.core.golden.gate import Gate, SetGate
from eval_pipelines.core.inputs import check_name
from eval_pipelines.core.results import JsonResult, json_field
from eval_pipelines.core.workflows.definition import Workflow, check_plugins, validate_name
from eval_pipelines.core.workflows.documents import read_document
from eval_pipelines.core.workflows.execute import cache_keys, execute
from eval_pipelines.core.workflows.files import load_workflow_file
from eval_pipelines.core.workflows.output import map_output
from eval_pipelines.stages.golden_classify import pin_workflow
from eval_pipelines.stages.workflow_chat import step_context
from eval_pipelines.storage import workflows as workflows_store
from eval_pipelines.storage.warehouse import transaction
from eval_pipelines.storage.workflows import StoredDocument


class ActivationRefused(ConflictError):
    """The gate refuses the revision; the message says why (the CLI exits 2)."""


@dataclass(frozen=True)
class SavedWorkflowResult(JsonResult):
    """The revision a save made (``new`` False: identical content was saved before)."""

    workflow: str
    revision: str
    kind: str
    new: bool


@dataclass(frozen=True)
class WorkflowSummaryResult(JsonResult):
    workflow: str
    kind: str
    revisions: int
    newest_revision: str
    active_revision: str | None


@dataclass(frozen=True)
class RevisionResult(JsonResult):
    """A stored revision: where it came from, who saved it, when (ISO times)."""

    revision: str
    workflow: str
    kind: str
    source: str
    saved_by: str | None
    saved_at: str
    last_saved_at: str

    @classmethod
    def of(cls, row: workflows_store.RevisionRow) -> RevisionResult:
        return cls(
            row.revision,
            row.workflow,
            row.kind,
            row.source,
            row.saved_by,
            row.saved_at.isoformat(timespec="seconds"),
            row.last_saved_at.isoformat(timespec="seconds"),
        )


@dataclass(frozen=True)
class WorkflowRevisionResult(RevisionResult):
    """A revision with its content (the prepared workflow document) and the workflow's
    revision history, newest first."""

    content: Mapping[str, object]
    history: tuple[RevisionResult, ...]


@dataclass(frozen=True)
class ActivationResult(JsonResult):
    """A ledger entry: who activated which revision, on which gating runs; ``gate_decision``
    is the gate's document as it was recorded then."""

    workflow: str
    revision: str
    activated_by: str
    activated_at: str
    gate_runs: tuple[str, ...]
    gate_decision: Mapping[str, object]

    @classmethod
    def of(cls, activation: workflows_store.Activation) -> ActivationResult:
        return cls(
            activation.workflow,
            activation.revision,
            activation.activated_by,
            activation.activated_at.isoformat(timespec="seconds"),
            tuple(activation.gate_runs),
            activation.gate_decision,
        )


@dataclass(frozen=True)
class ActivatedResult(ActivationResult):
    """The activation made, with the gate decision it was made on."""

    gate: Gate


@dataclass(frozen=True)
class WorkflowGateResult(JsonResult):
    """The gate for one revision: ``state`` is ``passed`` or ``blocked``."""

    revision: str
    state: str
    reason: str
    sets: tuple[SetGate, ...]


@dataclass(frozen=True)
class WorkflowStatusResult(JsonResult):
    workflow: str
    active_revision: ActivationResult | None
    newest_revision: RevisionResult
    gate: WorkflowGateResult


@dataclass(frozen=True)
class TestRunResult(JsonResult):
    """A test run over one document: each node's mapped output, what it charged (``model``:
    its ``chat`` steps' calls, tokens and cost, absent when it has none)."""

    __test__ = False  # not a pytest test class

    test_run_id: str
    workflow: str
    revision: str
    document_id: str
    outputs: Mapping[str, object]
    error: str | None
    executed_steps: int
    cached_steps: int
    cost_units: float
    model: Mapping[str, object] | None = json_field(omit_none=True, default=None)


@dataclass(frozen=True)
class ApprovalResult(JsonResult):
    """A reviewed result: the corrected values of one node, who approved them and when."""

    node: str | None
    by: str
    at: str
    values: Mapping[str, object] | None


@dataclass(frozen=True)
class ApprovedRunResult(JsonResult):
    """A stored test run with its approval (None until approved)."""

    test_run_id: str
    workflow: str
    revision: str
    document_id: str
    outputs: Mapping[str, object]
    error: str | None
    created_at: str
    approved: ApprovalResult | None


@dataclass(frozen=True)
class DeletedDocumentResult(JsonResult):
    document_id: str
    deleted: bool


def save_workflow(
    name: str,
    file: Path | str,
    *,
    saved_by: str | None = None,
    warehouse: Path | str | None = None,
) -> SavedWorkflowResult:
    """Save the file's content as a revision of workflow ``name`` (a no-op when identical
    content was saved before)."""
    validate_name(name, "name")
    if saved_by is not None:
        check_name(saved_by, "saved_by", "who saves: a name")
    parsed = load_workflow_file(Path(file), name=name)
    with open_warehouse(warehouse, create=parsed.kind == "extract") as conn, transaction(conn):
        workflow = pin_workflow(conn, parsed)
        kinds = {r.kind for r in workflows_store.revisions_of(conn, name)}
        if kinds and workflow.kind not in kinds:
            raise InputError(
                "kind",
                workflow.kind,
                f"workflow {name} is a {kinds.pop()} workflow; use a new name",
            )
        new = workflows_store.save_revision(conn, workflow, source=f"cli:{file}", saved_by=saved_by)
    return SavedWorkflowResult(name, workflow.revision, workflow.kind, new)


def list_workflows(*, warehouse: Path | str | None = None) -> tuple[WorkflowSummaryResult, ...]:
    """Every workflow with its newest and active revision."""
    with open_warehouse(warehouse) as conn, transaction(conn):
        sync_workflow_files(conn)
        listing = []
        for name in workflows_store.workflow_names(conn):
            revisions = workflows_store.revisions_of(conn, name)
            active = workflows_store.active_revision(conn, name)
            listing.append(
                WorkflowSummaryResult(
                    name,
                    revisions[0].kind,
                    len(revisions),
                    revisions[0].revision,
                    active.revision if active else None,
                )
            )
    return tuple(listing)


def show_workflow(
    name: str, *, revision: str | None = None, warehouse: Path | str | None = None
) -> WorkflowRevisionResult:
    """A revision's content (the newest unless ``revision`` is given) and its history."""
    with open_warehouse(warehouse) as conn, transaction(conn):
        sync_workflow_files(conn)
        revisions = workflows_store.require_workflow(conn, name)
        chosen = (
            workflows_store.revision_of_workflow(conn, name, revision)
            if revision
            else revisions[0].revision
        )
        workflow = workflows_store.load_revision(conn, chosen)
        row = RevisionResult.of(workflows_store.revision_row(conn, chosen))
    return WorkflowRevisionResult(
        row.revision,
        row.workflow,
        row.kind,
        row.source,
        row.saved_by,
        row.saved_at,
        row.last_saved_at,
        workflow.content,
        tuple(RevisionResult.of(r) for r in revisions),
    )


def workflow_status(name: str, *, warehouse: Path | str | None = None) -> WorkflowStatusResult:
    """Active revision, newest revision, and the gate's state for the newest with its reason."""
    with open_warehouse(warehouse) as conn, transaction(conn):
        sync_workflow_files(conn)
        close_abandoned_runs(conn)
        revisions = workflows_store.require_workflow(conn, name)
        active = workflows_store.active_revision(conn, name)
        gate = gate_decision(conn, revisions[0].revision)
    return WorkflowStatusResult(
        name,
        ActivationResult.of(active) if active else None,
        RevisionResult.of(revisions[0]),
        WorkflowGateResult(
            gate.revision, "passed" if gate.passed else "blocked", gate.reason, gate.sets
        ),
    )


def _resolve_revision(conn: duckdb.DuckDBPyConnection, name: str, revision: str | None) -> Workflow:
    revisions = workflows_store.require_workflow(conn, name)
    chosen = (
        workflows_store.revision_of_workflow(conn, name, revision)
        if revision
        else revisions[0].revision
    )
    return workflows_store.load_revision(conn, chosen)


def run_workflow(
    name: str,
    document: Path | str,
    *,
    revision: str | None = None,
    warehouse: Path | str | None = None,
) -> TestRunResult:
    """A test run: the revision (default the newest) over one document; nothing is delivered
    anywhere. The document is stored (a golden case can be made from the run once
    reviewed)."""
    content, doc = read_document(Path(document))
    with open_warehouse(warehouse) as conn, transaction(conn):
        sync_workflow_files(conn)
        workflow = _resolve_revision(conn, name, revision)
        if workflow.kind != "extract":
            raise InputError("name", name, "test runs over a document need an extract workflow")
        check_plugins(workflow)
        cache = workflows_store.cached_steps(conn, cache_keys(workflow, doc.document_id))
    execution = execute(workflow, doc, cache, context=step_context(resolve_warehouse(warehouse)))
    outputs = {
        node.id: map_output(node.schema, execution.outputs[node.id])
        for node in workflow.nodes
        if node.id in execution.outputs
    }
    test_run_id = f"t-{uuid.uuid4().hex[:12]}"
    with open_warehouse(warehouse) as conn, transaction(conn):
        workflows_store.save_document(conn, content, doc)
        workflows_store.cache_steps(conn, [(*k, v) for k, v in execution.new_cache.items()])
        workflows_store.save_test_run(
            conn, test_run_id, workflow, doc.document_id, outputs, execution.error
        )
    return TestRunResult(
        test_run_id,
        name,
        workflow.revision,
        doc.document_id,
        outputs,
        execution.error,
        execution.executed_steps,
        execution.cached_steps,
        execution.cost_units,
        usage.to_json() if (usage := execution.total_usage()) is not None else None,
    )


def _approved(run: workflows_store.TestRun) -> ApprovedRunResult:
    approval = (
        None
        if run.approved_by is None or run.approved_at is None
        else ApprovalResult(
            run.approved_node,
            run.approved_by,
            run.approved_at.isoformat(timespec="seconds"),
            run.approved_values,
        )
    )
    return ApprovedRunResult(
        run.test_run_id,
        run.workflow,
        run.revision,
        run.document_id,
        run.outputs,
        run.error,
        run.created_at.isoformat(timespec="seconds"),
        approval,
    )


def approve_run(
    test_run_id: str,
    values: Path | str | Mapping[str, object],
    *,
    by: str,
    node: str | None = None,
    warehouse: Path | str | None = None,
) -> ApprovedRunResult:
    """Record a reviewed result: the corrected values of one node (keyed by field id, tables
    as lists of rows keyed by column id). A golden case can then be seeded from it."""
    check_name(by, "by", "the reviewer: a name")
    corrected = dict(values) if isinstance(values, Mapping) else read_json(values, "values")
    if not isinstance(corrected, dict):
        raise InputError(
            "values", type(corrected).__name__, "must be a JSON object keyed by field id"
        )
    with open_warehouse(warehouse) as conn, transaction(conn):
        run = workflows_store.load_test_run(conn, test_run_id)
        workflow = workflows_store.load_revision(conn, run.revision)
        scored = workflow.scored_node(node)
        workflows_store.approve_test_run(conn, test_run_id, scored.id, corrected, by)
        approved = workflows_store.load_test_run(conn, test_run_id)
    return _approved(approved)


def activate_workflow(
    name: str, revision: str, *, by: str, warehouse: Path | str | None = None
) -> ActivatedResult:
    """Make ``revision`` the workflow's active revision, only if the gate passes for exactly
    that revision; the ledger records who, when and on which gating runs."""
    check_name(by, "by", "who activates: a name")
    with open_warehouse(warehouse) as conn, transaction(conn):
        sync_workflow_files(conn)
        close_abandoned_runs(conn)
        full = workflows_store.revision_of_workflow(conn, name, revision)
        active = workflows_store.active_revision(conn, name)
        if active is not None and active.revision == full:
            raise ConflictError(
                f"revision={full!r}: already the active revision of {name} (activated by "
                f"{active.activated_by} at {active.activated_at:%Y-%m-%d %H:%M})"
            )
        gate = gate_decision(conn, full)
        if not gate.passed:
            raise ActivationRefused(f"revision {full} of {name} cannot be activated: {gate.reason}")
        activation = ActivationResult.of(
            workflows_store.record_activation(
                conn,
                name,
                full,
                by,
                [s.golden_run_id for s in gate.sets if s.golden_run_id],
                gate.to_json(),
            )
        )
    return ActivatedResult(
        activation.workflow,
        activation.revision,
        activation.activated_by,
        activation.activated_at,
        activation.gate_runs,
        activation.gate_decision,
        gate,
    )


def activation_ledger(
    name: str | None = None, *, warehouse: Path | str | None = None
) -> tuple[ActivationResult, ...]:
    """The activation ledger (of one workflow, or all), oldest first."""
    with open_warehouse(warehouse) as conn, transaction(conn):
        if name is not None:
            workflows_store.require_workflow(conn, name)
        return tuple(ActivationResult.of(a) for a in workflows_store.activations(conn, name))


def list_documents(*, warehouse: Path | str | None = None) -> tuple[StoredDocument, ...]:
    """The stored documents, each with how many golden cases use it."""
    with open_warehouse(warehouse) as conn:
        return tuple(workflows_store.list_documents(conn))


def delete_document(
    document_id: str, *, warehouse: Path | str | None = None
) -> DeletedDocumentResult:
    """Delete a stored document; refused while a golden case references it."""
    with open_warehouse(warehouse) as conn, transaction(conn):
        workflows_store.delete_document(conn, document_id)
    return DeletedDocumentResult(document_id, True)
