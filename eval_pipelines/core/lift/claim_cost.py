"""A claim's cost bar (spec 004, "The cost bar: explicit decision intent"): what is stored with
the claim and read at each report.

1. The **decision intent** is the workspace's declared one (``lift settings --intent``) when
   the claim opens, stored with it: a later change of the settings does not change an open
   claim's intent (the ledger says when the settings now differ).
2. The **frozen cost bound**, the lever_holdout's cost per task (estimate, always-valid
   interval, clusters, currency), is stored at the first report that reads one (the claim's
   cost eligible and each arm at the minimum sample: usually the report that opened it) and
   never recomputed or replaced, a budget included.
3. Each report reads the cost result (:func:`~eval_pipelines.core.lift.cost.live_cost`) with
   the claim's quality verdict of the same reading; a settled (confirmed or invalidated)
   claim keeps the cost result it was settled with (:mod:`eval_pipelines.core.lift.claim`).
4. :func:`failing_cost_claims`: the rule of the ``cost_gate`` asset check.

The document stored (``lift_claims.cost_json``): ``intent``, ``frozenBound``, ``result`` (the
:class:`~eval_pipelines.core.lift.cost.CostResult` document) and ``declaredIntent`` (the
workspace's intent at this reading).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from eval_pipelines.core.lift.cost import CostBound, live_cost
from eval_pipelines.core.lift.cost_verdict import INELIGIBLE, NO_INTENT, OVER_BUDGET
from eval_pipelines.core.lift.intents import DecisionIntent
from eval_pipelines.core.lift.ledger import Claim
from eval_pipelines.core.lift.lift import LiftResult
from eval_pipelines.core.lift.prices import PriceTable

__all__ = ["GATED", "CostInputs", "claim_cost", "failing_cost_claims"]

#: The cost verdicts the ``cost_gate`` check fails on.
GATED = (OVER_BUDGET, INELIGIBLE)


@dataclass(frozen=True)
class CostInputs:
    """What a report reads a claim's cost with: the workspace's declared intent now, the
    envelope elements its lever changes, its price table, and the bootstrap's seed and size."""

    declared: DecisionIntent | None = None
    lever_changes: tuple[str, ...] = ()
    prices: PriceTable | None = None
    rng: np.random.Generator | int = 0
    n_resamples: int = 2000


def claim_cost(
    stored: dict[str, Any] | None, rows: pl.DataFrame, quality: LiftResult, inputs: CostInputs
) -> dict[str, Any]:
    """The claim's cost document after this reading (rules 1 to 3 of this module).

    Parameters
    ----------
    stored
        The claim's stored cost document (None for a new claim, or one stored before the cost
        bar: its intent is then the declared one).
    rows, quality
        The claim's rows and its quality lift of this reading.
    inputs
        The workspace's cost options and the bootstrap's settings.
    """
    intent = inputs.declared
    bound: CostBound | None = None
    if stored is not None:
        intent = DecisionIntent.from_json(stored["intent"]) if stored.get("intent") else None
        if stored.get("frozenBound"):
            bound = CostBound.from_json(stored["frozenBound"])
    declared = inputs.declared.to_json() if inputs.declared is not None else None
    if intent is None:
        # Nothing is read without an intent: no cost figure, and the rows are not costed.
        return {
            "intent": None,
            "frozenBound": None,
            "result": {"verdict": NO_INTENT, "leverChanges": list(inputs.lever_changes)},
            "declaredIntent": declared,
        }
    result = live_cost(
        rows,
        workspace_id=quality.workspace_id,
        claim_type=quality.claim_type,
        epoch=quality.epoch,
        intent=intent,
        lever_changes=inputs.lever_changes,
        prices=inputs.prices,
        quality_verdict=quality.verdict,
        frozen_bound=bound,
        rng=inputs.rng,
        n_resamples=inputs.n_resamples,
    )
    if bound is None:
        bound = result.frozen_bound
    return {
        "intent": intent.to_json() if intent is not None else None,
        "frozenBound": bound.to_json() if bound is not None else None,
        "result": result.to_json(),
        "declaredIntent": declared,
    }


def failing_cost_claims(claims: Iterable[Claim]) -> dict[str, str]:
    """The claims the ``cost_gate`` check fails on, with why: a claim whose cost verdict (its
    latest reading, or the one it settled with) is ``over_budget`` or ``ineligible``. An
    invalidated claim is history (a deploy or a new epoch ended it): it is not gated."""
    failing = {}
    for claim in claims:
        result = (claim.cost or {}).get("result") or {}
        verdict = result.get("verdict")
        if claim.status != "invalidated" and verdict in GATED:
            reason = (result.get("eligibility") or {}).get("reason")
            failing[claim.claim_id] = verdict + (f" ({reason})" if reason else "")
    return failing
