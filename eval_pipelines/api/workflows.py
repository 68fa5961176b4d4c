"""Python API: workflows, their revisions, test runs, review and activation (001).

Saving is never blocked; activation is, by the golden sets marked as gates.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import duckdb

from eval_pipelines import settings
from eval_pipelines.api._shared import resolve_warehouse
from eval_pipelines.core.errors import ConflictError, InputError, NotFoundError
from eval_pipelines.core.files import read_json
from eval_pipelines.core.workflows.definition import Workflow, validate_name
from eval_pipelines.core.workflows.documents import read_document
from eval_pipelines.core.workflows.execute import cache_keys, execute
from eval_pipelines.core.workflows.files import load_workflow_file, scan_workflow_files
from eval_pipelines.core.workflows.output import map_output
from eval_pipelines.stages.golden_classify import pin_workflow
from eval_pipelines.storage import workflows as workflows_store
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, connect, transaction


class ActivationRefused(ConflictError):
    """The gate refuses the revision; the message says why (the CLI exits 2)."""


def sync_workflow_files(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """Save the committed files under ``data/workflows/`` whose content changed since they were
    last read (what the sensor sees, so the CLI agrees with it without a daemon); returns the
    revisions saved. Files that do not parse are skipped here (``workflow save`` reports
    their error)."""
    saved = []
    for file in scan_workflow_files(settings.workflows_dir()):
        workflow = file.workflow
        if workflow is None:
            continue
        try:
            workflow = pin_workflow(conn, workflow)
        except (InputError, NotFoundError):
            continue  # a classify workflow over a case not loaded yet
        if workflows_store.file_revision(conn, str(file.path)) == workflow.revision:
            continue
        workflows_store.save_revision(conn, workflow, source=f"file:{file.path}", saved_by=None)
        workflows_store.record_file_revision(conn, str(file.path), workflow.name, workflow.revision)
        saved.append(workflow.revision)
    return saved


def _open(warehouse: Path | str | None, *, create: bool = False) -> Any:
    return connect(resolve_warehouse(warehouse), create=create, wait_seconds=CLI_WAIT_SECONDS)


def save_workflow(
    name: str,
    file: Path | str,
    *,
    saved_by: str | None = None,
    warehouse: Path | str | None = None,
) -> dict[str, Any]:
    """Save the file's content as a revision of workflow ``name`` (a no-op when identical
    content was saved before). Returns ``{workflow, revision, new}``."""
    validate_name(name)
    parsed = load_workflow_file(Path(file), name=name)
    with _open(warehouse, create=parsed.kind == "extract") as conn, transaction(conn):
        workflow = pin_workflow(conn, parsed)
        kinds = {r.kind for r in workflows_store.revisions_of(conn, name)}
        if kinds and workflow.kind not in kinds:
            raise InputError(
                "kind",
                workflow.kind,
                f"workflow {name} is a {kinds.pop()} workflow; use a new name",
            )
        new = workflows_store.save_revision(conn, workflow, source=f"cli:{file}", saved_by=saved_by)
    return {"workflow": name, "revision": workflow.revision, "kind": workflow.kind, "new": new}


def list_workflows(*, warehouse: Path | str | None = None) -> list[dict[str, Any]]:
    with _open(warehouse) as conn, transaction(conn):
        sync_workflow_files(conn)
        listing = []
        for name in workflows_store.workflow_names(conn):
            revisions = workflows_store.revisions_of(conn, name)
            active = workflows_store.active_revision(conn, name)
            listing.append(
                {
                    "workflow": name,
                    "kind": revisions[0].kind,
                    "revisions": len(revisions),
                    "newestRevision": revisions[0].revision,
                    "activeRevision": active.revision if active else None,
                }
            )
    return listing


def show_workflow(
    name: str, *, revision: str | None = None, warehouse: Path | str | None = None
) -> dict[str, Any]:
    """A revision's content (the newest unless ``revision`` is given) and its history."""
    with _open(warehouse) as conn, transaction(conn):
        sync_workflow_files(conn)
        revisions = workflows_store.require_workflow(conn, name)
        chosen = (
            workflows_store.revision_of_workflow(conn, name, revision)
            if revision
            else revisions[0].revision
        )
        workflow = workflows_store.load_revision(conn, chosen)
        row = workflows_store.revision_row(conn, chosen)
    return {
        **row.to_json(),
        "content": workflow.content,
        "history": [r.to_json() for r in revisions],
    }


def workflow_status(name: str, *, warehouse: Path | str | None = None) -> dict[str, Any]:
    """Active revision, newest revision, and the gate's state for the newest with its reason."""
    from eval_pipelines.api.golden import close_abandoned_runs
    from eval_pipelines.stages.golden import gate_decision

    with _open(warehouse) as conn, transaction(conn):
        sync_workflow_files(conn)
        close_abandoned_runs(conn)
        revisions = workflows_store.require_workflow(conn, name)
        active = workflows_store.active_revision(conn, name)
        gate = gate_decision(conn, revisions[0].revision)
    return {
        "workflow": name,
        "activeRevision": active.to_json() if active else None,
        "newestRevision": revisions[0].to_json(),
        "gate": {
            "revision": gate.revision,
            "state": "passed" if gate.passed else "blocked",
            "reason": gate.reason,
            "sets": [s.to_json() for s in gate.sets],
        },
    }


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
) -> dict[str, Any]:
    """A test run: the revision (default the newest) over one document; nothing is delivered
    anywhere. The document is stored (a case can be made from the run once reviewed)."""
    content, doc = read_document(Path(document))
    with _open(warehouse) as conn, transaction(conn):
        sync_workflow_files(conn)
        workflow = _resolve_revision(conn, name, revision)
        if workflow.kind != "extract":
            raise InputError("workflow", name, "test runs over a document need an extract workflow")
        cache = workflows_store.cached_steps(conn, cache_keys(workflow, doc.document_id))
    execution = execute(workflow, doc, cache)
    outputs = {
        node.id: map_output(node.schema, execution.outputs[node.id])
        for node in workflow.nodes
        if node.id in execution.outputs
    }
    test_run_id = f"t-{uuid.uuid4().hex[:12]}"
    with _open(warehouse) as conn, transaction(conn):
        workflows_store.save_document(conn, content, doc)
        workflows_store.cache_steps(conn, [(*k, v) for k, v in execution.new_cache.items()])
        workflows_store.save_test_run(
            conn, test_run_id, workflow, doc.document_id, outputs, execution.error
        )
    return {
        "testRunId": test_run_id,
        "workflow": name,
        "revision": workflow.revision,
        "documentId": doc.document_id,
        "outputs": outputs,
        "error": execution.error,
        "executedSteps": execution.executed_steps,
        "cachedSteps": execution.cached_steps,
        "costUnits": execution.cost_units,
    }


def approve_run(
    test_run_id: str,
    values: Path | str | dict[str, Any],
    *,
    by: str,
    node: str | None = None,
    warehouse: Path | str | None = None,
) -> dict[str, Any]:
    """Record a reviewed result: the corrected values of one node (keyed by field id, tables
    as lists of rows keyed by column id). A golden case can then be seeded from it."""
    if not isinstance(by, str) or not by.strip():
        raise InputError("by", by, "name the reviewer")
    corrected = values if isinstance(values, dict) else read_json(values, "values")
    if not isinstance(corrected, dict):
        raise InputError(
            "values", type(corrected).__name__, "must be a JSON object keyed by field id"
        )
    with _open(warehouse) as conn, transaction(conn):
        run = workflows_store.load_test_run(conn, test_run_id)
        workflow = workflows_store.load_revision(conn, run.revision)
        scored = workflow.scored_node(node)
        workflows_store.approve_test_run(conn, test_run_id, scored.id, corrected, by)
        approved = workflows_store.load_test_run(conn, test_run_id)
    return approved.to_json()


def activate_workflow(
    name: str, revision: str, *, by: str, warehouse: Path | str | None = None
) -> dict[str, Any]:
    """Make ``revision`` the workflow's active revision, only if the gate passes for exactly
    that revision; the ledger records who, when and on which gating runs."""
    from eval_pipelines.api.golden import close_abandoned_runs
    from eval_pipelines.stages.golden import gate_decision

    if not isinstance(by, str) or not by.strip():
        raise InputError("by", by, "name who activates")
    with _open(warehouse) as conn, transaction(conn):
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
        activation = workflows_store.record_activation(
            conn,
            name,
            full,
            by,
            [s.golden_run_id for s in gate.sets if s.golden_run_id],
            gate.to_json(),
        )
    return {**activation.to_json(), "gate": gate.to_json()}


def activation_ledger(
    name: str | None = None, *, warehouse: Path | str | None = None
) -> list[dict[str, Any]]:
    with _open(warehouse) as conn, transaction(conn):
        if name is not None:
            workflows_store.require_workflow(conn, name)
        return [a.to_json() for a in workflows_store.activations(conn, name)]


def list_documents(*, warehouse: Path | str | None = None) -> list[dict[str, Any]]:
    with _open(warehouse) as conn:
        return workflows_store.list_documents(conn)


def delete_document(document_id: str, *, warehouse: Path | str | None = None) -> dict[str, Any]:
    """Delete a stored document; refused while a golden case references it."""
    with _open(warehouse) as conn, transaction(conn):
        workflows_store.delete_document(conn, document_id)
    return {"documentId": document_id, "deleted": True}
