"""The cost options of ``lift settings`` (``api.lift.set_settings``): checked before the
warehouse is opened (a price table file read and checked whole), then merged with the
workspace's stored ones inside the settings' transaction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

from eval_pipelines.core.files import read_json
from eval_pipelines.core.lift.cost_settings import CostOptions, cost_options
from eval_pipelines.storage import lift as lift_store


def checked_cost_options(
    *,
    intent: str | None,
    budget: Any,
    budget_currency: Any,
    clear_intent: bool,
    changes: str | Sequence[str] | None,
    prices: Path | str | Mapping[str, Any] | None,
    clear_prices: bool,
) -> CostOptions:
    """The options given, checked (:class:`~eval_pipelines.core.errors.InputError` naming
    the option, value and rule); ``prices`` a JSON file's path or its document."""
    # Cleared and given at once is refused by cost_options, naming the path: no file is read.
    document = (
        read_json(prices, "prices")
        if isinstance(prices, Path | str) and not clear_prices
        else prices
    )
    return cost_options(
        intent=intent,
        budget=budget,
        budget_currency=budget_currency,
        clear_intent=clear_intent,
        changes=changes,
        prices=document,
        clear_prices=clear_prices,
    )


def save_cost_options(
    conn: duckdb.DuckDBPyConnection, workspace_id: str, options: CostOptions
) -> lift_store.CostSettings:
    """The workspace's cost settings with ``options`` applied (call inside a transaction):
    what is not given stays as stored."""
    found = lift_store.cost_settings(conn, workspace_id)
    stored = found or lift_store.CostSettings(workspace_id, None, (), None)
    given = (options.intent, options.lever_changes, options.prices) != (None, None, None)
    if not (given or options.clear_intent or options.clear_prices):
        return stored
    intent = (
        None
        if options.clear_intent
        else (options.intent.to_json() if options.intent is not None else stored.intent)
    )
    after = lift_store.CostSettings(
        workspace_id,
        intent,
        options.lever_changes if options.lever_changes is not None else stored.lever_changes,
        None
        if options.clear_prices
        else (options.prices if options.prices is not None else stored.prices),
    )
    lift_store.save_cost_settings(conn, after)
    return after
