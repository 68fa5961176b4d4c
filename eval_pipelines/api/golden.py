"""Python API: golden sets, their cases, golden runs, comparisons and trends (001)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eval_pipelines.api._shared import EvalFailed, require_run_warehouse, resolve_warehouse
from eval_pipelines.api.workflows import sync_workflow_files
from eval_pipelines.core.errors import ConflictError, InputError
from eval_pipelines.core.files import read_json
from eval_pipelines.core.golden.labels import resolve_labels
from eval_pipelines.core.golden.scoring import compare_runs, validate_threshold
from eval_pipelines.core.workflows.definition import validate_name
from eval_pipelines.core.workflows.documents import read_document
from eval_pipelines.core.workflows.schema import Schema
from eval_pipelines.stages import golden as golden_stage
from eval_pipelines.stages.golden_report import scored_run_json
from eval_pipelines.storage import golden as golden_store
from eval_pipelines.storage import workflows as workflows_store
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, connect, transaction


def _open(warehouse: Path | str | None) -> Any:
    return connect(resolve_warehouse(warehouse), wait_seconds=CLI_WAIT_SECONDS)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def close_abandoned_runs(conn: Any) -> list[str]:
    """Close the golden runs left ``running`` by a Dagster run that is over (its process
    killed, say) as ``failed``, before anything reads them; returns the runs closed."""

    def ended(run_ids: list[str]) -> dict[str, str]:
        from eval_pipelines import runs
        from eval_pipelines.instance import dagster_instance

        return runs.ended_runs(dagster_instance(), run_ids)

    return golden_stage.close_abandoned_runs(conn, ended)


def create_set(
    set_name: str,
    *,
    workflow: str,
    node: str | None = None,
    threshold: Any = 1.0,
    gate: bool = False,
    warehouse: Path | str | None = None,
) -> dict[str, Any]:
    """A golden set scores one node of one workflow; ``gate`` makes it block activation."""
    validate_name(set_name, "set")
    limit = validate_threshold(threshold)
    with _open(warehouse) as conn, transaction(conn):
        sync_workflow_files(conn)
        revisions = workflows_store.require_workflow(conn, workflow)
        scored = workflows_store.load_revision(conn, revisions[0].revision).scored_node(node)
        existing = golden_store.find_set(conn, set_name)
        if existing is not None:
            same = (existing.workflow, existing.node_id, existing.threshold, existing.gate)
            if same == (workflow, scored.id, limit, bool(gate)):
                return {**existing.to_json(), "created": False}  # re-running a script
            raise ConflictError(
                f"set={set_name!r}: a golden set with this name and other settings exists "
                f"({existing.to_json()})"
            )
        created = golden_store.GoldenSet(set_name, workflow, scored.id, limit, bool(gate), _now())
        golden_store.create_set(conn, created)
    return {**created.to_json(), "created": True}


def _case_json(case: golden_store.GoldenCase, drift: bool | None = None) -> dict[str, Any]:
    return {
        "set": case.set_name,
        "caseId": case.case_id,
        "documentId": case.document_id,
        "labels": case.labels,
        "keyColumns": case.key_columns,
        "fromTestRun": case.from_test_run,
        "enabled": case.enabled,
        "authoredRevision": case.authored_revision,
        **({"schemaDrift": drift} if drift is not None else {}),
    }


def _add_case(
    conn: Any,
    set_name: str,
    document_id: str,
    labels: dict[str, Any],
    *,
    schema: Schema,
    revision: str,
    key_columns: dict[str, Any] | None = None,
    from_test_run: str | None = None,
) -> golden_store.GoldenCase:
    """Store a new enabled case, remembering the scored node's structure (schema drift)."""
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


def add_case(
    set_name: str,
    *,
    document: Path | str,
    labels: Path | str | dict[str, Any],
    warehouse: Path | str | None = None,
) -> dict[str, Any]:
    """Add a case: a document and the values it should produce (keyed by field id, or by a
    field's current name). Values that map onto no field are reported back as unmapped."""
    content, doc = read_document(Path(document))
    raw = labels if isinstance(labels, dict) else read_json(labels, "labels")
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
                return {**_case_json(existing), "unmapped": list(resolved.unmapped), "added": False}
        workflows_store.save_document(conn, content, doc)
        case = _add_case(
            conn,
            set_name,
            doc.document_id,
            resolved.labels,
            schema=schema,
            revision=workflow.revision,
            key_columns=dict(resolved.key_columns),
        )
    return {**_case_json(case), "unmapped": list(resolved.unmapped), "added": True}


def add_records(
    set_name: str,
    *,
    records: list[str] | None = None,
    sample_size: int | None = None,
    seed: int = 7,
    warehouse: Path | str | None = None,
) -> dict[str, Any]:
    """Cases of a classify workflow's set: labelled records of its case (named, or a seeded
    sample), each labelled with its code at the target depth. Records already in the set
    are not added twice."""
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
                "set", set_name, "scores an extract workflow; add documents with add-case"
            )
        chosen = golden_records(conn, workflow, keys=records, sample_size=sample_size, seed=seed)
        schema = workflow.nodes[0].schema
        present = {c.document_id for c in golden_store.list_cases(conn, set_name)}
        added = []
        for content, document, labels in chosen:
            if document.document_id in present:
                continue
            workflows_store.save_document(conn, content, document)
            case = _add_case(
                conn,
                set_name,
                document.document_id,
                labels,
                schema=schema,
                revision=workflow.revision,
            )
            present.add(document.document_id)
            added.append({"caseId": case.case_id, "record": document.name, "labels": labels})
    return {"set": set_name, "added": added, "skippedAsPresent": len(chosen) - len(added)}


def add_case_from_run(
    set_name: str, test_run_id: str, *, warehouse: Path | str | None = None
) -> dict[str, Any]:
    """Seed a case from an approved test run: the reviewed values become its labels (tables
    matched by position: the approved table came from that document, in that order)."""
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
                "run",
                test_run_id,
                f"is a run of workflow {run.workflow}, the set scores {golden_set.workflow}",
            )
        if run.approved_node != golden_set.node_id:
            raise InputError(
                "run",
                test_run_id,
                f"approved node {run.approved_node}, the set scores {golden_set.node_id}",
            )
        for existing in golden_store.list_cases(conn, set_name):
            if existing.from_test_run == test_run_id:
                # Seeding twice from one review would count that document twice.
                return {**_case_json(existing), "unmapped": [], "added": False}
        workflows_store.load_document(conn, run.document_id)  # deleted since the run: refused
        workflow = workflows_store.load_revision(conn, run.revision)
        schema = workflow.scored_node(golden_set.node_id).schema
        resolved = resolve_labels(schema, run.approved_values, from_run=True)
        case = _add_case(
            conn,
            set_name,
            run.document_id,
            resolved.labels,
            schema=schema,
            revision=run.revision,
            from_test_run=test_run_id,
        )
    return {**_case_json(case), "unmapped": list(resolved.unmapped), "added": True}


def list_cases(set_name: str, *, warehouse: Path | str | None = None) -> list[dict[str, Any]]:
    """The set's cases, each with its schema-drift flag against the workflow's newest revision
    (a warning, never a block; renames alone never raise it)."""
    from eval_pipelines.core.golden.scoring import schema_drift

    with _open(warehouse) as conn:
        golden_set = golden_store.load_set(conn, set_name)
        newest = workflows_store.revisions_of(conn, golden_set.workflow)[0].revision
        schema = workflows_store.load_revision(conn, newest).scored_node(golden_set.node_id).schema
        return [
            _case_json(c, schema_drift(c.schema_fingerprint, schema))
            for c in golden_store.list_cases(conn, set_name)
        ]


def set_case_enabled(
    set_name: str, case_id: str, enabled: bool, *, warehouse: Path | str | None = None
) -> dict[str, Any]:
    """Disable a case (left out of the next runs, its labels kept) or enable it again."""
    with _open(warehouse) as conn, transaction(conn):
        golden_store.set_case_enabled(conn, set_name, case_id, enabled)
        return _case_json(golden_store.load_case(conn, set_name, case_id))


def delete_case(
    set_name: str, case_id: str, *, yes: bool = False, warehouse: Path | str | None = None
) -> dict[str, Any]:
    """Delete a case and its results from every past run (``yes`` confirms)."""
    if not yes:
        raise InputError(
            "yes",
            False,
            "deleting a case deletes its results from every past run; confirm with --yes, "
            "or disable the case instead",
        )
    with _open(warehouse) as conn, transaction(conn):
        removed = golden_store.delete_case(conn, set_name, case_id)
    return {"set": set_name, "caseId": case_id, "deleted": True, "resultsDeleted": removed}


def run_set(
    set_name: str,
    *,
    revision: str | None = None,
    wait: bool = False,
    timeout: float | None = None,
    warehouse: Path | str | None = None,
) -> dict[str, Any]:
    """Run the set against ``revision`` (default the workflow's newest) as a Dagster run of
    job ``golden_gate`` on the revision's partition, launched as every run is
    (:func:`eval_pipelines.runs.launch`: ``wait`` executes it in this process when a run slot
    is free, else waits up to ``timeout`` s for it; without ``wait`` it is submitted to the
    queue). Returns ``{set, revision, runId, state}``."""
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
    return {"set": set_name, "revision": chosen, "runId": state.run_id, "state": state.state}


def golden_runs_of(
    dagster_run_id: str, *, warehouse: Path | str | None = None
) -> list[dict[str, Any]]:
    """The scored golden runs a Dagster run made (its reports)."""
    with _open(warehouse) as conn:
        close_abandoned_runs(conn)
        return [
            scored_run_json(golden_stage.score_run(conn, r.golden_run_id))
            for r in golden_store.runs_of_dagster_run(conn, dagster_run_id)
        ]


def run_and_report(
    set_name: str,
    *,
    revision: str | None = None,
    timeout: float = 1800,
    warehouse: Path | str | None = None,
) -> dict[str, Any]:
    """Run the set, wait (the run executes in this process when a run slot is free), and
    return its report (raises EvalFailed when the run failed without a result for the set)."""
    from eval_pipelines import runs
    from eval_pipelines.instance import dagster_instance

    started = run_set(set_name, revision=revision, wait=True, timeout=timeout, warehouse=warehouse)
    if started["state"] != "succeeded":
        reports = golden_runs_of(started["runId"], warehouse=warehouse)
        mine = [r for r in reports if r["set"] == set_name]
        if not mine:
            instance = dagster_instance()
            run = instance.get_run_by_id(started["runId"])
            assert run is not None
            state = runs.run_state(instance, run).to_json()
            raise EvalFailed(
                f"golden run of {set_name} ({started['runId']}) {state['state']}: "
                f"{state['reason'] or 'no reason recorded'}",
                state,
            )
    reports = [
        r for r in golden_runs_of(started["runId"], warehouse=warehouse) if r["set"] == set_name
    ]
    if not reports:
        raise EvalFailed(f"golden run {started['runId']} wrote no result for {set_name}")
    with _open(warehouse) as conn:
        close_abandoned_runs(conn)
        golden_set = golden_store.load_set(conn, set_name)
        gate = golden_stage.gate_decision(conn, reports[0]["revision"]) if golden_set.gate else None
    verdict = (
        next((s.to_json() for s in gate.sets if s.set_name == set_name), None) if gate else None
    )
    return {**reports[0], "dagsterRunId": started["runId"], "gate": verdict}


def run_report(golden_run_id: str, *, warehouse: Path | str | None = None) -> dict[str, Any]:
    with _open(warehouse) as conn:
        close_abandoned_runs(conn)
        return scored_run_json(golden_stage.score_run(conn, golden_run_id))


def compare_golden_runs(
    run_a: str, run_b: str, *, warehouse: Path | str | None = None
) -> dict[str, Any]:
    """Per-field deltas (largest regression first) and the cases whose result changed
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
    return {
        "set": a.run.set_name,
        "a": {"goldenRunId": run_a, "revision": a.run.revision},
        "b": {"goldenRunId": run_b, "revision": b.run.revision},
        **result.to_json(),
    }


def _field_keys(conn: Any, golden_set: golden_store.GoldenSet) -> set[str]:
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
) -> dict[str, Any]:
    """Accuracy over the set's last completed runs, overall or for one field; a run that did
    not score the field is a gap (``None``), never a zero."""
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
        for run in reversed(
            golden_store.runs_of_set(conn, set_name, status="completed", limit=last)
        ):
            scored = golden_stage.score_run(conn, run.golden_run_id)
            value, n = golden_stage.field_accuracy(scored.score, field)
            points.append(
                {
                    "goldenRunId": run.golden_run_id,
                    "revision": run.revision,
                    "finishedAt": run.finished_at.isoformat(timespec="seconds")
                    if run.finished_at
                    else None,
                    "accuracy": value,
                    "n": n,
                }
            )
    return {"set": set_name, "field": field, "points": points}
