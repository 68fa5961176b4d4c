"""The cost bar's result in plain words. An unread claim (no intent, parked, ineligible) is
described with row counts only: no figure that could be taken for a cost. A budget's
verdict is a statement about a budget, never about money kept back."""

from __future__ import annotations

from eval_pipelines.core.lift.cost_result import CostArm, CostBound, CostResult
from eval_pipelines.core.lift.cost_verdict import (
    BUDGET_NOT_ESTABLISHED,
    CHEAPER,
    INELIGIBLE,
    NO_BUDGET,
    NO_INTENT,
    NOT_CHEAPER,
    OVER_BUDGET,
    PARKED,
    WITHIN_BUDGET,
)
from eval_pipelines.core.lift.scope import CONTROL_ARM, scope_words
from eval_pipelines.core.stats.policy import MIN_N

__all__ = ["cost_message"]


def _money(value: float, currency: str) -> str:
    return f"{value:.4g} {currency}"


def _counts(arm: CostArm) -> str:
    share = "" if arm.censored_share is None else f", {arm.censored_share:.0%} unresolved"
    return f"{arm.arm} {arm.rows} rows in {arm.clusters} tasks{share}"


def _bound_words(bound: CostBound) -> str:
    level = f"{bound.confidence_level:.0%}"
    return (
        f"{_money(bound.estimate, bound.currency)} per task, always-valid {level} "
        f"[{bound.low:.4g}, {bound.high:.4g}], {bound.clusters} tasks"
    )


def cost_message(result: CostResult, quality_verdict: str) -> str:
    """What the cost verdict says and on what, in one paragraph."""
    scope = scope_words(
        {
            "workspace_id": result.workspace_id,
            "claim_type": result.claim_type,
            "situation_class": result.situation_class,
            "source": result.source,
        }
    )
    head = f"Cost, {scope}, epoch {result.epoch}"
    intent = "no decision intent" if result.intent is None else result.intent.words()
    counts = f"{_counts(result.treated)}; {_counts(result.control)}."
    word = result.verdict
    if word == NO_INTENT:
        return (
            f"{head}: no cost verdict, the claim declares no decision intent (cost_optimization, "
            f"required_migration or product_improvement), so its cost is not read. {counts}"
        )
    if word == PARKED:
        return (
            f"{head} ({intent}): parked, the quality instrument is parked, so nothing is read. "
            f"{counts}"
        )
    if word == INELIGIBLE:
        eligibility = result.eligibility
        return (
            f"{head} ({intent}): ineligible ({eligibility.reason}): {eligibility.detail}. Cost "
            f"and quality must refer to the same model invocation, so no cost is read. {counts}"
        )
    if result.currency is None:
        return f"{head} ({intent}): {word}. {counts}"
    currency = result.currency
    sums = (
        f"Total cost {_money(result.treated.total_cost or 0.0, currency)} treated, "
        f"{_money(result.control.total_cost or 0.0, currency)} {CONTROL_ARM}; {counts}"
    )
    difference, sequence = result.difference, result.sequence
    if difference is None or sequence is None or difference.estimate is None:
        return (
            f"{head} ({intent}): insufficient_evidence, each arm needs at least {MIN_N} tasks. "
            f"{sums} No cost verdict yet."
        )
    level = f"{sequence.confidence_level:.0%}"
    relative = ""
    if difference.relative_estimate is not None and result.relative_sequence is not None:
        rel = result.relative_sequence
        relative = (
            f" ({difference.relative_estimate:+.1%}, always-valid [{rel.low:+.1%}, "
            f"{rel.high:+.1%}])"
        )
    fixed = difference.interval
    one_look = (
        f"; one-look bootstrap [{fixed.low:+.4g}, {fixed.high:+.4g}]" if fixed is not None else ""
    )
    change = (
        f"cost per task treated minus {CONTROL_ARM} {difference.estimate:+.4g} {currency}, "
        f"always-valid {level} [{sequence.low:+.4g}, {sequence.high:+.4g}]{relative}{one_look}"
    )
    treated = result.treated_per_task
    frozen = result.frozen_bound
    frozen_words = (
        f" Frozen cost bound ({CONTROL_ARM} at opening): {_bound_words(frozen)}." if frozen else ""
    )
    meaning = {
        CHEAPER: "cheaper: the always-valid interval of the difference lies below zero and "
        f"the quality verdict is {quality_verdict}",
        NOT_CHEAPER: "not_cheaper: "
        + (
            f"the quality verdict is {quality_verdict}"
            if sequence.high < 0.0
            else "the always-valid interval of the difference does not lie below zero"
        ),
        NO_BUDGET: "no_budget: no budget was declared, the cost is shown and not judged",
    }
    if word in meaning:
        return f"{head} ({intent}): {meaning[word]}; {change}.{frozen_words} {sums}"
    assert treated is not None and result.intent is not None and result.intent.budget is not None
    budget = _money(result.intent.budget, currency)
    budget_words = {
        WITHIN_BUDGET: f"within_budget: the treated arm's always-valid upper bound is at most "
        f"the budget of {budget} per task",
        OVER_BUDGET: f"over_budget: the treated arm's always-valid lower bound is above the "
        f"budget of {budget} per task",
        BUDGET_NOT_ESTABLISHED: f"budget_not_established: the treated arm's always-valid "
        f"interval contains the budget of {budget} per task",
    }[word]
    return (
        f"{head} ({intent}): {budget_words}; treated {_bound_words(treated)}.{frozen_words} "
        f"For reference, {change}. {sums}"
    )
