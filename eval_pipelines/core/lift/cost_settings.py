"""A workspace's cost options (``lift settings --intent/--budget/--lever-changes/--prices``),
checked once at the boundary: claim options, not part of the split, so a change starts no
epoch.

- The decision intent and its budget (:mod:`eval_pipelines.core.lift.intents`) are declared
  together, one decision: a budget is given with its intent in the same call.
- ``lever_changes``: the execution-envelope elements the lever declares it changes
  (:data:`~eval_pipelines.core.lift.cost_columns.ENVELOPE`); the arms of a cost claim must
  agree on every other one.
- The price table: the JSON file ``{"currency": "USD", "models": {"<model>": {"input": <per
  1M tokens>, "output": <per 1M tokens>}}}``, which prices logged tokens.

A claim keeps the intent it opened under (:mod:`eval_pipelines.core.lift.claim_cost`): a
later change of these settings applies to claims opened after it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.chat.settings import parse_prices
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.cost_columns import ENVELOPE
from eval_pipelines.core.lift.intents import CURRENCY, DecisionIntent, decision_intent

__all__ = ["NO_CHANGES", "CostOptions", "cost_options", "lever_changes", "price_table"]

#: What ``--lever-changes`` takes for a lever that changes no envelope element.
NO_CHANGES = "none"


@dataclass(frozen=True)
class CostOptions:
    """Checked cost options as given (None: not given, the stored value stays)."""

    intent: DecisionIntent | None = None
    clear_intent: bool = False
    lever_changes: tuple[str, ...] | None = None
    prices: dict[str, Any] | None = None


def lever_changes(value: str | Sequence[str], *, field: str = "lever_changes") -> tuple[str, ...]:
    """The envelope elements a lever changes, from ``model,provider`` (or a list of names;
    ``none``: no element), each checked against the envelope and given once."""
    names = [part.strip() for part in value.split(",")] if isinstance(value, str) else list(value)
    if names == [NO_CHANGES]:
        return ()
    seen: list[str] = []
    for name in names:
        if name not in ENVELOPE:
            raise InputError(
                field,
                name,
                f"must be envelope elements, comma-separated: {', '.join(ENVELOPE)} (or "
                f"{NO_CHANGES})",
            )
        if name in seen:
            raise InputError(field, name, "each element is named once")
        seen.append(name)
    return tuple(sorted(seen, key=ENVELOPE.index))


def cost_options(
    *,
    intent: str | None = None,
    budget: Any = None,
    budget_currency: Any = None,
    clear_intent: bool = False,
    changes: str | Sequence[str] | None = None,
    prices: Any = None,
) -> CostOptions:
    """The options checked (:class:`InputError` naming the option, its value and the rule);
    ``prices``, a price table's document (:func:`price_table`)."""
    if clear_intent and intent is not None:
        raise InputError("intent", intent, "either declare an intent or clear it, not both")
    declared = None
    if intent is not None:
        declared = decision_intent(intent, budget=budget, currency=budget_currency)
    elif budget is not None or budget_currency is not None:
        raise InputError(
            "budget",
            budget if budget is not None else budget_currency,
            "a budget is declared with its intent in the same call (--intent required_migration "
            "or product_improvement)",
        )
    return CostOptions(
        intent=declared,
        clear_intent=clear_intent,
        lever_changes=lever_changes(changes) if changes is not None else None,
        prices=price_table(prices) if prices is not None else None,
    )


def price_table(document: Any, *, field: str = "prices") -> dict[str, Any]:
    """A price table's document checked, as stored: ``{"currency": "USD", "models":
    {"<model>": {"input": <per 1M tokens>, "output": <per 1M tokens>}}}`` (prices finite and
    >= 0, the currency 3 upper-case letters)."""
    if not isinstance(document, Mapping) or set(document) != {"currency", "models"}:
        raise InputError(
            field,
            document,
            'must be {"currency": "USD", "models": {"<model>": {"input": <per 1M tokens>, '
            '"output": <per 1M tokens>}}}',
        )
    currency = document["currency"]
    if not isinstance(currency, str) or CURRENCY.fullmatch(currency) is None:
        raise InputError(
            f"{field}.currency", currency, "must be 3 upper-case letters (ISO 4217, e.g. USD)"
        )
    models = parse_prices(document["models"], f"{field}.models")
    if not models:
        raise InputError(f"{field}.models", {}, "must price at least one model")
    return {
        "currency": currency,
        "models": {
            model: {"input": price.input_per_million, "output": price.output_per_million}
            for model, price in models.items()
        },
    }
