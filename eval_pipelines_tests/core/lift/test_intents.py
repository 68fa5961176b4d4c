"""Decision intents: each rule of a declaration refuses with the field, the value and the rule,
and a stored intent reads back as it was."""

import math

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.intents import (
    COST_OPTIMIZATION,
    INTENTS,
    PRODUCT_IMPROVEMENT,
    REQUIRED_MIGRATION,
    DecisionIntent,
    decision_intent,
)


@pytest.mark.parametrize("kind", INTENTS)
def test_every_intent_without_a_budget(kind):
    assert decision_intent(kind) == DecisionIntent(kind, None, None)


@pytest.mark.parametrize("kind", [REQUIRED_MIGRATION, PRODUCT_IMPROVEMENT])
def test_a_budget_with_a_migration_or_a_product_improvement(kind):
    intent = decision_intent(kind, budget=2, currency="EUR")
    assert intent == DecisionIntent(kind, 2.0, "EUR")
    assert isinstance(intent.budget, float)
    assert intent.words() == f"{kind}, budget 2 EUR per task"


@pytest.mark.parametrize(
    ("kind", "options", "field", "rule"),
    [
        ("cheaper_please", {}, "intent.kind", "must be one of cost_optimization"),
        (None, {}, "intent.kind", "must be one of"),
        (COST_OPTIMIZATION, {"budget": 1.0, "currency": "USD"}, "intent.budget", "only with"),
        (
            REQUIRED_MIGRATION,
            {"budget": 0, "currency": "USD"},
            "intent.budget",
            "finite number > 0",
        ),
        (REQUIRED_MIGRATION, {"budget": -1, "currency": "USD"}, "intent.budget", "> 0"),
        (REQUIRED_MIGRATION, {"budget": math.inf, "currency": "USD"}, "intent.budget", "finite"),
        (REQUIRED_MIGRATION, {"budget": math.nan, "currency": "USD"}, "intent.budget", "finite"),
        (REQUIRED_MIGRATION, {"budget": True, "currency": "USD"}, "intent.budget", "finite"),
        (REQUIRED_MIGRATION, {"budget": "5", "currency": "USD"}, "intent.budget", "finite"),
        (REQUIRED_MIGRATION, {"budget": 5.0}, "intent.currency", "required with a budget"),
        (REQUIRED_MIGRATION, {"budget": 5.0, "currency": "usd"}, "intent.currency", "3 upper"),
        (PRODUCT_IMPROVEMENT, {"currency": "USD"}, "intent.currency", "goes with a budget"),
    ],
)
def test_each_rule_refuses_by_name(kind, options, field, rule):
    with pytest.raises(InputError) as raised:
        decision_intent(kind, **options)
    assert raised.value.field == field
    assert rule in raised.value.rule


def test_the_field_is_the_caller_s():
    with pytest.raises(InputError) as raised:
        decision_intent("x", field="--intent")
    assert str(raised.value).startswith("--intent.kind='x':")


@pytest.mark.parametrize(
    "intent",
    [
        DecisionIntent(COST_OPTIMIZATION),
        DecisionIntent(REQUIRED_MIGRATION, 0.02, "USD"),
        DecisionIntent(PRODUCT_IMPROVEMENT),
    ],
)
def test_json_round_trip(intent):
    document = intent.to_json()
    assert set(document) == {"kind", "budget", "currency"}
    assert DecisionIntent.from_json(document) == intent


def test_a_stored_document_is_checked_again():
    with pytest.raises(InputError, match="intent.budget"):
        DecisionIntent.from_json({"kind": COST_OPTIMIZATION, "budget": 1.0, "currency": "USD"})
    with pytest.raises(InputError, match="intent.limit=.*unknown key"):
        DecisionIntent.from_json({"kind": COST_OPTIMIZATION, "limit": 1})
    with pytest.raises(InputError, match="must be an object"):
        DecisionIntent.from_json("cost_optimization")  # type: ignore[arg-type]
