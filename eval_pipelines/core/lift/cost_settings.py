"""A workspace's cost options (``lift settings --intent/--budget/--lever-changes/--prices``),
checked once at the boundary: claim options, not part of the split, so a change starts no
epoch.

- The decision intent and its budget (:mod:`eval_pipelines.core.lift.intents`) are declared
  together, one decision: a budget is given with its intent in the same call.
- ``lever_changes``: the execution-envelope elements the lever declares it changes
  (:data:`~eval_pipelines.core.lift.cost_columns.ENVELOPE`); the arms of a cost claim must
  agree on every other one.
- The price table: the JSON file ``{"currency": "USD", "models": {"<model>": {"input": <per
  1M tokens>, "output": <per 1M tokens>}}}``, which prices logged tokens; cleared, logged
  tokens are priced no more (a row's logged ``cost`` still counts).

A claim keeps the intent it opened under (:mod:`eval_pipelines.core.lift.claim_cost`): a
later change of these settings applies to claims opened after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.envelope import parse_lever_changes
from eval_pipelines.core.lift.intents import DecisionIntent, decision_intent
from eval_pipelines.core.lift.prices import parse_price_table

__all__ = ["NO_CHANGES", "CostOptions", "cost_options"]

#: What ``--lever-changes`` takes for a lever that changes no envelope element.
NO_CHANGES = "none"


@dataclass(frozen=True)
class CostOptions:
    """Checked cost options as given (None: not given, the stored value stays)."""

    intent: DecisionIntent | None = None
    clear_intent: bool = False
    lever_changes: tuple[str, ...] | None = None
    prices: dict[str, Any] | None = None
    clear_prices: bool = False


def cost_options(
    *,
    intent: str | None = None,
    budget: Any = None,
    budget_currency: Any = None,
    clear_intent: bool = False,
    changes: str | Sequence[str] | None = None,
    prices: Any = None,
    clear_prices: bool = False,
) -> CostOptions:
    """The options checked (:class:`InputError` naming the option, its value and the rule);
    ``prices``, a price table's document
    (:func:`~eval_pipelines.core.lift.prices.parse_price_table`), stored as it writes it."""
    if clear_intent and intent is not None:
        raise InputError("intent", intent, "either declare an intent or clear it, not both")
    if clear_prices and prices is not None:
        raise InputError("prices", prices, "either give a price table or clear it, not both")
    declared = None
    if intent is not None:
        declared = decision_intent(intent, budget=budget, currency=budget_currency)
    elif budget is not None or budget_currency is not None:
        raise InputError(
            "budget",
            budget if budget is not None else budget_currency,
            "a budget is declared with its `intent` in the same call (required_migration "
            "or product_improvement)",
        )
    return CostOptions(
        intent=declared,
        clear_intent=clear_intent,
        lever_changes=_lever_changes(changes),
        prices=parse_price_table(prices).to_json() if prices is not None else None,
        clear_prices=clear_prices,
    )


def _lever_changes(changes: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if changes is None:
        return None
    if isinstance(changes, str) and changes.strip() == NO_CHANGES:
        return ()
    return parse_lever_changes(changes)
