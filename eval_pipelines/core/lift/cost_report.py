"""A claim's cost bar in the ledger and the report (spec 004): the ledger's cost document
(:func:`ledger_cost`), its line in words (:func:`cost_line`) and the figures the
``lift_report`` asset plots (:func:`plotted_cost`).

Figures are shown only when the cost was read (the verdicts of
:data:`~eval_pipelines.core.lift.cost_verdict.READ_VERDICTS`; below the minimum sample, the raw
sums only): an ineligible, parked or undeclared claim shows its verdict, its reason and row
counts, never a cost number. A budget verdict reads against the budget and the frozen cost
bound beside it, and is never worded as money kept.
"""

from __future__ import annotations

from typing import Any

from eval_pipelines.core.lift.cost_verdict import (
    INELIGIBLE,
    INSUFFICIENT,
    NO_INTENT,
    PARKED,
    READ_VERDICTS,
)

__all__ = ["cost_line", "ledger_cost", "plotted_cost"]


def _shown(result: dict[str, Any]) -> bool:
    """Whether the result carries figures (read, or raw sums below the minimum sample)."""
    return result.get("verdict") in (*READ_VERDICTS, INSUFFICIENT)


def ledger_cost(cost: dict[str, Any] | None) -> dict[str, Any] | None:
    """A claim's stored cost document as the ledger shows it (None for a claim stored before
    the cost bar): its intent (frozen when it opened), the workspace's declared intent when it
    now differs, the verdict with its reason, and, only when the cost was read, the currency,
    the difference in cost per task with its always-valid interval, the relative difference,
    each arm's raw sums, the treated arm's cost per task and the frozen cost bound."""
    if cost is None:
        return None
    result = cost.get("result") or {}
    eligibility = result.get("eligibility") or {}
    intent = cost.get("intent")
    declared = cost.get("declaredIntent")
    shown = _shown(result)
    read = result.get("verdict") in READ_VERDICTS
    difference = (result.get("difference") or {}) if read else {}

    def arm(side: dict[str, Any]) -> dict[str, Any]:
        counts = {k: side.get(k) for k in ("rows", "clusters", "censored", "censoredShare")}
        return {**counts, "totalCost": side.get("totalCost") if shown else None}

    return {
        "intent": intent,
        "declaredIntent": declared if declared != intent else None,
        "verdict": result.get("verdict"),
        "reason": eligibility.get("reason"),
        "detail": eligibility.get("detail") or None,
        "leverChanges": result.get("leverChanges", []),
        "currency": result.get("currency") if shown else None,
        "per": "task (cluster)",
        "difference": difference.get("estimate"),
        "interval": difference.get("sequence"),
        "oneLookInterval": difference.get("interval"),
        "relativeDifference": difference.get("relativeEstimate"),
        "relativeInterval": difference.get("relativeSequence"),
        "treated": arm(result.get("treated") or {}),
        "control": arm(result.get("control") or {}),
        "treatedPerTask": result.get("treatedPerTask") if read else None,
        "frozenBound": cost.get("frozenBound") if shown else None,
        "message": result.get("message"),
    }


def _cost(value: float) -> str:
    return f"{value:.4g}" if abs(value) < 1 else f"{value:.4f}"


def _signed(value: float) -> str:
    return ("+" if value >= 0 else "-") + _cost(abs(value))


def _share(arm: dict[str, Any]) -> str:
    share = arm.get("censoredShare")
    return "—" if share is None else f"{share:.3f}"


def _bound_words(bound: dict[str, Any]) -> str:
    low, high = bound["interval"]
    return f"{_cost(bound['estimate'])} [{_cost(low)}, {_cost(high)}] (n {bound['clusters']})"


def _intent_words(intent: dict[str, Any] | None) -> str:
    if intent is None:
        return "no intent"
    if intent.get("budget") is None:
        return str(intent["kind"])
    return f"{intent['kind']}, budget {_cost(intent['budget'])} {intent['currency']} per task"


def cost_line(cost: dict[str, Any] | None) -> str | None:
    """A ledger claim's cost (:func:`ledger_cost`) in one line; None for a claim stored before
    the cost bar, and for one without an intent in a workspace that declares none."""
    if cost is None:
        return None
    verdict = cost["verdict"]
    treated, control = cost["treated"], cost["control"]
    changed = (
        f"; the workspace now declares {_intent_words(cost['declaredIntent'])} (claims opened "
        "after the change read it; this claim keeps the intent it opened under)"
        if cost.get("declaredIntent") is not None
        else ""
    )
    if verdict == NO_INTENT:
        # A set-up that declares no intent reads as before the cost bar: no line at all.
        if not changed:
            return None
        return (
            "cost: no decision intent was declared when the claim opened: no cost verdict is "
            "read" + changed
        )
    intent = _intent_words(cost["intent"])
    if verdict == PARKED:
        return f"cost ({intent}): parked (the quality instrument is parked: nothing is read)"
    if verdict == INELIGIBLE:
        return (
            f"cost ({intent}): verdict ineligible ({cost['reason']}): no cost figure is read "
            f"(rows {treated['rows']} vs {control['rows']}); {cost['detail'] or ''}".rstrip("; ")
            + changed
        )
    currency = cost["currency"]
    head = f"cost per task ({currency}, per cluster)"
    totals = (
        f"raw sums {_cost(treated['totalCost'])} vs {_cost(control['totalCost'])} {currency}"
        if treated.get("totalCost") is not None and control.get("totalCost") is not None
        else "raw sums"
    )
    sums = (
        f"{totals} over {treated['rows']} vs {control['rows']} rows (censored share "
        f"{_share(treated)} vs {_share(control)})"
    )
    bound = cost.get("frozenBound")
    frozen = f"; frozen bound {_bound_words(bound)}" if bound else ""
    if verdict == INSUFFICIENT:
        return (
            f"{head}: insufficient_evidence ({intent}): n {treated['clusters']} vs "
            f"{control['clusters']} clusters (each arm needs 20); {sums}{frozen}{changed}"
        )
    low, high = cost["interval"]
    difference = (
        f"treated − lever_holdout {_signed(cost['difference'])} [{_signed(low)}, {_signed(high)}]"
    )
    if cost.get("relativeDifference") is not None and cost.get("relativeInterval"):
        r_low, r_high = cost["relativeInterval"]
        difference += f" ({cost['relativeDifference']:+.0%} [{r_low:+.0%}, {r_high:+.0%}])"
    budget = (cost["intent"] or {}).get("budget")
    per_task = cost.get("treatedPerTask")
    if budget is not None and per_task:
        # A budget verdict reads the treated arm's own cost per task against the budget; the
        # difference is shown after it, as a figure, not as the verdict.
        return (
            f"{head}: treated {_bound_words(per_task)} against the budget {_cost(budget)} "
            f"(always-valid 95%), verdict {verdict} ({intent}){frozen}; {difference}, n "
            f"{treated['clusters']} vs {control['clusters']} clusters; {sums}{changed}"
        )
    return (
        f"{head}: {difference} (always-valid 95%), n {treated['clusters']} vs "
        f"{control['clusters']} clusters, verdict {verdict} ({intent}){frozen}; "
        f"{sums}{changed}"
    )


def plotted_cost(claims: list[dict[str, Any]]) -> dict[str, float]:
    """What the ``lift_report`` asset plots of each ledger claim's cost: only a claim whose
    cost was read, keyed by claim and currency (a plot never mixes claims or currencies)."""
    plotted: dict[str, float] = {}
    for claim in claims:
        cost = claim.get("cost")
        if not cost or cost["verdict"] not in READ_VERDICTS:
            continue
        key = f"{claim['claimId']} ({cost['currency']} per task)"
        plotted[f"cost @ {key}"] = cost["difference"]
        plotted[f"cost_high @ {key}"] = cost["interval"][1]
        if cost.get("treatedPerTask"):
            plotted[f"cost_treated @ {key}"] = cost["treatedPerTask"]["estimate"]
    return plotted
