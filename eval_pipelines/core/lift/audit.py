"""The outcome audit of a live experiment: which requests to audit, and the audit file read
whole.

A bias in how one arm's outcomes are logged (a treated failure logged as a success) leaves
arms, keys and counts intact: in the logs it is a true lift. Only evidence from outside the
logging path can see it. The audit is a small random sample of resolved requests of both
arms whose outcome someone establishes independently (a reviewer, ground truth); the check
:func:`~eval_pipelines.core.lift.audit_check.outcome_audit` then compares, between the arms, how
often the logged outcome disagrees with the audited one.

The sample
    Per workspace and epoch, and within it per claim type (each claim is one claim type's
    contrast), ``per_arm`` resolved requests of each of ``treated`` and ``lever_holdout``
    (clusters seen in more than one arm, left out of every lift, are left out here too):
    balanced, not proportional, because the check compares the two arms' disagreement rates
    and, for a fixed number of reviews, equal arms give the test the most power (a
    lever_holdout share of 20% would otherwise leave a quarter of the treated arm's reviews
    to the control). At most one request per cluster, so the audited rows are independent, as
    the exact test assumes (requests of one trace share their difficulty). The order is a
    seeded hash, :func:`audit_rank`, of the workspace, epoch and request id (FNV-1a, the
    assignment's primitive): each cluster is represented by its request of the smallest
    rank, and each arm by its ``per_arm`` clusters of the smallest ranks. The same stored
    rows always give the same sample; more traffic can only move a request out of it for
    one ranked before it. Audits already made of requests that moved out still count.
Blinded
    The sample lists the request, its claim type, situation class and time, never its arm,
    candidate or logged outcome, in rank order (the arms interleaved), so a reviewer cannot
    lean toward the arm or the logged answer.

References
----------
.. [1] R. Kohavi, D. Tang and Y. Xu, "Trustworthy Online Controlled Experiments", Cambridge
       University Press (2020), chapter 21 (data-quality checks; validating the
       instrumentation against an independent source).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.files import parse_json_line, read_text
from eval_pipelines.core.lift.assignment import fnv1a_32_many

__all__ = [
    "AUDIT_COLUMNS",
    "AUDIT_FILE_MAX_BYTES",
    "SAMPLE_COLUMNS",
    "AuditFile",
    "audit_rank",
    "audit_sample",
    "ranked",
    "read_audit_file",
    "sample_text",
]

#: The columns of an audit file: the request, its audited outcome (true, false; null or empty
#: while not yet audited), an optional note; the sample's context columns are allowed too.
AUDIT_COLUMNS = ("request_id", "audited_outcome", "note")
#: What :func:`audit_sample` writes, in this order (the reviewer fills ``audited_outcome``).
SAMPLE_COLUMNS = (
    "request_id",
    "workspace_id",
    "exposure_epoch",
    "claim_type",
    "situation_class",
    "timestamp",
    "audited_outcome",
    "note",
)
#: An audit file is a few hundred rows per arm; anything near this size is not one.
AUDIT_FILE_MAX_BYTES = 64 * 1024 * 1024

_CONTEXT = ("workspace_id", "exposure_epoch", "claim_type", "situation_class", "timestamp")
_ARMS = ("treated", "lever_holdout")
_DOMAIN = b"outcome-audit\x00"


def audit_rank(workspace_id: str, epoch: str, request_ids: Sequence[str]) -> np.ndarray:
    """The seeded audit order of requests: ``fnv1a_32("outcome-audit" 0x00 workspace 0x00
    epoch 0x00 request_id)`` (UTF-8), ``uint32``, one per request id."""
    prefix = _DOMAIN + workspace_id.encode() + b"\x00" + epoch.encode() + b"\x00"
    return fnv1a_32_many([prefix + request_id.encode() for request_id in request_ids])


def ranked(frame: pl.DataFrame, *, workspace_id: str, epoch: str) -> pl.DataFrame:
    """``frame`` (with ``request_id``) with its ``audit_rank`` column."""
    ids = frame.get_column("request_id").to_list()
    return frame.with_columns(
        audit_rank=pl.Series(audit_rank(workspace_id, epoch, ids).astype(np.int64))
    )


def audit_sample(
    events: pl.DataFrame,
    *,
    workspace_id: str,
    epoch: str,
    per_arm: int,
    claim_type: str | None = None,
) -> pl.DataFrame:
    """The requests to audit, blinded (:data:`SAMPLE_COLUMNS`, ``audited_outcome`` null).

    Parameters
    ----------
    events
        Stored rows with ``request_id``, ``workspace_id``, ``exposure_epoch``,
        ``exposure_arm``, ``claim_type``, ``situation_class``, ``cluster``, ``outcome`` and
        ``ts`` (any workspaces, epochs and arms).
    workspace_id, epoch
        The experiment.
    per_arm
        Requests of each arm in each claim type (fewer when the arm has fewer clusters with
        a resolved request).
    claim_type
        Only this claim type; None takes each.
    """
    if isinstance(per_arm, bool) or not isinstance(per_arm, int) or per_arm < 1:
        raise InputError("per_arm", per_arm, "must be a whole number of requests per arm, >= 1")
    experiment = events.filter(
        (pl.col("workspace_id") == workspace_id) & (pl.col("exposure_epoch") == epoch)
    )
    # A cluster whose rows disagree on their arm is left out of every lift: not worth a review.
    arms = experiment.group_by("cluster").agg(pl.col("exposure_arm").n_unique().alias("arms"))
    mixed = arms.filter(pl.col("arms") > 1).get_column("cluster")
    rows = experiment.filter(
        pl.col("exposure_arm").is_in(_ARMS)
        & pl.col("outcome").is_not_null()
        & ~pl.col("cluster").is_in(mixed.implode())
    )
    if claim_type is not None:
        rows = rows.filter(pl.col("claim_type") == claim_type)
    if rows.height == 0:
        scope = f"workspace {workspace_id}, epoch {epoch}" + (
            f", claim type {claim_type}" if claim_type is not None else ""
        )
        raise InputError(
            "workspace_id",
            workspace_id,
            f"no resolved treated or lever_holdout request is stored in {scope}: nothing to "
            "audit (ingest its logs first)",
        )
    picked = (
        ranked(rows, workspace_id=workspace_id, epoch=epoch)
        .sort("audit_rank", "request_id")
        .unique(subset=["cluster"], keep="first", maintain_order=True)
        .with_columns(
            order=pl.int_range(pl.len()).over("claim_type", "exposure_arm"),
        )
        .filter(pl.col("order") < per_arm)
        .sort("audit_rank", "request_id")
    )
    return picked.select(
        "request_id",
        "workspace_id",
        "exposure_epoch",
        "claim_type",
        "situation_class",
        timestamp=pl.col("ts").cast(pl.Datetime("us")).dt.strftime("%Y-%m-%dT%H:%M:%S%.fZ"),
        audited_outcome=pl.lit(None, dtype=pl.Boolean),
        note=pl.lit(None, dtype=pl.String),
    )


def sample_text(sample: Sequence[dict[str, Any]], *, kind: str) -> str:
    """The sample's rows (:data:`SAMPLE_COLUMNS`) as JSON Lines (``kind="jsonl"``) or CSV,
    for a reviewer to fill in."""
    rows = [{column: row.get(column) for column in SAMPLE_COLUMNS} for row in sample]
    if kind == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(SAMPLE_COLUMNS), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
        return out.getvalue()
    return "".join(json.dumps(row) + "\n" for row in rows)


def _outcome(value: Any, *, csv_text: bool) -> tuple[bool | None, bool]:
    """(the audited outcome, whether the value is valid)."""
    if csv_text:
        if value is None or value == "":
            return None, True
        return {"true": (True, True), "false": (False, True)}.get(value, (None, False))
    if value is None:
        return None, True
    return (value, True) if isinstance(value, bool) else (None, False)


def _records(path: Path, text: str) -> tuple[str, list[tuple[int, dict[Any, Any]]]]:
    text = text.removeprefix("\ufeff")
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        try:
            if reader.fieldnames is None:
                raise InputError("path", str(path), "the audit file has no header row")
            return "csv", [(i + 2, dict(row)) for i, row in enumerate(reader)]
        except csv.Error as error:
            raise InputError("path", str(path), f"is not valid CSV ({error})") from None
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        value = parse_json_line(line, number, "path", str(path))
        if not isinstance(value, dict):
            raise InputError("path", str(path), f"line {number}: must be a JSON object")
        records.append((number, value))
    return "jsonl", records


@dataclass(frozen=True)
class AuditFile:
    """An audit file's audited rows (``line``, ``request_id``, ``audited_outcome``, ``note``,
    and the context columns ``workspace_id`` and ``exposure_epoch``, null where the file has
    none), how many rows were not filled in yet, and the file's kind (jsonl or csv)."""

    rows: pl.DataFrame
    unfilled: int
    kind: str


def read_audit_file(path: Path | str) -> AuditFile:
    """The audit file (JSON Lines, or CSV by its ``.csv`` suffix), checked whole. Rows whose
    ``audited_outcome`` is null or empty are not audited yet: left out and counted; a row
    repeated with the same content is read once.

    Raises
    ------
    InputError
        Naming the line, field, value and rule: a file that is not one, a missing
        ``request_id``, an ``audited_outcome`` not true or false, an unknown column, the
        same request twice with different content or another ``exposure_epoch``.
    """
    path = Path(path)
    kind, records = _records(path, read_text(path, "path", max_bytes=AUDIT_FILE_MAX_BYTES))
    label = "row" if kind == "csv" else "line"
    allowed = set(AUDIT_COLUMNS) | set(_CONTEXT)
    # By workspace and request id: another workspace's request of the same id is another one.
    seen: dict[tuple[str | None, str], tuple[int, bool, str | None, str | None]] = {}
    rows: list[dict[str, Any]] = []
    unfilled = 0
    for number, record in records:
        if None in record:  # csv.DictReader keys the cells past the header's on None
            raise InputError(
                f"{label} {number}",
                record[None],
                "has more cells than the header has columns",
            )
        unknown = sorted(str(k) for k in record if k not in allowed)
        if unknown:
            raise InputError(
                f"{label} {number}: {unknown[0]}",
                record[unknown[0]],
                f"unknown column (an audit row has {', '.join(AUDIT_COLUMNS)}, and the "
                f"sample's {', '.join(_CONTEXT)})",
            )
        request_id = record.get("request_id")
        if not isinstance(request_id, str) or not request_id.strip():
            raise InputError(
                f"{label} {number}: request_id", request_id, "must be a non-empty string"
            )
        outcome, valid = _outcome(record.get("audited_outcome"), csv_text=kind == "csv")
        if not valid:
            raise InputError(
                f"{label} {number}: audited_outcome",
                record.get("audited_outcome"),
                "must be true or false (the logged outcome's vocabulary), or "
                + ("empty" if kind == "csv" else "null")
                + " while the request is not audited yet",
            )
        note = record.get("note")
        note = None if note in (None, "") else note
        if note is not None and not isinstance(note, str):
            raise InputError(f"{label} {number}: note", note, "must be text")
        if outcome is None:
            unfilled += 1
            continue
        context = {key: record.get(key) for key in ("workspace_id", "exposure_epoch")}
        context = {k: (None if v in (None, "") else str(v)) for k, v in context.items()}
        key = (context["workspace_id"], request_id)
        if key in seen:
            first, first_outcome, first_note, first_epoch = seen[key]
            if first_epoch != context["exposure_epoch"]:
                # Read once, the repeat would never reach check_audit's epoch rule.
                raise InputError(
                    f"{label} {number}: exposure_epoch",
                    context["exposure_epoch"],
                    f"request_id {request_id!r} is repeated with another exposure_epoch "
                    f"({label} {first} has {first_epoch!r}): a request has one epoch",
                )
            if (first_outcome, first_note) != (outcome, note):
                raise InputError(
                    f"{label} {number}: audited_outcome",
                    outcome,
                    f"request_id {request_id!r} is audited twice with different content "
                    f"({label} {first} has audited_outcome={str(first_outcome).lower()}, "
                    f"note={first_note!r}): a request has one audited outcome",
                )
            continue
        seen[key] = (number, outcome, note, context["exposure_epoch"])
        rows.append(
            {
                "line": number,
                "request_id": request_id,
                "audited_outcome": outcome,
                "note": note,
                **context,
            }
        )
    schema = {
        "line": pl.Int64,
        "request_id": pl.String,
        "audited_outcome": pl.Boolean,
        "note": pl.String,
        "workspace_id": pl.String,
        "exposure_epoch": pl.String,
    }
    return AuditFile(pl.DataFrame(rows, schema=schema), unfilled, kind)
