"""Workflow revisions, the activation ledger, documents, test runs and the step cache."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import duckdb

from eval_pipelines.core.errors import ConflictError, InputError, NotFoundError
from eval_pipelines.core.results import JsonResult
from eval_pipelines.core.workflows.definition import Workflow, workflow_from_content
from eval_pipelines.core.workflows.execute import CachedStep, StepFailure
from eval_pipelines.core.workflows.nodes import Document


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class RevisionRow:
    revision: str
    workflow: str
    kind: str
    source: str
    saved_by: str | None
    saved_at: datetime
    last_saved_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "workflow": self.workflow,
            "kind": self.kind,
            "source": self.source,
            "savedBy": self.saved_by,
            "savedAt": self.saved_at.isoformat(timespec="seconds"),
            "lastSavedAt": self.last_saved_at.isoformat(timespec="seconds"),
        }


_REVISION_COLUMNS = "revision, workflow, kind, source, saved_by, saved_at, last_saved_at"


def save_revision(
    conn: duckdb.DuckDBPyConnection, workflow: Workflow, *, source: str, saved_by: str | None
) -> bool:
    """Store the revision; returns False when it was saved before (then it only becomes the
    workflow's newest revision again: saving is idempotent)."""
    now = _now()
    if has_revision(conn, workflow.revision):
        conn.execute(
            "UPDATE workflow_revisions SET last_saved_at = ? WHERE revision = ?",
            [now, workflow.revision],
        )
        return False
    conn.execute(
        "INSERT INTO workflow_revisions VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            workflow.revision,
            workflow.name,
            workflow.kind,
            json.dumps(workflow.content, sort_keys=True),
            source,
            saved_by,
            now,
            now,
        ],
    )
    return True


def file_revision(conn: duckdb.DuckDBPyConnection, path: str) -> str | None:
    """The revision a committed workflow file held when it was last read."""
    row = conn.execute("SELECT revision FROM workflow_files WHERE path = ?", [path]).fetchone()
    return str(row[0]) if row else None


def record_file_revision(
    conn: duckdb.DuckDBPyConnection, path: str, workflow: str, revision: str
) -> None:
    conn.execute(
        "INSERT INTO workflow_files VALUES (?, ?, ?, ?) ON CONFLICT (path) DO UPDATE SET "
        "workflow = excluded.workflow, revision = excluded.revision, seen_at = excluded.seen_at",
        [path, workflow, revision, _now()],
    )


def has_revision(conn: duckdb.DuckDBPyConnection, revision: str) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM workflow_revisions WHERE revision = ?", [revision]
    ).fetchone()
    return bool(row and row[0])


def load_revision(conn: duckdb.DuckDBPyConnection, revision: str) -> Workflow:
    row = conn.execute(
        "SELECT workflow, content FROM workflow_revisions WHERE revision = ?", [revision]
    ).fetchone()
    if row is None:
        raise NotFoundError(f"revision={revision!r}: no such workflow revision")
    return workflow_from_content(row[0], json.loads(row[1]))


def revision_row(conn: duckdb.DuckDBPyConnection, revision: str) -> RevisionRow:
    row = conn.execute(
        f"SELECT {_REVISION_COLUMNS} FROM workflow_revisions WHERE revision = ?", [revision]
    ).fetchone()
    if row is None:
        raise NotFoundError(f"revision={revision!r}: no such workflow revision")
    return RevisionRow(*row)


def revisions_of(conn: duckdb.DuckDBPyConnection, workflow: str) -> list[RevisionRow]:
    """The workflow's revisions, newest first."""
    rows = conn.execute(
        f"SELECT {_REVISION_COLUMNS} FROM workflow_revisions WHERE workflow = ? "
        "ORDER BY last_saved_at DESC, revision",
        [workflow],
    ).fetchall()
    return [RevisionRow(*row) for row in rows]


def newest_revisions(conn: duckdb.DuckDBPyConnection, limit: int) -> list[RevisionRow]:
    """The most recently saved revisions of every workflow, newest first."""
    rows = conn.execute(
        f"SELECT {_REVISION_COLUMNS} FROM workflow_revisions ORDER BY last_saved_at DESC, revision "
        "LIMIT ?",
        [limit],
    ).fetchall()
    return [RevisionRow(*row) for row in rows]


def workflow_names(conn: duckdb.DuckDBPyConnection) -> list[str]:
    rows = conn.execute(
        "SELECT DISTINCT workflow FROM workflow_revisions ORDER BY workflow"
    ).fetchall()
    return [row[0] for row in rows]


def require_workflow(conn: duckdb.DuckDBPyConnection, workflow: str) -> list[RevisionRow]:
    revisions = revisions_of(conn, workflow)
    if not revisions:
        known = workflow_names(conn)
        raise NotFoundError(
            f"workflow={workflow!r}: no such workflow "
            f"(saved workflows: {', '.join(known) if known else 'none'})"
        )
    return revisions


def revision_of_workflow(conn: duckdb.DuckDBPyConnection, workflow: str, revision: str) -> str:
    """Check that ``revision`` belongs to ``workflow`` (prefixes of 6+ characters accepted)."""
    require_workflow(conn, workflow)
    rows = conn.execute(
        "SELECT revision, workflow FROM workflow_revisions WHERE starts_with(revision, ?)",
        [revision],
    ).fetchall()
    if len(revision) < 6 or not rows:
        raise InputError("revision", revision, "no such revision (see 'workflow show NAME')")
    if len(rows) > 1:
        raise InputError("revision", revision, "is ambiguous; give more characters")
    found, owner = rows[0]
    if owner != workflow:
        raise InputError(
            "revision", revision, f"is a revision of workflow {owner!r}, not of {workflow!r}"
        )
    return str(found)


@dataclass(frozen=True)
class Activation:
    workflow: str
    revision: str
    activated_by: str
    activated_at: datetime
    gate_runs: list[str]
    gate_decision: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "workflow": self.workflow,
            "revision": self.revision,
            "activatedBy": self.activated_by,
            "activatedAt": self.activated_at.isoformat(timespec="seconds"),
            "gateRuns": self.gate_runs,
            "gateDecision": self.gate_decision,
        }


def record_activation(
    conn: duckdb.DuckDBPyConnection,
    workflow: str,
    revision: str,
    activated_by: str,
    gate_runs: list[str],
    gate_decision: dict[str, Any],
) -> Activation:
    now = _now()
    conn.execute(
        "INSERT INTO workflow_activations VALUES (?, ?, ?, ?, ?, ?)",
        [
            workflow,
            revision,
            activated_by,
            now,
            json.dumps(gate_runs),
            json.dumps(gate_decision, sort_keys=True),
        ],
    )
    return Activation(workflow, revision, activated_by, now, gate_runs, gate_decision)


def activations(conn: duckdb.DuckDBPyConnection, workflow: str | None = None) -> list[Activation]:
    """The ledger, newest first (one workflow's, or every workflow's)."""
    rows = conn.execute(
        "SELECT workflow, revision, activated_by, activated_at, gate_runs, gate_decision "
        "FROM workflow_activations WHERE ? IS NULL OR workflow = ? ORDER BY activated_at DESC",
        [workflow, workflow],
    ).fetchall()
    return [
        Activation(w, r, by, at, json.loads(runs), json.loads(decision))
        for w, r, by, at, runs, decision in rows
    ]


def active_revision(conn: duckdb.DuckDBPyConnection, workflow: str) -> Activation | None:
    ledger = activations(conn, workflow)
    return ledger[0] if ledger else None


def save_document(conn: duckdb.DuckDBPyConnection, content: bytes, document: Document) -> None:
    """Store a document once (its id is the hash of its bytes)."""
    conn.execute(
        "INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [document.document_id, document.name, document.media_type, content, document.text, _now()],
    )


def load_document(conn: duckdb.DuckDBPyConnection, document_id: str) -> Document:
    row = conn.execute(
        "SELECT document_id, name, media_type, text FROM documents WHERE document_id = ?",
        [document_id],
    ).fetchone()
    if row is None:
        raise NotFoundError(
            f"document={document_id!r}: no such document (deleted, or never stored; "
            "see 'eval-pipelines document list')"
        )
    return Document(row[0], row[1], row[2], row[3])


@dataclass(frozen=True)
class StoredDocument(JsonResult):
    """A stored document and how many golden cases use it."""

    document_id: str
    name: str
    media_type: str
    bytes: int
    added_at: str
    cases: int


def list_documents(conn: duckdb.DuckDBPyConnection) -> list[StoredDocument]:
    rows = conn.execute(
        "SELECT d.document_id, d.name, d.media_type, octet_length(d.content), d.added_at, "
        "count(c.case_id) FROM documents d LEFT JOIN golden_cases c USING (document_id) "
        "GROUP BY ALL ORDER BY d.added_at, d.document_id"
    ).fetchall()
    return [
        StoredDocument(r[0], r[1], r[2], r[3], r[4].isoformat(timespec="seconds"), r[5])
        for r in rows
    ]


def delete_document(conn: duckdb.DuckDBPyConnection, document_id: str) -> None:
    """Delete a document no case references (a golden set is curated: a cleanup must never
    shrink one silently)."""
    load_document(conn, document_id)
    cases = conn.execute(
        "SELECT set_name, case_id FROM golden_cases WHERE document_id = ? ORDER BY ALL",
        [document_id],
    ).fetchall()
    if cases:
        named = ", ".join(f"{s}/{c}" for s, c in cases)
        raise InputError(
            "document",
            document_id,
            f"is referenced by golden case(s) {named}; delete those cases first "
            "(eval-pipelines golden delete-case SET CASE --yes)",
        )
    conn.execute("DELETE FROM documents WHERE document_id = ?", [document_id])


def save_test_run(
    conn: duckdb.DuckDBPyConnection,
    test_run_id: str,
    workflow: Workflow,
    document_id: str,
    outputs: dict[str, Any],
    error: str | None,
) -> None:
    conn.execute(
        "INSERT INTO test_runs VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL, NULL)",
        [
            test_run_id,
            workflow.name,
            workflow.revision,
            document_id,
            json.dumps(outputs, sort_keys=True),
            error,
            _now(),
        ],
    )


@dataclass(frozen=True)
class TestRun:
    test_run_id: str
    workflow: str
    revision: str
    document_id: str
    outputs: dict[str, Any]
    error: str | None
    created_at: datetime
    approved_values: dict[str, Any] | None
    approved_node: str | None
    approved_by: str | None
    approved_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        return {
            "testRunId": self.test_run_id,
            "workflow": self.workflow,
            "revision": self.revision,
            "documentId": self.document_id,
            "outputs": self.outputs,
            "error": self.error,
            "createdAt": self.created_at.isoformat(timespec="seconds"),
            "approved": None
            if self.approved_by is None or self.approved_at is None
            else {
                "node": self.approved_node,
                "by": self.approved_by,
                "at": self.approved_at.isoformat(timespec="seconds"),
                "values": self.approved_values,
            },
        }


def load_test_run(conn: duckdb.DuckDBPyConnection, test_run_id: str) -> TestRun:
    row = conn.execute(
        "SELECT test_run_id, workflow, revision, document_id, outputs, error, created_at, "
        "approved_values, approved_node, approved_by, approved_at FROM test_runs "
        "WHERE test_run_id = ?",
        [test_run_id],
    ).fetchone()
    if row is None:
        raise NotFoundError(f"run={test_run_id!r}: no such test run")
    values = list(row)
    values[4] = json.loads(values[4])
    values[7] = json.loads(values[7]) if values[7] is not None else None
    return TestRun(*values)


def approve_test_run(
    conn: duckdb.DuckDBPyConnection,
    test_run_id: str,
    node_id: str,
    values: dict[str, Any],
    approved_by: str,
) -> None:
    run = load_test_run(conn, test_run_id)
    if run.approved_by is not None:
        raise ConflictError(
            f"run={test_run_id!r}: already approved by {run.approved_by} at "
            f"{run.approved_at:%Y-%m-%d %H:%M}"
        )
    conn.execute(
        "UPDATE test_runs SET approved_values = ?, approved_node = ?, approved_by = ?, "
        "approved_at = ? WHERE test_run_id = ?",
        [json.dumps(values, sort_keys=True), node_id, approved_by, _now(), test_run_id],
    )


def cached_steps(
    conn: duckdb.DuckDBPyConnection, keys: list[tuple[str, str, str]]
) -> dict[tuple[str, str, str], CachedStep]:
    """Cached outcomes for ``(document_id, node_id, chain_hash)`` keys: the output of a step
    that succeeded, a :class:`StepFailure` for one that failed."""
    if not keys:
        return {}
    wanted = set(keys)
    rows = conn.execute(
        "SELECT document_id, node_id, chain_hash, output, error FROM step_cache "
        "WHERE list_contains(?, document_id) AND (output IS NOT NULL OR error IS NOT NULL)",
        [sorted({k[0] for k in keys})],
    ).fetchall()
    return {
        (r[0], r[1], r[2]): json.loads(r[3]) if r[3] is not None else StepFailure(r[4])
        for r in rows
        if (r[0], r[1], r[2]) in wanted
    }


def cache_steps(
    conn: duckdb.DuckDBPyConnection, entries: list[tuple[str, str, str, CachedStep]]
) -> None:
    for document_id, node_id, chain_hash, outcome in entries:
        output, error = (
            (None, outcome.error)
            if isinstance(outcome, StepFailure)
            else (json.dumps(outcome, sort_keys=True), None)
        )
        conn.execute(
            "INSERT INTO step_cache VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [document_id, node_id, chain_hash, output, error, _now()],
        )
