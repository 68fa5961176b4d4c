"""Row costs: a logged cost as is, tokens at the price table (call_cost's formula, the oracle),
and no cost (never zero) where neither is there; one currency per claim."""

import numpy as np
import polars as pl
import pytest

from eval_pipelines.core.chat.cost import call_cost
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.prices import PriceTable, parse_price_table, row_costs

TABLE = parse_price_table(
    {
        "currency": "USD",
        "models": {"small": {"input": 0.15, "output": 0.6}, "large": {"input": 3, "output": 15}},
    }
)


def frame(*rows):
    schema = {
        "model": pl.String,
        "input_tokens": pl.Int64,
        "output_tokens": pl.Int64,
        "cost": pl.Float64,
        "currency": pl.String,
    }
    return pl.DataFrame([dict(zip(schema, r, strict=True)) for r in rows], schema=schema)


def test_tokens_are_priced_as_call_cost_prices_them():
    # Oracle: core.chat.cost.call_cost on each row. Tolerance 1e-15 (the same formula).
    rows = frame(("small", 1200, 80, None, None), ("large", 10, 0, None, None))
    result = row_costs(rows, TABLE)
    expected = [call_cost(TABLE.models, "small", 1200, 80), call_cost(TABLE.models, "large", 10, 0)]
    np.testing.assert_allclose(result.costs, expected, rtol=0, atol=1e-15)
    assert result.currency == "USD" and result.eligibility.eligible
    assert result.by_tokens.tolist() == [True, True]


def test_a_logged_cost_is_used_as_is():
    rows = frame(("large", 1000, 1000, 0.5, "USD"), ("small", None, None, 0.25, "USD"))
    result = row_costs(rows, TABLE)
    assert result.costs.tolist() == [0.5, 0.25]
    assert result.by_tokens.tolist() == [False, False]
    # No price table needed when every row logs its cost.
    assert row_costs(rows, None).costs.tolist() == [0.5, 0.25]


@pytest.mark.parametrize(
    ("rows", "prices", "words"),
    [
        ([("small", None, None, None, None)], TABLE, "1 rows log neither cost nor tokens"),
        ([("medium", 5, 5, None, None)], TABLE, "models the price table has no price for (medium)"),
        ([("small", 5, 5, None, None)], None, "no price table"),
    ],
)
def test_a_row_without_a_cost_makes_the_claim_incomplete(rows, prices, words):
    result = row_costs(frame(("small", 1, 1, None, None), *rows), prices)
    assert result.costs is None
    assert result.eligibility.reason == "envelope_incomplete: cost"
    assert words in result.eligibility.detail


def test_costs_in_two_currencies_are_not_added_up():
    result = row_costs(frame(("small", 5, 5, None, None), ("small", None, None, 0.1, "EUR")), TABLE)
    assert result.costs is None
    assert result.eligibility.reason == "currency_mismatch: currency"
    assert "EUR, USD" in result.eligibility.detail


def test_missing_columns_are_not_logged():
    assert row_costs(pl.DataFrame({"cluster": ["a"]}), TABLE).eligibility.element == "cost"


def test_price_table_round_trip_and_refusals():
    assert parse_price_table(TABLE.to_json()) == TABLE
    assert isinstance(TABLE, PriceTable)
    with pytest.raises(InputError, match="prices.currency='usd'"):
        parse_price_table({"currency": "usd", "models": {}})
    with pytest.raises(InputError, match="prices.models.small.input=-1"):
        parse_price_table({"currency": "USD", "models": {"small": {"input": -1, "output": 1}}})
    with pytest.raises(InputError, match="prices="):
        parse_price_table({"models": {}})
