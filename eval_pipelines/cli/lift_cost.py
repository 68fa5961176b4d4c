"""The cost options of ``eval-pipelines lift settings`` (the cost bar of spec 004): the
decision intent and its budget, the envelope elements the lever changes, the price table."""

from __future__ import annotations

import argparse
from typing import Any

from eval_pipelines.cli.arguments import finite_float

#: The flag each refused field of the cost options is shown as.
COST_FLAGS = {
    "intent": "--intent",
    "intent.kind": "--intent",
    "intent.budget": "--budget",
    "intent.currency": "--budget-currency",
    "budget": "--budget",
    "budget_currency": "--budget-currency",
    "clear_intent": "--no-intent",
    "lever_changes": "--lever-changes",
    "clear_prices": "--no-prices",
}


def add_cost_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--intent",
        default=None,
        help="the decision intent a claim opened from now on is read under: cost_optimization "
        "(cheaper per task, quality not inferior), required_migration or product_improvement "
        "(against a --budget); no intent: no cost verdict (a claim keeps the intent it opened "
        "under)",
    )
    parser.add_argument(
        "--budget",
        type=finite_float,
        default=None,
        help="with --intent required_migration or product_improvement: the most the treated "
        "arm may cost per task (a budget verdict, never read as a lower cost)",
    )
    parser.add_argument(
        "--budget-currency", default=None, help="the budget's currency (3 letters, e.g. USD)"
    )
    parser.add_argument(
        "--no-intent", action="store_true", help="no intent any more (no cost verdict is read)"
    )
    parser.add_argument(
        "--lever-changes",
        default=None,
        metavar="ELEMENTS",
        help="the execution-envelope elements the lever changes, comma-separated (model, "
        "provider, tools, response_format, generation_params, streaming, provider_policy), "
        "or none; the arms must agree on every other one",
    )
    parser.add_argument(
        "--prices",
        default=None,
        metavar="FILE",
        help='JSON price table that prices logged tokens: {"currency": "USD", "models": '
        '{"<model>": {"input": <per 1M>, "output": <per 1M>}}}',
    )
    parser.add_argument(
        "--no-prices",
        action="store_true",
        help="no price table any more (logged tokens are not priced; a logged cost still is)",
    )


def cost_settings_words(
    intent: dict[str, Any] | None, lever_changes: tuple[str, ...], prices: dict[str, Any] | None
) -> str:
    """The cost options of a settings line in words."""
    if intent is None:
        declared = "no decision intent (no cost verdict is read)"
    elif intent.get("budget") is None:
        declared = f"intent {intent['kind']}"
    else:
        declared = (
            f"intent {intent['kind']}, budget {intent['budget']:g} {intent['currency']} per task"
        )
    changes = ", ".join(lever_changes) or "none"
    table = (
        f"prices in {prices['currency']} for {', '.join(sorted(prices['models']))}"
        if prices
        else "no price table"
    )
    return f"{declared}; the lever changes {changes}; {table}"
