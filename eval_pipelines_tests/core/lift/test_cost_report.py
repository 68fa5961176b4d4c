"""A claim's cost in the ledger and in words (core/lift/cost_report.py): figures only when the
cost was read, raw sums only below the minimum sample, never a number for an ineligible,
parked or undeclared claim, and a budget line that leads with the budget."""

from __future__ import annotations

import re
from typing import Any

from eval_pipelines.core.lift.cost_report import cost_line, ledger_cost, plotted_cost

INTENT = {"kind": "cost_optimization", "budget": None, "currency": None}
BOUND = {"estimate": 0.02, "interval": [0.018, 0.022], "clusters": 200, "currency": "USD"}


def _arm(clusters: int, total: float | None) -> dict[str, Any]:
    return {
        "rows": clusters * 2,
        "clusters": clusters,
        "censored": 1,
        "censoredShare": 0.01,
        "totalCost": total,
    }


def _stored(verdict: str, **result: Any) -> dict[str, Any]:
    return {
        "intent": result.pop("intent", INTENT),
        "frozenBound": result.pop("frozenBound", BOUND),
        "declaredIntent": result.pop("declaredIntent", INTENT),
        "result": {
            "verdict": verdict,
            "eligibility": {"eligible": True, "reason": None, "detail": ""},
            "treated": _arm(210, 2.1),
            "control": _arm(200, 4.0),
            "currency": "USD",
            "difference": {
                "estimate": -0.01,
                "interval": [-0.012, -0.008],
                "sequence": [-0.013, -0.007],
                "relativeEstimate": -0.5,
                "relativeInterval": [-0.55, -0.45],
                "relativeSequence": [-0.6, -0.4],
            },
            "treatedPerTask": {**BOUND, "estimate": 0.01, "interval": [0.009, 0.011]},
            **result,
        },
    }


def test_a_read_cost_shows_the_always_valid_interval_and_the_frozen_bound() -> None:
    cost = ledger_cost(_stored("cheaper"))
    assert cost is not None and cost["interval"] == [-0.013, -0.007]  # the always-valid one
    assert cost["oneLookInterval"] == [-0.012, -0.008]
    line = cost_line(cost)
    assert line == (
        "cost per task (USD, per cluster): treated − lever_holdout -0.01 [-0.013, -0.007] "
        "(-50% [-60%, -40%]) (always-valid 95%), n 210 vs 200 clusters, verdict cheaper "
        "(cost_optimization); frozen bound 0.02 [0.018, 0.022] (n 200); raw sums 2.1000 vs "
        "4.0000 USD over 420 vs 400 rows (censored share 0.010 vs 0.010)"
    )
    claim = {"claimId": "ws/t/e2/c", "cost": cost}
    assert plotted_cost([claim]) == {
        "cost @ ws/t/e2/c (USD per task)": -0.01,
        "cost_high @ ws/t/e2/c (USD per task)": -0.007,
        "cost_treated @ ws/t/e2/c (USD per task)": 0.01,
    }


def test_unread_verdicts_carry_no_number() -> None:
    ineligible = {
        "eligible": False,
        "reason": "envelope_incomplete: tools",
        "detail": "3 of 40 treated rows do not log tools",
    }
    for verdict, extra in (
        ("ineligible", {"eligibility": ineligible}),
        ("parked", {}),
        ("no_intent", {}),
    ):
        stored = _stored(verdict, **extra)
        cost = ledger_cost(stored)
        assert cost is not None
        for key in (
            "currency",
            "difference",
            "interval",
            "relativeDifference",
            "treatedPerTask",
            "frozenBound",
        ):
            assert cost[key] is None, (verdict, key)
        assert cost["treated"]["totalCost"] is None and cost["control"]["totalCost"] is None
        line = cost_line(cost) or ""
        assert verdict in line or line == ""  # no_intent in a workspace declaring none: no line
        # Row counts only: no figure with a decimal point, and the detail's counts.
        assert re.findall(r"\d+\.\d+", line) == [], line
        assert plotted_cost([{"claimId": "c", "cost": cost}]) == {}


def test_below_the_minimum_sample_only_the_raw_sums_show() -> None:
    cost = ledger_cost(_stored("insufficient_evidence", difference=None, treatedPerTask=None))
    assert cost is not None and cost["difference"] is None and cost["interval"] is None
    assert cost["treated"]["totalCost"] == 2.1
    line = cost_line(cost) or ""
    assert "insufficient_evidence (cost_optimization): n 210 vs 200 clusters" in line
    assert "raw sums 2.1000 vs 4.0000 USD" in line


def test_a_budget_line_leads_with_the_budget_and_the_bound_beside_it() -> None:
    budget = {"kind": "required_migration", "budget": 0.012, "currency": "USD"}
    cost = ledger_cost(_stored("within_budget", intent=budget, declaredIntent=budget))
    line = cost_line(cost) or ""
    assert line.startswith(
        "cost per task (USD, per cluster): treated 0.01 [0.009, 0.011] (n 200) against the "
        "budget 0.012 (always-valid 95%), verdict within_budget (required_migration, budget "
        "0.012 USD per task); frozen bound 0.02 [0.018, 0.022] (n 200)"
    )
    assert re.search(r"sav(e|ed|ing|ings)\b", line) is None


def test_the_line_says_when_the_workspace_now_declares_another_intent() -> None:
    later = {"kind": "product_improvement", "budget": None, "currency": None}
    cost = ledger_cost(_stored("cheaper", declaredIntent=later))
    assert cost is not None and cost["declaredIntent"] == later
    assert "the workspace now declares product_improvement" in (cost_line(cost) or "")
    assert ledger_cost(_stored("cheaper"))["declaredIntent"] is None  # type: ignore[index]


def test_an_undeclared_claim_gets_a_line_only_when_the_workspace_now_declares_an_intent() -> None:
    undeclared = _stored("no_intent", intent=None, declaredIntent=None)
    assert cost_line(ledger_cost(undeclared)) is None  # reads as before the cost bar
    declared = _stored("no_intent", intent=None, declaredIntent=INTENT)
    line = cost_line(ledger_cost(declared)) or ""
    assert line.startswith("cost: no decision intent was declared when the claim opened")
    assert "the workspace now declares cost_optimization" in line
