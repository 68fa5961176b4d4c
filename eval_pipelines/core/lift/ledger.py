"""The lift ledger: a claim as stored (one row per claim) and as the CLI and API show it.

A claim is one scope's live lift (workspace, claim type, epoch and candidate) with the state
:mod:`eval_pipelines.core.lift.claim` decided for it; :func:`ledger_claim` is its ledger row,
scope, interval and n always together.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eval_pipelines.core.lift.cost_report import ledger_cost
from eval_pipelines.core.lift.evidence import LiveConfirmation, evidence_name
from eval_pipelines.core.results import JsonResult

__all__ = ["Claim", "ClaimBaseline", "LedgerClaim", "ledger_claim"]


@dataclass(frozen=True)
class Claim:
    """One row of the lift ledger."""

    claim_id: str
    workspace_id: str
    claim_type: str
    epoch: str
    candidate: str | None
    status: str
    reason: str | None
    verdict: str
    estimate: float | None
    low: float | None
    high: float | None
    mde: float | None
    n_treated: int
    n_control: int
    clusters_treated: int
    clusters_control: int
    aa: dict[str, Any]
    baseline_head: str | None
    app_config: str | None
    offline: dict[str, Any] | None
    lift: dict[str, Any]
    opened_at: datetime
    updated_at: datetime
    # The cost bar (:mod:`eval_pipelines.core.lift.claim_cost`): the intent and frozen cost
    # bound stored when the claim opened, and its cost result; None for a claim stored before.
    cost: dict[str, Any] | None = None


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
    offline screening set beside it); ``cost``, its cost bar.
    ``application_ci`` holds the documents of the
    application-CI results of its workspace and candidate (set beside it by
    :func:`eval_pipelines.core.lift.application_ci_ledger.ledger_with_application_ci`; they
    never change its status or verdict)."""

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
    # The cost bar (:func:`~eval_pipelines.core.lift.cost_report.ledger_cost`): its figures
    # only when the cost was read; None for a claim stored before the cost bar.
    cost: dict[str, Any] | None = None
    application_ci: tuple[dict[str, Any], ...] = ()


def ledger_claim(claim: Claim) -> LedgerClaim:
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
        cost=ledger_cost(claim.cost),
    )
