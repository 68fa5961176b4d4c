"""Live lift (spec 004): assign requests, set a workspace's holdout, ingest logs, read the
report and the ledger.

``assign`` is the serving-side library call (no Dagster, no warehouse needed when the config
is given). ``ingest`` and ``report`` run the Dagster jobs ``lift_ingest_job`` and
``lift_report_job`` in this process, so every ingest and report is a run in the instance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypedDict

import duckdb

from eval_pipelines.api._application_ci import RecordedCI, record_ci
from eval_pipelines.api._lift_cost import checked_cost_options, save_cost_options
from eval_pipelines.api._shared import (
    EvalFailed,
    open_warehouse,
    require_run_warehouse,
    resolve_warehouse,
    step_refusal,
)
from eval_pipelines.core.errors import InputError, RunRefusal
from eval_pipelines.core.inputs import check_name
from eval_pipelines.core.lift.application_ci_ledger import LedgerApplicationCI
from eval_pipelines.core.lift.assignment import (
    DEFAULT_HOLDOUT_FRACTION,
    LiftConfig,
    Message,
    Request,
    assign,
)
from eval_pipelines.core.lift.cost_settings import CostOptions
from eval_pipelines.core.lift.ledger import LedgerClaim
from eval_pipelines.core.results import JsonResult
from eval_pipelines.runs.states import RunState
from eval_pipelines.stages.lift_audit import AuditIngested
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import lift as lift_store
from eval_pipelines.storage.warehouse import exists as warehouse_exists
from eval_pipelines.storage.warehouse import transaction

DEFAULT_EPOCH = "e1"

__all__ = [
    "ArmAssignment",
    "AuditIngested",
    "AuditSample",
    "IngestRefused",
    "Ingested",
    "LedgerApplicationCI",
    "LedgerClaim",
    "LiftReport",
    "LiftRequest",
    "RecordedCI",
    "WorkspaceSettings",
    "assign_request",
    "audit",
    "audit_sample",
    "config_for",
    "ingest",
    "ledger",
    "record_ci",
    "report",
    "set_settings",
]


class LiftRequest(TypedDict, total=False):
    """One request to assign: its workspace (default the config's), and what keys its cluster
    (artifact key first, then trace id, then its first user message, then request id)."""

    workspace_id: str
    artifact_key: str | None
    trace_id: str | None
    messages: Sequence[Mapping[str, str]]
    request_id: str | None


@dataclass(frozen=True)
class ArmAssignment(JsonResult):
    """The arm of one request, with the split it was assigned under."""

    arm: str
    epoch: str
    cluster: str
    key_source: str
    bucket: int
    holdout_fraction: float
    lever: str | None


@dataclass(frozen=True)
class WorkspaceSettings(JsonResult):
    """A workspace's settings after ``set_settings``; ``new_epoch``: whether the split changed
    (and so the epoch)."""

    workspace_id: str
    holdout_fraction: float
    epoch: str
    lever: str | None
    lever_holdout_share: float
    case_id: str | None
    new_epoch: bool
    # The cost options (claim options: they start no epoch): the declared decision intent
    # ({kind, budget, currency}, None: no cost verdict is read), the envelope elements the
    # lever changes, and the price table ({currency, models}) that prices logged tokens.
    intent: dict[str, Any] | None = None
    lever_changes: tuple[str, ...] = ()
    prices: dict[str, Any] | None = None


@dataclass(frozen=True)
class Ingested(JsonResult):
    """One log file ingested by run ``run_id`` (see :func:`ingest`): its rows and days, whether
    anything was written (``new``), and per request how it was stored, skipped or resolved.
    The fields are in the order ``lift ingest --json`` has always printed them (the run's
    metadata document, whose keys Dagster sorts), ``run_id`` last."""

    days: tuple[str, ...]
    file_id: str
    mixed_artifacts: int
    new: bool
    path: str
    pending_line: int | None
    resolved_rows: int
    rows: int
    skipped_rows: int
    stored_rows: int
    superseded_rows: int
    unresolved_after_resolved_rows: int
    run_id: str


@dataclass(frozen=True)
class LiftReport(JsonResult):
    """The lift report run ``run_id`` stored: ``report`` is the 004 report document (rows,
    mixed and conflicting requests left out, ``claims``, ``scopes``), ``markdown`` its text.
    Its JSON is the report document with ``markdown`` and ``runId`` beside its keys."""

    report: dict[str, Any]
    markdown: str
    run_id: str

    def to_json(self) -> dict[str, Any]:
        return {**self.report, "markdown": self.markdown, "runId": self.run_id}


@dataclass(frozen=True)
class AuditSample(JsonResult):
    """The requests to audit of one workspace's epoch: ``rows`` are the audit file's rows
    (``request_id``, ``workspace_id``, ``exposure_epoch``, ..., ``audited_outcome`` empty)."""

    workspace_id: str
    epoch: str
    per_arm: int
    rows: tuple[dict[str, Any], ...]


def _stored_settings(workspace_id: str, warehouse: Path | str | None) -> lift_store.Settings | None:
    """The workspace's committed settings, read from the copy ``lift settings`` publishes
    beside the warehouse: assignment never opens the DuckDB file, so it does not wait on a
    process writing it. A warehouse from before that copy existed is read (and may wait)."""
    path = resolve_warehouse(warehouse)
    if not warehouse_exists(path):
        return None  # a copy left beside a removed warehouse is not its settings
    published = lift_store.published_settings(path)
    if published is not None:
        return published.get(workspace_id)
    with open_warehouse(warehouse, read_only=True) as conn:
        return lift_store.settings(conn, workspace_id)


def config_for(
    workspace_id: str,
    *,
    epoch: str | None = None,
    holdout_fraction: float | None = None,
    lever: str | None = None,
    lever_holdout_share: float | None = None,
    warehouse: Path | str | None = None,
) -> LiftConfig:
    """The workspace's stored settings (``lift settings``), each overridden when given."""
    stored = _stored_settings(workspace_id, warehouse)
    return LiftConfig(
        workspace_id=workspace_id,
        epoch=epoch or (stored.epoch if stored else DEFAULT_EPOCH),
        holdout_fraction=holdout_fraction
        if holdout_fraction is not None
        else (stored.holdout_fraction if stored else DEFAULT_HOLDOUT_FRACTION),
        lever=lever if lever is not None else (stored.lever if stored else None),
        lever_holdout_share=lever_holdout_share
        if lever_holdout_share is not None
        else (stored.lever_holdout_share if stored else 0.5),
    )


def assign_request(request: LiftRequest, config: LiftConfig) -> ArmAssignment:
    """The arm of one request (``{workspace_id, artifact_key?, trace_id?, messages?,
    request_id?}``, messages as ``[{role, content}]``)."""
    messages = request.get("messages") or []
    if not isinstance(messages, list | tuple) or not all(
        isinstance(m, Mapping)
        and isinstance(m.get("role"), str)
        and isinstance(m.get("content"), str)
        for m in messages
    ):
        raise InputError("messages", messages, "must be a list of {role, content} strings")
    assigned = assign(
        Request(
            workspace_id=str(request.get("workspace_id", config.workspace_id)),
            artifact_key=request.get("artifact_key"),
            trace_id=request.get("trace_id"),
            messages=tuple(Message(m["role"], m["content"]) for m in messages),
            request_id=request.get("request_id"),
        ),
        config,
    )
    return ArmAssignment(
        arm=str(assigned.arm),
        epoch=assigned.epoch,
        cluster=assigned.cluster,
        key_source=assigned.key_source,
        bucket=assigned.bucket,
        holdout_fraction=config.holdout_fraction,
        lever=config.lever,
    )


def _next_epoch(epoch: str) -> str:
    digits = epoch.lstrip("e")
    return f"e{int(digits) + 1}" if epoch.startswith("e") and digits.isdigit() else f"{epoch}+1"


def set_settings(
    workspace_id: str,
    *,
    holdout_fraction: float | None = None,
    lever: str | None = None,
    clear_lever: bool = False,
    lever_holdout_share: float | None = None,
    case: str | None = None,
    intent: str | None = None,
    budget: float | None = None,
    budget_currency: str | None = None,
    clear_intent: bool = False,
    lever_changes: str | Sequence[str] | None = None,
    prices: Path | str | Mapping[str, Any] | None = None,
    clear_prices: bool = False,
    warehouse: Path | str | None = None,
) -> WorkspaceSettings:
    """Set a workspace's standing holdout (within [5%, 30%]) and lever. A change of the split
    (from the stored settings, or from the defaults assignment uses before any: e1, 10%, no
    lever, share 0.5) starts a new exposure epoch, so observations of two splits are never
    pooled. ``case`` names the case the workspace's traffic is an instance of: only that
    case's offline screenings of the lever are set beside its live claims (it is not part of
    the split).

    The cost options are claim options too (no epoch): ``intent`` (``cost_optimization``,
    ``required_migration`` or ``product_improvement``) with, for the last two, a ``budget``
    per task in ``budget_currency``; ``clear_intent``; ``lever_changes``, the execution-envelope
    elements the lever changes (``"model,provider"``, a list, or ``"none"``); ``prices``, a
    price table (a JSON file's path, or its document); ``clear_prices``. A claim keeps the
    intent it opened under (docs/lift-cost.md)."""
    # Every value given is checked (as a config would be) before anything is opened; the
    # others come from the stored, already valid, settings. The workspace id and lever are
    # stored: they follow the one name rule (assignment alone keys any UTF-8 workspace id,
    # as the published bucket vectors do).
    check_name(workspace_id, "workspace_id", "a workspace id")
    if lever is not None:
        check_name(lever, "lever", "a lever")
    LiftConfig(
        workspace_id,
        DEFAULT_EPOCH,
        holdout_fraction if holdout_fraction is not None else DEFAULT_HOLDOUT_FRACTION,
        lever,
        lever_holdout_share if lever_holdout_share is not None else 0.5,
    )
    options = checked_cost_options(
        intent=intent,
        budget=budget,
        budget_currency=budget_currency,
        clear_intent=clear_intent,
        changes=lever_changes,
        prices=prices,
        clear_prices=clear_prices,
    )
    if case is not None and not _case_exists(case, warehouse):
        raise InputError("case", case, "no such case (create it with `case create`)")
    with open_warehouse(warehouse, create=True) as conn:
        after, changed, case_id, cost = _save_settings(
            conn,
            workspace_id,
            holdout_fraction,
            lever,
            clear_lever,
            lever_holdout_share,
            case,
            options,
        )
        lift_store.publish_settings(conn, resolve_warehouse(warehouse))
    return WorkspaceSettings(
        workspace_id=after.workspace_id,
        holdout_fraction=after.holdout_fraction,
        epoch=after.epoch,
        lever=after.lever,
        lever_holdout_share=after.lever_holdout_share,
        case_id=case_id,
        new_epoch=changed,
        intent=cost.intent,
        lever_changes=cost.lever_changes,
        prices=cost.prices,
    )


def _save_settings(
    conn: duckdb.DuckDBPyConnection,
    workspace_id: str,
    holdout_fraction: float | None,
    lever: str | None,
    clear_lever: bool,
    lever_holdout_share: float | None,
    case: str | None,
    options: CostOptions,
) -> tuple[lift_store.Settings, bool, str | None, lift_store.CostSettings]:
    with transaction(conn):
        stored = lift_store.settings(conn, workspace_id)
        before = stored or lift_store.Settings(
            workspace_id, DEFAULT_HOLDOUT_FRACTION, DEFAULT_EPOCH, None, 0.5
        )
        after = replace(
            before,
            holdout_fraction=holdout_fraction
            if holdout_fraction is not None
            else before.holdout_fraction,
            lever=None if clear_lever else (lever if lever is not None else before.lever),
            lever_holdout_share=lever_holdout_share
            if lever_holdout_share is not None
            else before.lever_holdout_share,
        )
        # Before any settings, assignment stamps the defaults (e1 at 10%, no lever): a first
        # change from them is a change of split too, or e1 would pool two splits.
        changed = after != before
        if changed:
            after = replace(after, epoch=_next_epoch(before.epoch))
        lift_store.save_settings(conn, after)
        if case is not None:
            lift_store.save_workspace_case(conn, workspace_id, case)
        case_id = lift_store.workspace_case(conn, workspace_id)
        # Claim options like the case: they start no epoch.
        cost = save_cost_options(conn, workspace_id, options)
    return after, changed, case_id, cost


def _case_exists(case_id: str, warehouse: Path | str | None) -> bool:
    if not warehouse_exists(resolve_warehouse(warehouse)):
        return False
    with open_warehouse(warehouse, read_only=True) as conn:
        return cases_store.case_exists(conn, case_id)


def _run(kind: str, run_config: dict[str, Any] | None = None) -> RunState:
    """Launch the lift job and wait for it (executed in this process when a run slot is
    free), as every run is launched (:func:`eval_pipelines.runs.launch`); returns its state."""
    from eval_pipelines import runs

    return runs.launch(kind, None, wait=True, run_config=run_config)


def _failure(state: RunState) -> str:
    return state.reason or "see the run in the UI"


class IngestRefused(RunRefusal):
    """The run refused the file against what is stored (a request already stored with other
    content): nothing of it was kept."""

    def __init__(self, message: str) -> None:
        super().__init__("log", message)


def _refusal(run_id: str) -> str | None:
    """The refusal a step of the run raised (see ``defs.lift``), if any."""
    from eval_pipelines.defs.lift import REFUSED

    return step_refusal(run_id, REFUSED)


def _ingested(run_id: str) -> Ingested:
    """What the ingest step stored, as its output's metadata says (``defs.lift``)."""
    from dagster import DagsterEventType

    from eval_pipelines.defs.lift import INGESTED
    from eval_pipelines.runs.instance import dagster_instance

    for record in dagster_instance().all_logs(run_id, of_type=DagsterEventType.STEP_OUTPUT):
        event = record.dagster_event
        data = event.step_output_data if event is not None else None
        if data is not None and INGESTED in data.metadata:
            value = data.metadata[INGESTED].value
            assert isinstance(value, dict)
            return Ingested(
                file_id=value["fileId"],
                path=value["path"],
                rows=value["rows"],
                days=tuple(value["days"]),
                new=value["new"],
                stored_rows=value["storedRows"],
                skipped_rows=value["skippedRows"],
                resolved_rows=value["resolvedRows"],
                unresolved_after_resolved_rows=value["unresolvedAfterResolvedRows"],
                superseded_rows=value["supersededRows"],
                pending_line=value["pendingLine"],
                mixed_artifacts=value["mixedArtifacts"],
                run_id=run_id,
            )
    raise EvalFailed(f"ingest run {run_id} succeeded without saying what it stored")


def ingest(path: Path | str, *, warehouse: Path | str | None = None) -> Ingested:
    """Validate and store one log file (a run of ``lift_ingest_job``). A bad file is refused
    whole, naming each bad line (InputError), before anything is written; nothing of it is
    kept. The file is validated once, here: the run is given the validated content's hash and
    re-validates only a file that changed since. Idempotent per request id: requests already
    stored with the same content are skipped (``skipped_rows``); one stored unresolved and
    logged here with its outcome is resolved (``resolved_rows``: the new row replaces it); one
    stored with other content refuses the file (:class:`IngestRefused`), naming both lines."""
    from eval_pipelines.stages.lift_ingest import read_events

    require_run_warehouse(warehouse)
    source = Path(path).absolute()
    validated = read_events(source)
    with open_warehouse(warehouse, create=True):
        pass  # the run opens the warehouse without creating it; a valid first log may
    config = {"path": str(source), "validated_digest": validated.file_id}
    state = _run("lift_ingest", {"ops": {"ingest_lift_log": {"config": config}}})
    if state.state != "succeeded":
        refused = _refusal(state.run_id)
        if refused is not None:
            raise IngestRefused(refused)
        raise EvalFailed(f"ingest of {source} failed: {_failure(state)}")
    return _ingested(state.run_id)


def report(*, warehouse: Path | str | None = None) -> LiftReport:
    """Recompute every scope's lift and the ledger (a run of ``lift_report_job``)."""
    require_run_warehouse(warehouse)
    state = _run("lift_report")
    if state.state != "succeeded":
        raise EvalFailed(f"lift report failed: {_failure(state)}")
    with open_warehouse(warehouse, read_only=True) as conn:
        stored = lift_store.latest_report(conn)
    if stored is None:
        raise EvalFailed("the lift report run stored no report")
    content, markdown = stored
    return LiftReport(content, markdown, state.run_id)


def ledger(*, warehouse: Path | str | None = None) -> tuple[LedgerClaim | LedgerApplicationCI, ...]:
    """Every claim with its scope, interval, n, status, the offline difference and the
    application-CI results of its candidate beside it; then each candidate with application-CI
    results and no live claim yet (:class:`LedgerApplicationCI`, status ``no live claim``)."""
    from eval_pipelines.api._application_ci import ledger_rows

    if not warehouse_exists(resolve_warehouse(warehouse)):
        return ()
    with open_warehouse(warehouse, read_only=True) as conn:
        return ledger_rows(conn)


def audit_sample(
    workspace_id: str,
    *,
    size: int,
    epoch: str | None = None,
    claim_type: str | None = None,
    warehouse: Path | str | None = None,
) -> AuditSample:
    """The requests to audit (``size`` per arm in each claim type, one per cluster, blinded:
    no arm, no logged outcome) of the workspace's epoch (its current one unless given),
    each row with an empty
    ``audited_outcome`` for a reviewer to fill in (:mod:`eval_pipelines.core.lift.audit`)."""
    from eval_pipelines.stages.lift_audit import audit_sample_rows

    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise InputError("size", size, "must be a whole number of requests per arm, >= 1")
    if not warehouse_exists(resolve_warehouse(warehouse)):
        raise InputError(
            "workspace_id", workspace_id, "no request of this workspace is stored (no warehouse)"
        )
    with open_warehouse(warehouse, read_only=True) as conn:
        chosen, rows = audit_sample_rows(
            conn, workspace_id, per_arm=size, epoch=epoch, claim_type=claim_type
        )
    return AuditSample(workspace_id, chosen, size, tuple(rows.to_dicts()))


def audit(path: Path | str, *, warehouse: Path | str | None = None) -> AuditIngested:
    """Ingest an audit file (the sample with ``audited_outcome`` filled in: true or false),
    whole or not at all. Refused (InputError naming the line, field, value and rule; nothing
    stored): a malformed file, an unknown request id, a request not in the treated or
    lever_holdout arm or not resolved, the same request twice with different outcomes, or an
    outcome other than one stored before. Idempotent: audits stored before with the same
    outcome are skipped (``skipped``); rows not filled in are counted (``unfilled``)."""
    from eval_pipelines.core.lift.audit import read_audit_file
    from eval_pipelines.stages.lift_audit import ingest_audit

    source = Path(path).absolute()
    read = read_audit_file(source)  # checked whole before the warehouse is opened
    if read.rows.height and not warehouse_exists(resolve_warehouse(warehouse)):
        first = read.rows.row(0, named=True)
        label = "row" if read.kind == "csv" else "line"
        raise InputError(
            f"{label} {first['line']}: request_id",
            first["request_id"],
            "no stored request has this id (there is no warehouse yet: ingest the logs first) "
            "(nothing was stored)",
        )
    if read.rows.height == 0:
        return AuditIngested(str(source), 0, 0, 0, read.unfilled)
    with open_warehouse(warehouse) as conn:
        return ingest_audit(conn, source, read)
