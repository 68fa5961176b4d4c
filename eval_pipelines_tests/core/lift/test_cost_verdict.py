"""The cost verdict rule: each rule of the contract, with a case that fails without it."""

import pytest

from eval_pipelines.core.lift.cost_verdict import (
    BUDGET_NOT_ESTABLISHED,
    CHEAPER,
    INELIGIBLE,
    INSUFFICIENT,
    NO_BUDGET,
    NO_INTENT,
    NOT_CHEAPER,
    OVER_BUDGET,
    PARKED,
    WITHIN_BUDGET,
    cost_verdict,
)
from eval_pipelines.core.lift.envelope import ELIGIBLE, Eligibility
from eval_pipelines.core.lift.intents import (
    COST_OPTIMIZATION,
    PRODUCT_IMPROVEMENT,
    REQUIRED_MIGRATION,
    DecisionIntent,
)
from eval_pipelines.core.lift.lift import INFERIOR, NOT_ESTABLISHED, SUPERIOR
from eval_pipelines.core.stats.intervals import Interval

OPTIMIZE = DecisionIntent(COST_OPTIMIZATION)
MIGRATE = DecisionIntent(REQUIRED_MIGRATION, 1.0, "USD")
BELOW = Interval(-0.3, -0.1, 0.95)
ACROSS = Interval(-0.3, 0.1, 0.95)
MISMATCH = Eligibility(False, "envelope_mismatch: tools", "tools", "")


def read(
    intent=OPTIMIZE, quality=NOT_ESTABLISHED, eligibility=ELIGIBLE, difference=BELOW, treated=None
):
    treated = treated if treated is not None else Interval(0.5, 0.8, 0.95)
    return cost_verdict(
        intent=intent,
        quality_verdict=quality,
        eligibility=eligibility,
        difference=difference,
        treated=treated,
    )


def test_cheaper_needs_the_interval_below_zero():
    assert read() == CHEAPER
    assert read(difference=ACROSS) == NOT_CHEAPER
    assert read(difference=Interval(-0.3, 0.0, 0.95)) == NOT_CHEAPER  # touching zero


@pytest.mark.parametrize(
    ("quality", "word"), [(SUPERIOR, CHEAPER), (INSUFFICIENT, CHEAPER), (INFERIOR, NOT_CHEAPER)]
)
def test_cheaper_needs_quality_not_inferior(quality, word):
    assert read(quality=quality) == word


def test_a_budget_never_relaxes_cheaper():
    # A budget the treated arm is within, on a cost_optimization intent built without the
    # validating constructor (which refuses it): still read as cheaper or not, never a budget.
    intent = DecisionIntent(COST_OPTIMIZATION, 5.0, "USD")
    assert read(intent=intent, difference=ACROSS) == NOT_CHEAPER
    assert read(intent=intent, quality=INFERIOR) == NOT_CHEAPER


@pytest.mark.parametrize(
    ("treated", "word"),
    [
        (Interval(0.5, 1.0, 0.95), WITHIN_BUDGET),  # the upper bound at the budget: within
        (Interval(1.0 + 1e-9, 1.5, 0.95), OVER_BUDGET),
        (Interval(0.9, 1.1, 0.95), BUDGET_NOT_ESTABLISHED),
        (Interval(1.0, 1.1, 0.95), BUDGET_NOT_ESTABLISHED),  # the lower bound at it: not over
    ],
)
@pytest.mark.parametrize("kind", [REQUIRED_MIGRATION, PRODUCT_IMPROVEMENT])
def test_budget_verdicts_read_the_treated_arm(kind, treated, word):
    intent = DecisionIntent(kind, 1.0, "USD")
    assert read(intent=intent, treated=treated, difference=Interval(0.2, 0.4, 0.95)) == word
    # Quality does not enter a budget verdict.
    assert read(intent=intent, treated=treated, quality=INFERIOR) == word


def test_without_a_budget_nothing_is_judged():
    assert read(intent=DecisionIntent(PRODUCT_IMPROVEMENT)) == NO_BUDGET


def test_the_order_of_the_refusals():
    assert read(intent=None, quality="parked", eligibility=MISMATCH) == NO_INTENT
    assert read(quality=PARKED, eligibility=MISMATCH) == PARKED
    assert read(eligibility=MISMATCH, difference=None) == INELIGIBLE
    assert read(intent=MIGRATE, eligibility=MISMATCH) == INELIGIBLE
    assert read(difference=None) == INSUFFICIENT
    assert (
        cost_verdict(
            intent=MIGRATE,
            quality_verdict=NOT_ESTABLISHED,
            eligibility=ELIGIBLE,
            difference=BELOW,
            treated=None,
        )
        == INSUFFICIENT
    )
