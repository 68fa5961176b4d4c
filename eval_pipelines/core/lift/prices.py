"""What each lift log row cost: its logged ``cost``, or its tokens at the workspace's price
table (``{"currency": "USD", "models": {"<model>": {"input": <per 1M>, "output": <per 1M>}}}``,
the prices of :mod:`eval_pipelines.core.chat.settings`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from eval_pipelines.core.chat.settings import ModelPrice, parse_prices
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.envelope import CURRENCY_MISMATCH, ELIGIBLE, Eligibility, ineligible
from eval_pipelines.core.lift.intents import CURRENCY

__all__ = ["INCOMPLETE_COST", "PriceTable", "RowCosts", "parse_price_table", "row_costs"]

INCOMPLETE_COST = "envelope_incomplete"


@dataclass(frozen=True)
class PriceTable:
    """A workspace's prices: per model, what 1M input and 1M output tokens cost in
    ``currency``."""

    currency: str
    models: Mapping[str, ModelPrice]

    def to_json(self) -> dict[str, Any]:
        """The document :func:`parse_price_table` reads."""
        return {
            "currency": self.currency,
            "models": {
                model: {"input": price.input_per_million, "output": price.output_per_million}
                for model, price in sorted(self.models.items())
            },
        }


def parse_price_table(document: Any, *, field: str = "prices") -> PriceTable:
    """A checked :class:`PriceTable` from its JSON document.

    Raises
    ------
    InputError
        Naming the path of the bad value (``prices.currency``, ``prices.models.m.input``).

    Examples
    --------
    >>> from eval_pipelines.core.lift.prices import parse_price_table
    >>> table = parse_price_table({"currency": "USD", "models": {"m": {"input": 3, "output": 15}}})
    >>> table.models["m"].output_per_million
    15.0
    """
    if not isinstance(document, Mapping) or set(document) != {"currency", "models"}:
        raise InputError(
            field, document, 'must be {"currency": "USD", "models": {model: {input, output}}}'
        )
    currency = document["currency"]
    if not isinstance(currency, str) or CURRENCY.fullmatch(currency) is None:
        raise InputError(
            f"{field}.currency", currency, "must be 3 upper-case letters (ISO 4217, e.g. USD)"
        )
    return PriceTable(currency, parse_prices(document["models"], f"{field}.models"))


@dataclass(frozen=True)
class RowCosts:
    """Each row's cost, or why the rows have none.

    Attributes
    ----------
    costs
        One cost per row (float64), or None when ``eligibility`` refuses.
    currency
        The one currency of every cost, or None.
    eligibility
        :data:`~eval_pipelines.core.lift.envelope.ELIGIBLE`, or ``envelope_incomplete: cost``
        (a row with neither a cost nor priced tokens), or ``currency_mismatch: currency``.
    by_tokens
        Per row, whether its cost is its tokens at the price table (else it logged
        ``cost``); None with ``costs``.
    """

    costs: np.ndarray | None
    currency: str | None
    eligibility: Eligibility
    by_tokens: np.ndarray | None = None


def row_costs(rows: pl.DataFrame, prices: PriceTable | None) -> RowCosts:
    """What each row cost: its ``cost`` (in its ``currency``) when logged, else
    ``input_tokens * input / 1e6 + output_tokens * output / 1e6`` at its ``model``'s price
    (:func:`~eval_pipelines.core.chat.cost.call_cost`'s formula), in the table's currency.

    A row with no cost, no tokens, or tokens of a model the table has no price for (or no
    table at all) has no cost: ``envelope_incomplete: cost``, never a cost of zero. Costs in
    more than one currency are not added up (no exchange rate is applied):
    ``currency_mismatch: currency``.
    """
    frame = rows.with_columns(
        *(
            pl.lit(None, dtype).alias(name)
            for name, dtype in _COLUMNS.items()
            if name not in rows.columns
        )
    )
    logged = pl.col("cost").is_not_null()
    tokens = pl.col("input_tokens").is_not_null() & pl.col("output_tokens").is_not_null()
    models = prices.models if prices is not None else {}
    table = pl.DataFrame(
        {
            "model": list(models),
            "__input": [p.input_per_million for p in models.values()],
            "__output": [p.output_per_million for p in models.values()],
        },
        schema={"model": pl.String, "__input": pl.Float64, "__output": pl.Float64},
    )
    priced = frame.select("model", "input_tokens", "output_tokens", "cost", "currency").join(
        table, on="model", how="left", maintain_order="left"
    )
    from_tokens = (
        pl.col("input_tokens") * pl.col("__input") + pl.col("output_tokens") * pl.col("__output")
    ) / 1_000_000
    priced = priced.with_columns(
        row_cost=pl.when(logged).then(pl.col("cost")).otherwise(from_tokens),
        row_currency=pl.when(logged)
        .then(pl.col("currency"))
        .otherwise(pl.lit(prices.currency if prices is not None else None, pl.String)),
        by_tokens=~logged & tokens,
    )
    lacking = priced.filter(pl.col("row_cost").is_null())
    if lacking.height:
        return RowCosts(
            None, None, ineligible(INCOMPLETE_COST, "cost", _lacking_words(lacking, prices))
        )
    currencies = sorted(priced.get_column("row_currency").unique().to_list())
    if len(currencies) > 1:
        return RowCosts(
            None,
            None,
            ineligible(
                CURRENCY_MISMATCH,
                "currency",
                f"the rows' costs are in {', '.join(currencies)}: no exchange rate is applied, "
                "so they are not added up",
            ),
        )
    return RowCosts(
        priced.get_column("row_cost").to_numpy().astype(np.float64),
        currencies[0] if currencies else (prices.currency if prices is not None else None),
        ELIGIBLE,
        priced.get_column("by_tokens").to_numpy().astype(np.bool_),
    )


_COLUMNS = {
    "cost": pl.Float64,
    "currency": pl.String,
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "model": pl.String,
}


def _lacking_words(lacking: pl.DataFrame, prices: PriceTable | None) -> str:
    """Why rows have no cost, with row counts (and the models without a price)."""
    with_tokens = lacking.filter(pl.col("input_tokens").is_not_null())
    parts = []
    if lacking.height > with_tokens.height:
        parts.append(f"{lacking.height - with_tokens.height} rows log neither cost nor tokens")
    if with_tokens.height:
        if prices is None:
            parts.append(
                f"{with_tokens.height} rows log tokens and the workspace has no price table "
                "(`eval-pipelines lift settings --prices FILE` declares one)"
            )
        else:
            unpriced = sorted({str(m) for m in with_tokens.get_column("model").to_list()})
            parts.append(
                f"{with_tokens.height} rows log tokens of models the price table has no price "
                f"for ({', '.join(unpriced[:5])})"
            )
    return "; ".join(parts) + ": a cost claim needs every contrasted row's cost"
