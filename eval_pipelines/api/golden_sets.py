"""Golden sets and their golden cases (spec 001): create a set; add a case from a document
with its expected values, from a case's labelled records or from an approved test run;
list, enable, disable and delete cases.

A *golden case* is one document of a golden set with the values it should produce (not a
labelled dataset: that is a case of :mod:`eval_pipelines.api.cases`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

import duckdb

from eval_pipelines.api._golden_state import sync_workflow_files
from eval_pipelines.api._shared import open_warehouse
from eval_pipelines.api.golden_results import (
    AddedGoldenCaseResult,
    AddedRecordsResult,
    DeletedGoldenCaseResult,
    GoldenCaseResult,
    GoldenSetResult,
    ListedGoldenCaseResult,
    RecordGoldenCaseResult,
)
from eval_pipelines.core.errors import ConflictError, InputError
from eval_pipelines.core.files import read_json
from eval_pipelines.core.golden.labels import resolve_labels
from eval_pipelines.core.golden.scoring import validate_threshold
from eval_pipelines.core.workflows.definition import validate_name
from eval_pipelines.core.workflows.documents import read_document
from eval_pipelines.core.workflows.schema import Schema
from eval_pipelines.storage import golden as golden_store
from eval_pipelines.storage import workflows as workflows_store
from eval_pipelines.storage.warehouse import transaction


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
    with open_warehouse(warehouse) as conn, transaction(conn):
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
    with open_warehouse(warehouse) as conn, transaction(conn):
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
    with open_warehouse(warehouse) as conn, transaction(conn):
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
    with open_warehouse(warehouse) as conn, transaction(conn):
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

    with open_warehouse(warehouse) as conn:
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
    with open_warehouse(warehouse) as conn, transaction(conn):
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
    with open_warehouse(warehouse) as conn, transaction(conn):
        removed = golden_store.delete_case(conn, set_name, case_id)
    return DeletedGoldenCaseResult(
        set_name=set_name, case_id=case_id, deleted=True, results_deleted=removed
    )
