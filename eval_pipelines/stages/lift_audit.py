"""The outcome audit over the warehouse (spec 004): an audit file's rows stored whole or not
at all (checked by :func:`~eval_pipelines.core.lift.audit_rows.check_audit`), and a
workspace's blinded audit sample read from the stored requests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.audit import AuditFile, audit_sample
from eval_pipelines.core.lift.audit_rows import check_audit
from eval_pipelines.core.results import JsonResult, json_field
from eval_pipelines.stages.lift_report import current_epoch
from eval_pipelines.storage import lift as lift_store
from eval_pipelines.storage.warehouse import transaction


@dataclass(frozen=True)
class AuditIngested(JsonResult):
    """One audit file ingested: its audited rows, how many were stored (never audited
    before), skipped (audited before with the same outcome) and not filled in yet."""

    path: str
    rows: int = json_field("auditedRows")
    stored: int = json_field("storedRows")
    skipped: int = json_field("skippedRows")
    unfilled: int = json_field("unfilledRows")


def ingest_audit(
    conn: duckdb.DuckDBPyConnection, path: Path | str, read: AuditFile
) -> AuditIngested:
    """Check an audit file's rows against the stored requests and audits, then store its new
    audits in one transaction (or refuse the file whole: nothing is stored). Idempotent:
    an audit stored before with the same content is skipped and counted."""
    path = Path(path).absolute()
    with transaction(conn):
        ids = read.rows.get_column("request_id")
        fresh, skipped = check_audit(
            read,
            lift_store.stored_requests(conn, read.rows.select("request_id")),
            lift_store.audits(conn, ids),
        )
        lift_store.insert_audits(conn, str(path), fresh)
    return AuditIngested(str(path), read.rows.height, fresh.height, skipped, read.unfilled)


def audit_sample_rows(
    conn: duckdb.DuckDBPyConnection,
    workspace_id: str,
    *,
    per_arm: int,
    epoch: str | None = None,
    claim_type: str | None = None,
) -> tuple[str, pl.DataFrame]:
    """The epoch (the workspace's current one unless given) and its blinded audit sample."""
    events = lift_store.events(conn, workspace_id=workspace_id)
    if events.height == 0:
        raise InputError(
            "workspace_id",
            workspace_id,
            "no request of this workspace is stored (ingest its logs)",
        )
    chosen = epoch or current_epoch(conn, events, workspace_id)
    return chosen, audit_sample(
        events, workspace_id=workspace_id, epoch=chosen, per_arm=per_arm, claim_type=claim_type
    )
