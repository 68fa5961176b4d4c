"""The verdict words of the cost bar, and the one rule that picks them (specification 004,
"The cost bar: explicit decision intent")."""

from __future__ import annotations

from eval_pipelines.core.lift.envelope import Eligibility
from eval_pipelines.core.lift.intents import COST_OPTIMIZATION, DecisionIntent
from eval_pipelines.core.lift.lift import INFERIOR, PARKED
from eval_pipelines.core.stats.intervals import Interval
from eval_pipelines.core.stats.policy import INSUFFICIENT

__all__ = [
    "BUDGET_NOT_ESTABLISHED",
    "CHEAPER",
    "INELIGIBLE",
    "INSUFFICIENT",
    "NOT_CHEAPER",
    "NO_BUDGET",
    "NO_INTENT",
    "OVER_BUDGET",
    "PARKED",
    "READ_VERDICTS",
    "WITHIN_BUDGET",
    "cost_verdict",
]

CHEAPER = "cheaper"
NOT_CHEAPER = "not_cheaper"
WITHIN_BUDGET = "within_budget"
OVER_BUDGET = "over_budget"
BUDGET_NOT_ESTABLISHED = "budget_not_established"
#: ``required_migration`` or ``product_improvement`` declared without a budget: the cost is
#: read and shown, and there is no bar to read it against.
NO_BUDGET = "no_budget"
INELIGIBLE = "ineligible"
NO_INTENT = "no_intent"

#: The verdicts under which the cost was read: only these carry cost figures.
READ_VERDICTS = (
    CHEAPER,
    NOT_CHEAPER,
    WITHIN_BUDGET,
    OVER_BUDGET,
    BUDGET_NOT_ESTABLISHED,
    NO_BUDGET,
)


def cost_verdict(
    *,
    intent: DecisionIntent | None,
    quality_verdict: str,
    eligibility: Eligibility,
    difference: Interval | None,
    treated: Interval | None,
) -> str:
    """The cost verdict of one claim.

    Parameters
    ----------
    intent
        The claim's decision intent; None when none was declared.
    quality_verdict
        The same claim's quality verdict (:mod:`eval_pipelines.core.lift.lift`'s words).
    eligibility
        Whether the cost may be read
        (:func:`~eval_pipelines.core.lift.envelope.envelope_eligibility`).
    difference
        The always-valid interval of the difference in cost per task, treated minus
        lever_holdout; None below the minimum sample.
    treated
        The always-valid interval of the treated arm's cost per task; None below it.

    Returns
    -------
    str
        In this order: :data:`NO_INTENT` without an intent (no cost is read);
        :data:`PARKED` when the quality instrument is parked (nothing is read);
        :data:`INELIGIBLE`; ``insufficient_evidence`` without intervals; then, under
        ``cost_optimization``, :data:`CHEAPER` only when the difference's upper bound is
        below zero and the quality verdict is not ``inferior`` (a budget, if one was set
        anyway, changes nothing), else :data:`NOT_CHEAPER`; under the other intents,
        :data:`WITHIN_BUDGET` when the treated arm's upper bound is at most the budget,
        :data:`OVER_BUDGET` when its lower bound is above it, else
        :data:`BUDGET_NOT_ESTABLISHED`, and :data:`NO_BUDGET` without a budget.
    """
    if intent is None:
        return NO_INTENT
    if quality_verdict == PARKED:
        return PARKED
    if not eligibility.eligible:
        return INELIGIBLE
    if difference is None or treated is None:
        return INSUFFICIENT
    if intent.kind == COST_OPTIMIZATION:
        cheaper = difference.high < 0.0 and quality_verdict != INFERIOR
        return CHEAPER if cheaper else NOT_CHEAPER
    if intent.budget is None:
        return NO_BUDGET
    if treated.high <= intent.budget:
        return WITHIN_BUDGET
    if treated.low > intent.budget:
        return OVER_BUDGET
    return BUDGET_NOT_ESTABLISHED
