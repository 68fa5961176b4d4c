"""Live lift over the warehouse: ingest a log file whole or not at all, count each day's cells,
and build the lift report and ledger (spec 004).

Every lift is treated against lever_holdout within one exposure epoch, after its A/A check;
arms and epochs are never pooled. A claim's confirmation is bound to the baseline it opened
under: a new epoch, baseline head or application config invalidates an open one by name.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines.core.lift.audit import AuditFile
from eval_pipelines.core.lift.checks import NOT_RUN, UNAUDITED
from eval_pipelines.core.lift.evidence import (
    Baseline,
    Confirmation,
    EvidenceKind,
    LiveConfirmation,
    OfflineScreening,
    check_baseline,
    confirmed_improvement,
    evidence_name,
    require_kind,
)
from eval_pipelines.core.lift.lift import PARKED, LiftResult, live_lift
from eval_pipelines.core.lift.logs import (
    MIXED_SCOPE,
    REQUEST_KEY,
    SUFFIXES,
    conflict_error,
    match_stored,
    mixed_artifacts,
    read_log_tail,
    resolved_in_file,
    validate_log,
    validated_log,
)
from eval_pipelines.core.lift.rollup import CELL_KEYS, rollup
from eval_pipelines.core.results import JsonResult, json_field
from eval_pipelines.storage import holdout_evaluations as holdout_evaluations_store
from eval_pipelines.storage import lift as lift_store
from eval_pipelines.storage.warehouse import transaction

ARM_ORDER = ("treated", "lever_holdout", "holdout", "pre_lever", "imported")
# Ledger statuses that are final: later reports do not reopen or re-read them.
SETTLED = ("confirmed", "invalidated")


@dataclass(frozen=True)
class Ingested:
    """One ingest: the file's rows, how many were stored (requests never seen), resolved
    (rows with the outcome of a request stored unresolved, which they replace) and skipped
    (requests already stored with the same content, or stored resolved and logged here
    unresolved: ``unresolved_after_resolved`` of them); ``superseded``, the file's unresolved
    lines of requests a later or earlier line of it resolves (left out)."""

    file_id: str
    path: str
    rows: int
    days: tuple[date, ...]
    new: bool
    mixed_artifacts: int
    stored: int = 0
    skipped: int = 0
    pending_line: int | None = None
    resolved: int = 0
    unresolved_after_resolved: int = 0
    # Unresolved lines of requests whose outcome a line of the same file gives: left out.
    superseded: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "fileId": self.file_id,
            "path": self.path,
            "rows": self.rows,
            "days": [d.isoformat() for d in self.days],
            "new": self.new,
            "storedRows": self.stored,
            "skippedRows": self.skipped,
            "resolvedRows": self.resolved,
            "unresolvedAfterResolvedRows": self.unresolved_after_resolved,
            "supersededRows": self.superseded,
            "pendingLine": self.pending_line,
            "mixedArtifacts": self.mixed_artifacts,
        }


DAY_CELL_COUNTS = ("total", "resolved", "successes", "censored", "clusters")


def day_cells(events: pl.DataFrame) -> pl.DataFrame:
    """Per cell (workspace x claim type x situation class x arm x source) and epoch: rows,
    resolved, successes, censored (unresolved) and clusters; the rollup's own cells, one
    epoch at a time, so the stored counts are the report's. Arms are group keys: never pooled."""
    epochs = sorted(set(events.get_column("exposure_epoch").to_list()))
    rows = [
        {
            **{key: getattr(cell, key) for key in CELL_KEYS},
            "exposure_epoch": cell.epoch,
            **{count: getattr(cell, count) for count in DAY_CELL_COUNTS},
        }
        for epoch in epochs
        for cell in rollup(events, epoch=epoch)
    ]
    schema = {key: pl.String for key in (*CELL_KEYS, "exposure_epoch")}
    return pl.DataFrame(rows, schema={**schema, **dict.fromkeys(DAY_CELL_COUNTS, pl.Int64)})


def refresh_days(conn: duckdb.DuckDBPyConnection, days: Iterable[date]) -> None:
    """Recount the cells of ``days`` from the stored rows (inside a transaction)."""
    for day in days:
        lift_store.replace_day_cells(conn, day, day_cells(lift_store.events(conn, day=day)))


@dataclass(frozen=True)
class LogRead:
    """A file's validated rows, its content hash, and the line left for a later read (a
    growing file's unterminated last line), if any."""

    events: pl.DataFrame
    file_id: str
    pending_line: int | None = None


def read_events(
    path: Path | str, *, partial_tail: bool = False, validated_digest: str | None = None
) -> LogRead:
    """The file's validated rows (InputError naming each bad line): read before the
    warehouse is opened, so a refused file writes nothing, not even an empty warehouse. The
    bytes are read once, so a file growing meanwhile is read at one size.

    ``validated_digest`` is the digest (``file_id``) of content an earlier read validated
    (``api.lift.ingest`` validates before it launches the run): bytes with that digest are
    typed without being validated again; other bytes (the file changed since) are validated."""
    path = Path(path).absolute()
    read = read_log_tail(path, partial_tail=partial_tail)
    if validated_digest is not None and read.digest == validated_digest:
        events = validated_log(read.frame)
    else:
        events = validate_log(read.frame, kind=SUFFIXES[path.suffix.lower()])
    return LogRead(events, read.digest, read.pending_line)


def _stored_content(stored: pl.DataFrame) -> pl.DataFrame:
    return stored.with_columns(
        timestamp=pl.col("ts").cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    )


def ingest_file(
    conn: duckdb.DuckDBPyConnection, path: Path | str, read: LogRead | None = None
) -> Ingested:
    """Validate the whole file (unless ``read`` is its :func:`read_events`), then store its
    new requests in one transaction. Idempotent per request id: a request already stored
    with the same content (its parsed record, whatever the bytes: Parquet or JSON Lines, CRLF,
    another offset for the same instant) is skipped and counted; one stored unresolved
    (outcome null) and logged here with its outcome, the rest the same, is resolved: this row
    replaces the stored one; one stored resolved and logged here unresolved is skipped; one
    stored with other content (a resolved outcome that changes included) refuses the whole
    file, naming both lines. Nothing of a refused file is kept."""
    path = Path(path).absolute()
    if read is None:
        read = read_events(path)
    events, superseded = resolved_in_file(read.events)
    days = tuple(sorted(set(events.get_column("day").to_list())))
    mixed = mixed_artifacts(events).height
    with transaction(conn):
        stored = lift_store.stored_requests(conn, events.select(REQUEST_KEY))
        matched = match_stored(events, _stored_content(stored))
        if matched.conflicts.height:
            raise conflict_error(matched.conflicts, path, kind=SUFFIXES[path.suffix.lower()])
        fresh, resolved = matched.fresh, matched.resolved
        file_id = read.file_id
        if resolved.height:
            lift_store.delete_unresolved(conn, resolved)
        written = pl.concat([fresh, resolved]) if resolved.height else fresh
        if written.height:
            lift_store.insert_file(conn, file_id, str(path), written)
            refresh_days(conn, sorted(set(written.get_column("day").to_list())))
    return Ingested(
        file_id,
        str(path),
        read.events.height,
        days,
        written.height > 0,
        mixed,
        stored=fresh.height,
        skipped=matched.skipped,
        pending_line=read.pending_line,
        resolved=resolved.height,
        unresolved_after_resolved=matched.unresolved_after_resolved,
        superseded=superseded,
    )


def day_summary(conn: duckdb.DuckDBPyConnection, day: date) -> dict[str, Any]:
    """What one day's partition holds: rows per arm and epoch, censored share."""
    events = lift_store.events(conn, day=day)
    arms = dict(events.group_by("exposure_arm").len().iter_rows()) if events.height else {}
    censored = int(events.get_column("outcome").is_null().sum()) if events.height else 0
    return {
        "rows": events.height,
        "rows_by_arm": {arm: int(arms.get(arm, 0)) for arm in ARM_ORDER},
        "epochs": sorted(set(events.get_column("exposure_epoch").to_list())),
        "workspaces": sorted(set(events.get_column("workspace_id").to_list())),
        "censored": censored,
        "censored_share": round(censored / events.height, 4) if events.height else None,
    }


@dataclass(frozen=True)
class Scope:
    workspace_id: str
    claim_type: str
    epoch: str

    @property
    def label(self) -> str:
        return f"{self.workspace_id}/{self.claim_type}/{self.epoch}"


def _scopes(events: pl.DataFrame) -> list[Scope]:
    contrasted = events.filter(pl.col("exposure_arm").is_in(["treated", "lever_holdout"]))
    keys = (
        contrasted.select("workspace_id", "claim_type", "exposure_epoch")
        .unique()
        .sort("workspace_id", "claim_type", "exposure_epoch")
    )
    return [Scope(*row) for row in keys.iter_rows()]


def _current_epoch(conn: duckdb.DuckDBPyConnection, events: pl.DataFrame, workspace_id: str) -> str:
    """The workspace's epoch now: its settings' (``lift settings``), else the epoch of its
    latest row."""
    stored = lift_store.settings(conn, workspace_id)
    if stored is not None:
        return stored.epoch
    rows = events.filter(pl.col("workspace_id") == workspace_id).sort("ts")
    return str(rows.get_column("exposure_epoch")[-1])


def _split_of(conn: duckdb.DuckDBPyConnection, scope: Scope) -> LiftConfig | None:
    """The split the scope's rows were assigned under: the workspace's settings, when they are
    of the scope's epoch (the checks that need the split do not run otherwise)."""
    stored = lift_store.settings(conn, scope.workspace_id)
    if stored is None or stored.epoch != scope.epoch or stored.lever is None:
        return None
    return LiftConfig(
        scope.workspace_id,
        stored.epoch,
        stored.holdout_fraction,
        stored.lever,
        stored.lever_holdout_share,
    )


def _contrasted(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.filter(pl.col("exposure_arm").is_in(["treated", "lever_holdout"])).sort("ts")


def _bound_baseline(rows: pl.DataFrame, epoch: str) -> Baseline:
    """The baseline a new claim opens under: the head and application config of its first
    contrasted (treated or lever_holdout) row that names one."""

    def value(column: str) -> str:
        known = _contrasted(rows).get_column(column).drop_nulls()
        return str(known[0]) if len(known) else ""

    return Baseline(head=value("baseline_head"), app_config=value("app_config"), epoch=epoch)


def _variant_identity(report: dict[str, Any], name: str) -> str:
    """What identifies a screened candidate within a case: its name, configuration and memo
    (two variants of one name with different settings are two candidates)."""
    for variant in report.get("variants", []):
        if variant.get("name") == name:
            keys = ("name", "config", "memoInclude", "memoVersion")
            return json.dumps({key: variant.get(key) for key in keys}, sort_keys=True)
    return json.dumps({"name": name})


def _current_baseline(rows: pl.DataFrame, bound: Baseline, epoch: str) -> Baseline:
    """What the claim's rows were served under, against its bound baseline: the first head
    (and application config) among ALL its treated and lever_holdout rows that differs from
    the bound one, else the bound one. Every row is looked at, not the first and last only,
    so a deploy followed by a rollback (h1 -> h2 -> h1) still shows h2, and a head change in
    the treated rows alone counts as much as one in the control rows."""
    contrasted = _contrasted(rows)

    def value(column: str, bound_value: str) -> str:
        known = contrasted.get_column(column).drop_nulls()
        moved = known.filter(known != bound_value) if bound_value else known
        return str(moved[0]) if len(moved) else bound_value

    return Baseline(
        head=value("baseline_head", bound.head),
        app_config=value("app_config", bound.app_config),
        epoch=epoch,
    )


def offline_screening(
    reports: list[tuple[str, dict[str, Any]]], candidate: str | None, case_id: str | None
) -> tuple[OfflineScreening | None, str]:
    """The newest holdout evaluation in ``reports`` (newest first) of the workspace's case
    ``case_id`` that screened ``candidate`` (the lever the claim's treated arm was served),
    to set beside the live lift; or None, with the reason in words.

    A variant name alone identifies nothing: the workspace must name its case (``lift
    settings --case``), and when the case's evaluations screened more than one candidate
    under that name (different configurations or memos), which one is live is ambiguous and
    none is shown."""
    if not candidate:
        return None, "the claim names no candidate"
    if case_id is None:
        return None, (
            "the workspace names no case (`eval-pipelines lift settings --case`): a variant name "
            "alone does "
            "not identify the candidate"
        )
    found: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for eval_id, report in reports:
        if report.get("caseId") != case_id:
            continue
        for comparison in report.get("comparisons", []):
            if comparison.get("candidate") == candidate:
                found.append((eval_id, report, comparison))
    if not found:
        return None, f"no holdout evaluation of case {case_id} screened {candidate}"
    identities = {_variant_identity(report, candidate) for _, report, _ in found}
    if len(identities) > 1:
        return None, (
            f"ambiguous: the holdout evaluations of case {case_id} screened {len(identities)} "
            f"different candidates named {candidate} (configurations or memos differ)"
        )
    for eval_id, report, comparison in found:
        depth = str((report.get("targetDepth") or [None])[0])
        level = comparison.get("levels", {}).get(depth)
        if level is None:
            continue
        interval = level.get("interval")
        difference = level.get("difference")
        screening = OfflineScreening(
            eval_id=eval_id,
            candidate=candidate,
            baseline=str(comparison.get("baseline")),
            level=level.get("verdict"),
            difference=difference if isinstance(difference, int | float) else None,
            interval=tuple(interval) if isinstance(interval, list) else None,  # type: ignore[arg-type]
            n=int(level.get("pairs") or 0),
            case_id=case_id,
            depth=depth,
        )
        require_kind(screening, EvidenceKind.OFFLINE_SCREENING)
        return screening, f"holdout evaluation {eval_id} of case {case_id}"
    return None, f"no holdout evaluation of case {case_id} read {candidate} at its target level"


def _claim(
    conn: duckdb.DuckDBPyConnection,
    scope: Scope,
    result: LiftResult,
    rows: pl.DataFrame,
    newest_epoch: str,
    now: datetime,
    screenings: list[tuple[str, dict[str, Any]]],
    case_id: str | None,
) -> lift_store.Claim:
    treated = rows.filter(pl.col("exposure_arm") == "treated")
    candidates = treated.get_column("candidate").drop_nulls()
    candidate = str(candidates.mode().sort()[0]) if len(candidates) else None
    claim_id = f"{scope.label}/{candidate or 'lever'}"
    existing = lift_store.claim(conn, claim_id)
    bound = (
        Baseline(existing.baseline_head or "", existing.app_config or "", scope.epoch)
        if existing is not None
        else _bound_baseline(rows, scope.epoch)
    )
    current = _current_baseline(rows, bound, newest_epoch)
    if existing is not None and existing.status in SETTLED:
        # A confirmed or invalidated claim is history: kept as it was settled, with an audit
        # read since beside it when it was settled unaudited.
        return _with_later_audit(existing, result)
    confirmation = check_baseline(Confirmation(claim_id, bound, "open", None), current)
    live = LiveConfirmation(claim_id, result)
    if confirmation.status == "invalidated":
        status, reason = "invalidated", confirmation.reason
    elif result.verdict == PARKED:
        failures = result.checks.failures() if result.checks is not None else []
        status = "parked"
        reason = (
            "checks before reading failed: " + "; ".join(failures)
            if failures
            else "the A/A check failed: the instrument is parked"
        )
    elif result.checks is not None and not result.checks.complete:
        # Superior or not, an unchecked reading confirms nothing.
        status, reason = (
            "open",
            (
                "unchecked: the sample-ratio and assignment checks need the workspace's split of "
                f"epoch {scope.epoch} and its lever (`lift settings`)"
            ),
        )
    elif confirmed_improvement(live):
        status, reason = "confirmed", None
    else:
        status, reason = "open", None
    offline, offline_note = offline_screening(screenings, candidate, case_id)
    difference = result.difference
    interval = result.sequence  # the always-valid interval the verdict reads
    return lift_store.Claim(
        claim_id=claim_id,
        workspace_id=scope.workspace_id,
        claim_type=scope.claim_type,
        epoch=scope.epoch,
        candidate=candidate,
        status=status,
        reason=reason,
        verdict=result.verdict,
        estimate=difference.estimate if difference is not None else None,
        low=interval.low if interval is not None else None,
        high=interval.high if interval is not None else None,
        mde=result.mde,
        n_treated=result.treated.resolved,
        n_control=result.control.resolved,
        clusters_treated=result.treated.clusters,
        clusters_control=result.control.clusters,
        aa=result.to_json().get("aa", {}),
        baseline_head=bound.head or None,
        app_config=bound.app_config or None,
        offline=offline.to_json() if offline is not None else None,
        lift={**result.to_json(), "evidence": evidence_name(live), "offlineNote": offline_note},
        opened_at=existing.opened_at if existing is not None else now,
        updated_at=now,
    )


def _with_later_audit(settled: lift_store.Claim, result: LiftResult) -> lift_store.Claim:
    """A settled claim, with the outcome audit read since (``auditSinceSettled``) when it was
    settled unaudited and its scope is audited now: the status does not change, but a bias
    found later is not silent."""
    audit = result.checks.audit if result.checks is not None else None
    before = (settled.lift.get("checks") or {}).get("audit") or {}
    if audit is None or audit.state == UNAUDITED or before.get("state", UNAUDITED) != UNAUDITED:
        return settled
    return dataclasses.replace(settled, lift={**settled.lift, "auditSinceSettled": audit.to_json()})


def build_report(
    conn: duckdb.DuckDBPyConnection, *, seed: int = 0, n_resamples: int = 2000
) -> tuple[dict[str, Any], list[lift_store.Claim]]:
    """Every scope's lift (per workspace, claim type and epoch), with its rollup cells; the
    ledger updated (inside the caller's transaction). Mixed artifacts are left out."""
    events = lift_store.events(conn)
    mixed = mixed_artifacts(events)
    # Mixed within its (workspace, epoch) only: the same key elsewhere is another artifact.
    unmixed = events.join(mixed.select(MIXED_SCOPE), on=list(MIXED_SCOPE), how="anti")
    # A request stored twice with different content (before ingest was idempotent per
    # request): which copy is true is unknown, so neither is read. A request is its
    # workspace's: another workspace's request of the same id is another request.
    copies = events.group_by(REQUEST_KEY).len().filter(pl.col("len") > 1)
    eligible = unmixed.join(copies, on=list(REQUEST_KEY), how="anti", maintain_order="left")
    # The outcome audit: each audited request's independently established outcome beside its
    # logged one (null where not audited).
    audited = lift_store.audits(conn).select(*REQUEST_KEY, "audited_outcome")
    eligible = eligible.join(audited, on=list(REQUEST_KEY), how="left", maintain_order="left")
    now = datetime.now(UTC).replace(tzinfo=None)
    screenings = holdout_evaluations_store.reports_newest_first(
        conn, "holdout"
    )  # read once per report
    claims: list[lift_store.Claim] = []
    scopes_json: list[dict[str, Any]] = []
    for scope in _scopes(eligible):
        rows = eligible.filter(
            (pl.col("workspace_id") == scope.workspace_id)
            & (pl.col("claim_type") == scope.claim_type)
            & (pl.col("exposure_epoch") == scope.epoch)
        )
        result = live_lift(
            rows,
            workspace_id=scope.workspace_id,
            claim_type=scope.claim_type,
            epoch=scope.epoch,
            rng=seed,
            n_resamples=n_resamples,
            config=_split_of(conn, scope),
        )
        current_epoch = _current_epoch(conn, eligible, scope.workspace_id)
        case_id = lift_store.workspace_case(conn, scope.workspace_id)
        claim = _claim(conn, scope, result, rows, current_epoch, now, screenings, case_id)
        lift_store.save_claim(conn, claim)
        claims.append(claim)
        cells = [c.to_json() for c in rollup(rows, epoch=scope.epoch)]
        scopes_json.append({"scope": scope.label, "claimId": claim.claim_id, "cells": cells})
    report = {
        "rows": events.height,
        "mixedArtifacts": mixed.height,
        "rowsLeftOutAsMixed": events.height - unmixed.height,
        "conflictingRequests": copies.height,
        "rowsLeftOutAsConflicting": int(copies.get_column("len").sum()),
        "claims": [ledger_claim(c).to_json() for c in claims],
        "scopes": scopes_json,
    }
    return report, claims


@dataclass(frozen=True)
class ClaimBaseline(JsonResult):
    """The baseline a claim is bound to: its head and application config."""

    head: str | None
    app_config: str | None


@dataclass(frozen=True)
class LedgerClaim(JsonResult):
    """A ledger row as the CLI and API show it: scope, interval and n always together.
    ``aa``, ``checks``, ``audit``, ``audit_since_settled`` and ``offline`` are the 004 report's
    documents of the claim (the A/A check, the checks before reading, the outcome audit, the
    offline screening set beside it)."""

    claim_id: str
    workspace_id: str
    claim_type: str
    epoch: str
    candidate: str | None
    evidence: str
    status: str
    reason: str | None
    verdict: str
    difference: float | None
    interval: tuple[float | None, float | None] | None
    interval_kind: str
    n_treated: int
    n_control: int
    clusters_treated: int
    clusters_control: int
    mde: float | None
    aa: dict[str, Any]
    checks: dict[str, Any] | None
    audit: dict[str, Any] | None
    audit_since_settled: dict[str, Any] | None
    baseline: ClaimBaseline
    offline: dict[str, Any] | None
    offline_note: str | None
    opened_at: str
    updated_at: str


def ledger_claim(claim: lift_store.Claim) -> LedgerClaim:
    """A stored claim as its ledger row."""
    return LedgerClaim(
        claim_id=claim.claim_id,
        workspace_id=claim.workspace_id,
        claim_type=claim.claim_type,
        epoch=claim.epoch,
        candidate=claim.candidate,
        evidence=claim.lift.get("evidence", evidence_name(LiveConfirmation)),
        status=claim.status,
        reason=claim.reason,
        verdict=claim.verdict,
        difference=claim.estimate,
        interval=(claim.low, claim.high) if claim.low is not None else None,
        # A claim stored before the verdict read the always-valid interval holds a one-look one.
        interval_kind="always_valid" if claim.lift.get("sequence") else "one_look",
        n_treated=claim.n_treated,
        n_control=claim.n_control,
        clusters_treated=claim.clusters_treated,
        clusters_control=claim.clusters_control,
        mde=claim.mde,
        aa=claim.aa,
        checks=claim.lift.get("checks"),
        # A claim stored before the outcome audit existed was read unaudited.
        audit=(claim.lift.get("checks") or {}).get("audit"),
        audit_since_settled=claim.lift.get("auditSinceSettled"),
        baseline=ClaimBaseline(claim.baseline_head, claim.app_config),
        offline=claim.offline,
        offline_note=claim.lift.get("offlineNote"),
        opened_at=claim.opened_at.isoformat(),
        updated_at=claim.updated_at.isoformat(),
    )


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.3f}"


def claim_line(claim: dict[str, Any]) -> str:
    """One ledger line (of a :class:`LedgerClaim`'s document): the claim with its scope,
    interval and n nearby (never a bare number)."""
    low, high = claim["interval"] or (None, None)
    kind = (
        "always-valid 95%"
        if claim.get("intervalKind", "always_valid") == "always_valid"
        else "one-look 95%, stored before the always-valid rule"
    )
    interval = (
        f"[{low:+.3f}, {high:+.3f}] ({kind})"
        if low is not None and high is not None
        else ("no interval")
    )
    status = claim["status"] + (f" ({claim['reason']})" if claim["reason"] else "")
    status += cluster_size_mark(claim.get("checks"))
    status += f", outcome audit {audit_mark(claim.get('audit'))}"
    if claim.get("auditSinceSettled"):
        status += f"; audited since it was settled: {audit_mark(claim['auditSinceSettled'])}"
    offline = claim["offline"]
    beside = (
        f"; offline {_signed(offline.get('difference'))} "
        f"(eval {offline['evalId']}, n {offline.get('n')})"
        if offline
        else "; no offline screening of this candidate"
        + (f" ({claim['offlineNote']})" if claim.get("offlineNote") else "")
    )
    return (
        f"{claim['claimId']}: treated − lever_holdout {_signed(claim['difference'])} "
        f"{interval}, n {claim['nTreated']} vs {claim['nControl']} "
        f"({claim['clustersTreated']} vs {claim['clustersControl']} clusters), "
        f"verdict {claim['verdict']}, {status}{beside}"
    )


def _cluster_size_words(size: dict[str, Any]) -> str:
    """The cluster-size check of a report document in words (a claim stored before the check
    read marked later requests has only its trace clusters)."""
    if "words" in size:
        return str(size["words"])
    if size.get("traceClusters"):
        return (
            f"{size['singleRequestClusters']} of {size['traceClusters']} trace clusters are "
            "one request"
        )
    return "no trace-keyed rows"


def cluster_size_mark(checks: dict[str, Any] | None) -> str:
    """What a ledger line adds for the cluster-size check: that it could not run and for which
    key source, else nothing (a failed check parks the claim, and the reason says so)."""
    size = (checks or {}).get("clusterSize") or {}
    unknown = [s for s in size.get("bySource", []) if s.get("state") == NOT_RUN]
    if not unknown:
        return ""
    counts = ", ".join(
        f"{s['singleRequestClusters']} of {s['clusters']} {s['keySource']}-keyed clusters "
        "hold one request"
        for s in unknown
    )
    return (
        f", cluster-size check could not run ({counts} and too few requests are logged as a "
        "later turn or child span to tell a key logged per request from single-request "
        "traffic)"
    )


def audit_mark(audit: dict[str, Any] | None) -> str:
    """The outcome audit of a ledger line in a few words: ``unaudited`` (what it leaves
    unseen is in the report), ``insufficient``, ``passed`` or ``failed``, with its n."""
    if not audit or audit.get("state", UNAUDITED) == UNAUDITED:
        return UNAUDITED
    treated, control = audit["treated"], audit["control"]
    return (
        f"{audit['state']} ({treated['disagreements']} of {treated['audited']} treated vs "
        f"{control['disagreements']} of {control['audited']} lever_holdout audited outcomes "
        "disagree with the logged ones)"
    )


def _audit_line(audit: dict[str, Any] | None, *, settled: bool = False) -> str:
    state = (audit or {}).get("state", UNAUDITED)
    if state == UNAUDITED:
        return (
            "  - Outcome audit: none. A bias in one arm's outcome logging (a treated failure "
            "logged as a success) leaves arms, keys and counts intact and cannot be seen "
            "without one: it reads as a lift (`lift audit-sample`, then `lift audit FILE`)"
        )
    assert audit is not None
    treated, control = audit["treated"], audit["control"]
    counts = (
        f"treated {treated['disagreements']} of {treated['audited']} audited outcomes disagree "
        f"with the logged one, lever_holdout {control['disagreements']} of {control['audited']}"
    )
    if state == "insufficient":
        return (
            f"  - Outcome audit: insufficient ({counts}; each arm needs {audit['minPerArm']}): "
            "a bias in one arm's outcome logging is not checked yet"
        )
    failed = (
        "FAILED: the claim was settled on biased outcome logging (it stays as it was settled)"
        if settled
        else "FAILED: the instrument is parked"
    )
    outcome = "passed" if state == "passed" else failed
    head = "Outcome audit since the claim was settled unaudited" if settled else "Outcome audit"
    return (
        f"  - {head}: {counts}; the logging adds {audit['liftBias']:+.3f} to the lift; "
        f"Fisher exact p = {audit['pValue']:.3g} (parks below {audit['alpha']}): {outcome}"
    )


# The checks of the logs themselves (the outcome audit has its own line).
_LOG_CHECKS = ("sampleRatio", "assignment", "clusterSize")


def report_markdown(report: dict[str, Any]) -> str:
    """The report: each claim (scope, interval, n, verdict, A/A, MDE, offline beside), then
    each scope's cells (counts and censored share per arm, never pooled)."""
    lines = ["### Live lift", ""]
    if not report["claims"]:
        lines.append("No scope has treated or lever_holdout traffic yet: no lift is claimed.")
    for claim in report["claims"]:
        lines.append(f"- {claim_line(claim)}")
        aa = claim["aa"] or {}
        if aa:
            outcome = "passed" if aa.get("passed") else "FAILED: the instrument is parked"
            lines.append(
                f"  - A/A: {aa.get('falsePositives')} of {aa.get('splits')} seeded halves of "
                f"the control arm read a difference (at most "
                f"{float(aa.get('maxFalsePositiveRate') or 0):.0%} may): {outcome}"
            )
        checks = claim.get("checks") or {}
        if checks:
            ratio, assignment, size = (
                checks["sampleRatio"],
                checks["assignment"],
                checks["clusterSize"],
            )
            srm = (
                f"p = {ratio['pValue']:.3g} (parks below {ratio['alpha']})"
                if ratio["ran"]
                else "not run (no split of this epoch)"
            )
            derived = (
                f"{assignment['mismatchedRows']} of {assignment['checkedRows']} rows disagree"
                if assignment["ran"]
                else "not run (no split of this epoch)"
            )
            single = _cluster_size_words(size)
            lines.append(
                f"  - Checks before reading: sample ratio {srm}; assignment re-derived from the "
                f"logged keys: {derived}; cluster size: {single}: "
                + (
                    "FAILED: the instrument is parked"
                    if not all(checks[k]["passed"] for k in _LOG_CHECKS)
                    else "passed, but the cluster-size check could not run (not parked)"
                    if size.get("state") == NOT_RUN
                    else "passed"
                )
            )
        lines.append(_audit_line(claim.get("audit")))
        if claim.get("auditSinceSettled"):
            lines.append(_audit_line(claim["auditSinceSettled"], settled=True))
        if claim["mde"] is not None:
            lines.append(
                f"  - MDE {claim['mde']:.3f} at 80% power (a power diagnostic, not the verdict)"
            )
    if report.get("mixedArtifacts"):
        lines.append(
            f"\n{report['mixedArtifacts']} mixed artifacts ({report['rowsLeftOutAsMixed']} rows) "
            "left out: their requests disagree on their arm."
        )
    if report.get("conflictingRequests"):
        lines.append(
            f"\n{report['conflictingRequests']} request ids stored more than once with different "
            f"content ({report['rowsLeftOutAsConflicting']} rows, stored before ingest was "
            "idempotent per request id) left out: which copy is true is unknown."
        )
    for scope in report.get("scopes", []):
        lines += ["", f"#### Cells of {scope['scope']}", ""]
        lines += [
            "| situation | arm | source | resolved | successes | rate | censored share |",
            "|---|---|---|---|---|---|---|",
        ]
        for cell in scope["cells"]:
            lines.append(
                f"| {cell['situationClass']} | {cell['exposureArm']} | {cell['source']} | "
                f"{cell['resolved']} | {cell['successes']} | {_rate(cell['rate'])} | "
                f"{cell['censoredShare']:.3f} |"
            )
    lines += [
        "",
        "_A lift is claimed only when the always-valid interval's lower bound is above zero "
        "(valid however often this report is read), within one epoch, after the A/A check and "
        "the checks before reading passed; collecting or insufficient_evidence does not imply "
        "a lift. A claim confirmed unaudited is marked so: the logs alone cannot show a bias "
        "in one arm's outcome logging._",
    ]
    return "\n".join(lines)


def _rate(rate: Any) -> str:
    if isinstance(rate, dict):
        value, interval = rate.get("value"), rate.get("interval")
        if isinstance(value, int | float) and isinstance(interval, list):
            return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"
        return str(value)
    return str(rate)


@dataclass(frozen=True)
class AuditIngested(JsonResult):
    """One audit file ingested: its audited rows, how many were stored (never audited
    before), skipped (audited before with the same outcome) and not filled in yet."""

    path: str
    rows: int = json_field("auditedRows")
    stored: int = json_field("storedRows")
    skipped: int = json_field("skippedRows")
    unfilled: int = json_field("unfilledRows")


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
    from eval_pipelines.core.lift.audit import audit_sample

    events = lift_store.events(conn, workspace_id=workspace_id)
    if events.height == 0:
        raise InputError(
            "workspace_id",
            workspace_id,
            "no request of this workspace is stored (ingest its logs)",
        )
    chosen = epoch or _current_epoch(conn, events, workspace_id)
    return chosen, audit_sample(
        events, workspace_id=workspace_id, epoch=chosen, per_arm=per_arm, claim_type=claim_type
    )
