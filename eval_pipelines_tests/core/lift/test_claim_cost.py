"""A claim's cost bar (core/lift/claim_cost.py): the intent and the frozen cost bound stored
when the claim opens and never replaced, a settled claim's cost kept as it settled, and the
rule of the cost_gate check."""

from __future__ import annotations

import dataclasses
from datetime import date, datetime

import polars as pl
import pytest

from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines.core.lift.claim import Scope, decide_claim
from eval_pipelines.core.lift.claim_cost import CostInputs, claim_cost, failing_cost_claims
from eval_pipelines.core.lift.intents import decision_intent
from eval_pipelines.core.lift.ledger import Claim
from eval_pipelines.core.lift.lift import LiftResult, live_lift
from eval_pipelines.core.lift.prices import parse_price_table
from eval_pipelines.core.lift.simulate import ArmCost, CostProfile, simulate_traffic

PRICES = parse_price_table(
    {
        "currency": "USD",
        "models": {
            "tier-large": {"input": 3, "output": 15},
            "tier-small": {"input": 1, "output": 5},
        },
    }
)
CONFIG = LiftConfig("ws", "e2", 0.10, lever="small")
SCOPE = Scope("ws", "invoice_coding", "e2")
CHEAPER_TIER = CostProfile(treated=ArmCost(envelope={"model": "tier-small"}), seed=3)
NOW = datetime(2026, 11, 30)


def _rows(days: int, *, cost: CostProfile = CHEAPER_TIER, seed: int = 2) -> pl.DataFrame:
    rows = simulate_traffic(
        CONFIG,
        days=[date(2026, 11, 23 + d) for d in range(days)],
        conversations_per_day=120,
        base_rate=0.6,
        true_lift=0.0,
        rng=seed,
        cost=cost,
    )
    frame = pl.DataFrame(rows, infer_schema_length=None)
    return frame.with_columns(ts=pl.col("timestamp").str.to_datetime(time_zone="UTC"))


def _quality(rows: pl.DataFrame) -> LiftResult:
    return live_lift(
        rows, workspace_id="ws", claim_type="invoice_coding", epoch="e2", rng=0, n_resamples=200
    )


def _inputs(kind: str = "cost_optimization", **budget: object) -> CostInputs:
    return CostInputs(
        declared=decision_intent(kind, **budget),  # type: ignore[arg-type]
        lever_changes=("model",),
        prices=PRICES,
        n_resamples=200,
    )


def test_a_new_claim_stores_the_declared_intent_and_the_lever_holdout_s_cost_as_its_bound() -> None:
    rows = _rows(2)
    cost = claim_cost(None, rows, _quality(rows), _inputs())
    assert cost["intent"] == {"kind": "cost_optimization", "budget": None, "currency": None}
    assert cost["result"]["verdict"] == "cheaper"
    bound = cost["frozenBound"]
    # The bound is the lever_holdout's cost per task of this reading.
    assert bound == cost["result"]["frozenBound"]
    assert bound["estimate"] == pytest.approx(cost["result"]["difference"]["controlPerTask"])


def test_a_later_reading_keeps_the_intent_and_bound_it_opened_with() -> None:
    first = _rows(2)
    opened = claim_cost(None, first, _quality(first), _inputs())
    later_rows = _rows(4)
    migrating = _inputs("required_migration", budget=0.5, currency="USD")
    later = claim_cost(opened, later_rows, _quality(later_rows), migrating)
    assert later["frozenBound"] == opened["frozenBound"]
    assert later["intent"] == opened["intent"]  # not the workspace's new intent
    assert later["declaredIntent"]["kind"] == "required_migration"
    assert later["result"]["verdict"] == "cheaper"  # read under the claim's own intent
    assert later["result"]["control"]["clusters"] > opened["frozenBound"]["clusters"]


def test_no_bound_is_stored_until_the_cost_is_read() -> None:
    rows = _rows(
        2,
        cost=dataclasses.replace(
            CHEAPER_TIER, treated=ArmCost(envelope={"model": "tier-small", "tools": "none"})
        ),
    )
    cost = claim_cost(None, rows, _quality(rows), _inputs())
    assert cost["result"]["verdict"] == "ineligible" and cost["frozenBound"] is None
    undeclared = claim_cost(
        None, rows, _quality(rows), dataclasses.replace(_inputs(), declared=None)
    )
    assert undeclared["result"]["verdict"] == "no_intent" and undeclared["frozenBound"] is None
    assert undeclared["intent"] is None


def _claim(status: str, verdict: str | None, reason: str | None = None) -> Claim:
    result = (
        None
        if verdict is None
        else {"verdict": verdict, "eligibility": {"eligible": reason is None, "reason": reason}}
    )
    return Claim(
        f"ws/t/e2/{status}-{verdict}",
        "ws",
        "t",
        "e2",
        "c",
        status,
        None,
        "superior",
        0.1,
        0.01,
        0.2,
        0.05,
        100,
        100,
        50,
        50,
        {},
        None,
        None,
        None,
        {},
        NOW,
        NOW,
        cost=None if result is None else {"result": result},
    )


def test_the_cost_gate_fails_on_over_budget_and_ineligible_only() -> None:
    claims = [
        _claim("confirmed", "over_budget"),
        _claim("open", "ineligible", "envelope_mismatch: tools"),
        _claim("invalidated", "ineligible", "envelope_incomplete: cost"),  # history
        _claim("open", "cheaper"),
        _claim("confirmed", "within_budget"),
        _claim("open", "budget_not_established"),
        _claim("open", "no_intent"),
        _claim("open", None),  # stored before the cost bar
    ]
    assert failing_cost_claims(claims) == {
        "ws/t/e2/confirmed-over_budget": "over_budget",
        "ws/t/e2/open-ineligible": "ineligible (envelope_mismatch: tools)",
    }


def test_a_settled_claim_keeps_the_cost_it_settled_with() -> None:
    rows = _rows(2)
    quality = _quality(rows)
    settled = dataclasses.replace(
        _claim("confirmed", "cheaper"), claim_id="ws/invoice_coding/e2/small"
    )
    claim = decide_claim(
        SCOPE,
        quality,
        rows,
        existing=settled,
        current_epoch="e2",
        screenings=[],
        case_id=None,
        now=NOW,
        cost=_inputs("required_migration", budget=1e-6, currency="USD"),
    )
    assert claim.cost == settled.cost
