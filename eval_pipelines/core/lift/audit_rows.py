"""An audit file's rows checked against the stored requests and audits: which to store,
which were stored before with the same outcome, or the refusal naming the first row that
cannot be stored (the file is then refused whole). The sample and the file's own reading are
:mod:`eval_pipelines.core.lift.audit`.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.audit import AuditFile

__all__ = ["check_audit"]

_CONTRASTED = ("treated", "lever_holdout")


def _audit_refusal(label: str, line: int, field: str, value: Any, rule: str) -> InputError:
    return InputError(f"{label} {line}: {field}", value, f"{rule} (nothing was stored)")


def check_audit(
    read: AuditFile, requests: pl.DataFrame, stored: pl.DataFrame
) -> tuple[pl.DataFrame, int]:
    """The audit rows to store, with each request's workspace and epoch, and how many are
    already stored with the same outcome; :class:`InputError` naming the first row that
    cannot be: an unknown request id, a request stored with more than one content, another
    workspace or epoch than the file says, an arm other than treated and lever_holdout, an
    unresolved logged outcome, or an audit stored before with another outcome or note.

    ``requests`` are the stored rows of the file's request ids
    (:func:`~eval_pipelines.storage.lift.stored_requests`), ``stored`` their stored audits."""
    label = "row" if read.kind == "csv" else "line"
    logged = requests.select(
        "request_id", "workspace_id", "exposure_epoch", "exposure_arm", "outcome"
    ).unique()
    # A request is its workspace's: the same id in two workspaces is two requests.
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for request in logged.iter_rows(named=True):
        by_key.setdefault((request["workspace_id"], request["request_id"]), []).append(request)
    workspaces: dict[str, list[str]] = {}
    for workspace_id, request_id in sorted(by_key):
        workspaces.setdefault(request_id, []).append(workspace_id)
    audited = {
        (row["workspace_id"], row["request_id"]): row for row in stored.iter_rows(named=True)
    }
    keep, skipped = [], 0
    for row in read.rows.iter_rows(named=True):
        request_id, line = row["request_id"], row["line"]
        found = workspaces.get(request_id, [])
        if not found:
            raise _audit_refusal(
                label,
                line,
                "request_id",
                request_id,
                "no stored request has this id: audit the requests `lift audit-sample` lists, "
                "after their logs are ingested",
            )
        if row["workspace_id"] is None and len(found) > 1:
            raise _audit_refusal(
                label,
                line,
                "request_id",
                request_id,
                f"requests of this id are stored in workspaces {', '.join(found)}: give the "
                "row's workspace_id (the audit sample's rows have it)",
            )
        workspace_id = row["workspace_id"] if row["workspace_id"] is not None else found[0]
        if workspace_id not in found:
            raise _audit_refusal(
                label,
                line,
                "workspace_id",
                workspace_id,
                f"request {request_id!r} is stored with workspace_id={', '.join(found)}",
            )
        copies = by_key[(workspace_id, request_id)]
        request = copies[0]
        if len(copies) > 1:
            raise _audit_refusal(
                label,
                line,
                "request_id",
                request_id,
                "this request is stored more than once with different content and is left "
                "out of every lift: it cannot be audited",
            )
        for column in ("exposure_epoch",):
            if row[column] is not None and row[column] != request[column]:
                raise _audit_refusal(
                    label,
                    line,
                    column,
                    row[column],
                    f"request {request_id!r} is stored with {column}={request[column]}",
                )
        if request["exposure_arm"] not in _CONTRASTED:
            raise _audit_refusal(
                label,
                line,
                "request_id",
                request_id,
                f"its arm is {request['exposure_arm']}: the audit compares the treated and "
                "lever_holdout arms only",
            )
        if request["outcome"] is None:
            raise _audit_refusal(
                label,
                line,
                "request_id",
                request_id,
                "its logged outcome is unresolved (null): only a resolved outcome can be "
                "audited against the log",
            )
        before = audited.get((workspace_id, request_id))
        if before is not None:
            if (before["audited_outcome"], before["note"]) != (row["audited_outcome"], row["note"]):
                raise _audit_refusal(
                    label,
                    line,
                    "audited_outcome",
                    row["audited_outcome"],
                    f"request {request_id!r} was audited before with audited_outcome="
                    f"{str(before['audited_outcome']).lower()}, note={before['note']!r} "
                    f"({before['path']}, {label} {before['line']}): an audited outcome never "
                    "changes",
                )
            skipped += 1
            continue
        keep.append(
            {
                **row,
                "workspace_id": request["workspace_id"],
                "exposure_epoch": request["exposure_epoch"],
            }
        )
    return pl.DataFrame(keep, schema=read.rows.schema), skipped
