"""How a live lift becomes a ledger claim's state: ``confirmed``, ``open``, ``parked`` or
``invalidated`` (spec 004, "How a lift is proven" and "What a lift is not").

This module is the whole rule; change how a live-lift verdict becomes confirmed here and
nowhere else. A claim is one scope's lift (workspace, claim type, epoch) of the candidate its
treated arm was served, read each time the report runs:

1. A ``confirmed`` or ``invalidated`` claim is settled: history, kept as it was settled
   (:func:`with_later_audit` sets an outcome audit read since beside one settled unaudited).
2. Its confirmation is bound to the baseline it opened under (:func:`bound_baseline`). A new
   epoch, baseline head or application config under it (:func:`current_baseline`) invalidates
   it by name (``epoch_changed``, ``stale_head``, ``app_config_changed``): a deploy never
   becomes the result.
3. A lift whose A/A check or checks before reading failed is ``parked``, the failures named.
4. A lift read without the checks that need the workspace's split (sample ratio, assignment)
   stays ``open``, superior or not: an unchecked reading confirms nothing.
5. Only a live confirmation whose verdict is superior
   (:func:`~eval_pipelines.core.lift.evidence.confirmed_improvement`) is ``confirmed``; any
   other reading stays ``open``.

Each unsettled reading also reads the claim's cost bar (its intent and frozen cost bound kept
from its opening: :mod:`eval_pipelines.core.lift.claim_cost`); the cost verdict never changes
the claim's status.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from eval_pipelines.core.lift.check_states import UNAUDITED
from eval_pipelines.core.lift.claim_cost import CostInputs, claim_cost
from eval_pipelines.core.lift.evidence import (
    Baseline,
    Confirmation,
    LiveConfirmation,
    check_baseline,
    confirmed_improvement,
    evidence_name,
)
from eval_pipelines.core.lift.ledger import Claim
from eval_pipelines.core.lift.lift import PARKED, LiftResult
from eval_pipelines.core.lift.screening import offline_screening

__all__ = [
    "SETTLED",
    "ClaimState",
    "Scope",
    "bound_baseline",
    "claim_candidate",
    "claim_id",
    "claim_state",
    "current_baseline",
    "decide_claim",
    "with_later_audit",
]

# Ledger statuses that are final: later reports do not reopen or re-read them.
SETTLED = ("confirmed", "invalidated")
# A reading with no cost options: no intent, so no cost verdict is read.
NO_COST_INPUTS = CostInputs()


@dataclass(frozen=True)
class Scope:
    """What one claim contrasts: a workspace's claim type in one exposure epoch."""

    workspace_id: str
    claim_type: str
    epoch: str

    @property
    def label(self) -> str:
        return f"{self.workspace_id}/{self.claim_type}/{self.epoch}"


@dataclass(frozen=True)
class ClaimState:
    """A claim's status and, for ``parked``, ``invalidated`` and an unchecked ``open``, why."""

    status: str
    reason: str | None = None


def claim_candidate(rows: pl.DataFrame) -> str | None:
    """The candidate the scope's treated arm was served most (the first by name on a tie),
    or None when no treated row names one."""
    treated = rows.filter(pl.col("exposure_arm") == "treated")
    candidates = treated.get_column("candidate").drop_nulls()
    return str(candidates.mode().sort()[0]) if len(candidates) else None


def claim_id(scope: Scope, candidate: str | None) -> str:
    """The ledger key of the scope's claim of ``candidate`` (``lever`` when none is named)."""
    return f"{scope.label}/{candidate or 'lever'}"


def _contrasted(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.filter(pl.col("exposure_arm").is_in(["treated", "lever_holdout"])).sort("ts")


def bound_baseline(rows: pl.DataFrame, epoch: str) -> Baseline:
    """The baseline a new claim opens under: the head and application config of its first
    contrasted (treated or lever_holdout) row that names one."""

    def value(column: str) -> str:
        known = _contrasted(rows).get_column(column).drop_nulls()
        return str(known[0]) if len(known) else ""

    return Baseline(head=value("baseline_head"), app_config=value("app_config"), epoch=epoch)


def current_baseline(rows: pl.DataFrame, bound: Baseline, epoch: str) -> Baseline:
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


def claim_state(
    result: LiftResult, bound: Baseline, current: Baseline, *, claim_id: str
) -> ClaimState:
    """The state of an unsettled claim whose lift reads ``result``, opened under ``bound``
    and served now under ``current`` (the rule of this module's steps 2 to 5)."""
    confirmation = check_baseline(Confirmation(claim_id, bound, "open", None), current)
    if confirmation.status == "invalidated":
        return ClaimState("invalidated", confirmation.reason)
    if result.verdict == PARKED:
        failures = result.checks.failures() if result.checks is not None else []
        return ClaimState(
            "parked",
            "checks before reading failed: " + "; ".join(failures)
            if failures
            else "the A/A check failed: the instrument is parked",
        )
    if result.checks is not None and not result.checks.complete:
        # Superior or not, an unchecked reading confirms nothing.
        return ClaimState(
            "open",
            "unchecked: the sample-ratio and assignment checks need the workspace's split of "
            f"epoch {result.epoch} and its lever (`lift settings`)",
        )
    if confirmed_improvement(LiveConfirmation(claim_id, result)):
        return ClaimState("confirmed")
    return ClaimState("open")


def decide_claim(
    scope: Scope,
    result: LiftResult,
    rows: pl.DataFrame,
    *,
    existing: Claim | None,
    current_epoch: str,
    screenings: list[tuple[str, dict[str, Any]]],
    case_id: str | None,
    now: datetime,
    cost: CostInputs = NO_COST_INPUTS,
) -> Claim:
    """The ledger row of the scope's claim after this reading.

    Parameters
    ----------
    scope, result, rows
        The scope, its :func:`~eval_pipelines.core.lift.lift.live_lift` and its eligible rows.
    existing
        The claim stored before under the same :func:`claim_id`, if any.
    current_epoch
        The workspace's epoch now: a claim of an earlier one is invalidated.
    screenings, case_id
        The stored holdout reports (newest first) and the workspace's declared case: the
        offline screening set beside the claim (:func:`~eval_pipelines.core.lift.screening.
        offline_screening`).
    now
        The time of the reading (``updated_at``; ``opened_at`` of a new claim).
    cost
        The workspace's cost options: the claim's cost bar is read with them
        (:func:`~eval_pipelines.core.lift.claim_cost.claim_cost`; its intent and frozen cost
        bound are stored when it opens).
    """
    candidate = claim_candidate(rows)
    key = claim_id(scope, candidate)
    bound = (
        Baseline(existing.baseline_head or "", existing.app_config or "", scope.epoch)
        if existing is not None
        else bound_baseline(rows, scope.epoch)
    )
    if existing is not None and existing.status in SETTLED:
        # A confirmed or invalidated claim is history: kept as it was settled, with an audit
        # read since beside it when it was settled unaudited.
        return with_later_audit(existing, result)
    state = claim_state(result, bound, current_baseline(rows, bound, current_epoch), claim_id=key)
    offline, offline_note = offline_screening(screenings, candidate, case_id)
    difference = result.difference
    interval = result.sequence  # the always-valid interval the verdict reads
    live = LiveConfirmation(key, result)
    return Claim(
        claim_id=key,
        workspace_id=scope.workspace_id,
        claim_type=scope.claim_type,
        epoch=scope.epoch,
        candidate=candidate,
        status=state.status,
        reason=state.reason,
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
        cost=claim_cost(existing.cost if existing is not None else None, rows, result, cost),
    )


def with_later_audit(settled: Claim, result: LiftResult) -> Claim:
    """A settled claim, with the outcome audit read since (``auditSinceSettled``) when it was
    settled unaudited and its scope is audited now: the status does not change, but a bias
    found later is not silent."""
    audit = result.checks.audit if result.checks is not None else None
    before = (settled.lift.get("checks") or {}).get("audit") or {}
    if audit is None or audit.state == UNAUDITED or before.get("state", UNAUDITED) != UNAUDITED:
        return settled
    return dataclasses.replace(settled, lift={**settled.lift, "auditSinceSettled": audit.to_json()})
