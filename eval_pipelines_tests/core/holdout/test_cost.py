"""Cost per record of a holdout variant and the paired cost difference (core/holdout/cost.py
and its JSON and text, cost_report.py), on small frames: each status and its rule."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from eval_pipelines.core.holdout.classify_config import ClassifyConfig
from eval_pipelines.core.holdout.cost import (
    COMPARED,
    NO_MODEL_CALLS,
    NO_PRICE,
    NOT_COMPARED,
    NOT_RECORDED,
    PRICED,
    compare_costs,
    variant_cost,
)
from eval_pipelines.core.holdout.cost_report import (
    cost_comparison_to_json,
    cost_per_record_text,
    relative_cost_text,
    variant_cost_to_json,
)
from eval_pipelines.core.stats import INSUFFICIENT

KEYS = [f"r{i:03d}" for i in range(40)]
CLUSTERS = {key: i // 2 for i, key in enumerate(KEYS)}  # 20 clusters of two records
CHAT = {"chat": {"model": "m"}}


def _rows(tokens_in: list[int | None], tokens_out: list[int | None]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "record_key": KEYS[: len(tokens_in)],
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
        },
        schema={"record_key": pl.String, "input_tokens": pl.Int64, "output_tokens": pl.Int64},
    )


def _chat(price_in: float, price_out: float, currency: str | None = "USD") -> ClassifyConfig:
    return ClassifyConfig(
        classifier="chat",
        prices={"m": {"input": price_in, "output": price_out}},
        currency=currency,
    )


def test_cost_per_record_is_tokens_times_the_price_and_a_memo_decision_costs_nothing() -> None:
    # Record 0 was decided by a memo rule (no call, no tokens): it costs 0, not "unknown".
    tokens_in = [0, *range(100, 139)]
    tokens_out = [0, *([10] * 39)]
    cost = variant_cost(
        _rows(tokens_in, tokens_out), _chat(2.0, 8.0), CHAT, clusters=CLUSTERS, seed=1
    )
    expected = (np.array(tokens_in) * 2.0 + np.array(tokens_out) * 8.0) / 1e6
    assert cost.status == PRICED and cost.record_costs is not None
    assert cost.record_costs["r000"] == 0.0
    assert cost.per_record is not None and cost.per_record.estimate == pytest.approx(
        expected.mean(), rel=1e-12
    )
    assert cost.per_record.n_clusters == 20
    shown = variant_cost_to_json(cost)
    assert shown["perRecord"]["total"] == pytest.approx(expected.sum(), rel=1e-5)
    assert cost_per_record_text(shown).endswith("n=40") and " USD [" in cost_per_record_text(shown)


def test_without_tokens_price_or_model_calls_there_is_no_cost_and_no_number() -> None:
    recorded = _rows([5] * 40, [1] * 40)
    missing = _rows([None] * 40, [None] * 40)
    knn = ClassifyConfig()
    for rows in (_rows([0] * 40, [0] * 40), missing):
        no_calls = variant_cost(rows, knn, {"tokens": 0}, clusters=CLUSTERS, seed=1)
        assert no_calls.status == NO_MODEL_CALLS
    # A plug-in that reports tokens has no price table: no cost, never a cost of 0.
    plugin = variant_cost(
        recorded, ClassifyConfig(classifier="plug"), {"tokens": 240}, clusters=CLUSTERS, seed=1
    )
    assert plugin.status == NO_PRICE and "has no price table" in str(plugin.reason)
    old = variant_cost(missing, _chat(1.0, 1.0), CHAT, clusters=CLUSTERS, seed=1)
    assert old.status == NOT_RECORDED and old.per_record is None
    unpriced = variant_cost(
        recorded,
        ClassifyConfig(classifier="chat", prices={"other": {"input": 1, "output": 1}}),
        CHAT,
        clusters=CLUSTERS,
        seed=1,
    )
    assert unpriced.status == NO_PRICE
    for cost in (plugin, old, unpriced):
        text = cost_per_record_text(variant_cost_to_json(cost))
        assert variant_cost_to_json(cost)["perRecord"] is None
        assert text.startswith(("no price (", "not recorded ("))
    assert cost_per_record_text(None) == "not in this report (made before cost per record)"


def test_a_cheaper_tier_reads_its_relative_difference_and_two_currencies_read_none() -> None:
    rng = np.random.default_rng(0)
    tokens_in = rng.integers(100, 400, size=40).tolist()
    tokens_out = rng.integers(5, 20, size=40).tolist()
    rows = _rows(tokens_in, tokens_out)
    large = variant_cost(rows, _chat(5.0, 15.0), CHAT, clusters=CLUSTERS, seed=1)
    small = variant_cost(rows, _chat(3.0, 9.0), CHAT, clusters=CLUSTERS, seed=1)
    compared = compare_costs(large, small, clusters=CLUSTERS, seed=1)
    assert compared.status == COMPARED and compared.difference is not None
    # The same tokens at 60% of the price: exactly -40%, every resample too.
    assert compared.difference.relative == pytest.approx(-0.4, abs=1e-12)
    shown = cost_comparison_to_json(compared)
    assert shown["relative"] == {"value": -0.4, "interval": [-0.4, -0.4]}
    assert relative_cost_text(shown).startswith("-40% [-40%, -40%], -")
    euro = variant_cost(rows, _chat(3.0, 9.0, "EUR"), CHAT, clusters=CLUSTERS, seed=1)
    mixed = compare_costs(large, euro, clusters=CLUSTERS, seed=1)
    assert mixed.status == NOT_COMPARED and mixed.difference is None
    assert "currencies differ (USD vs EUR)" in str(mixed.reason)
    undeclared = variant_cost(rows, _chat(3.0, 9.0, None), CHAT, clusters=CLUSTERS, seed=1)
    assert "USD vs none declared" in str(
        compare_costs(large, undeclared, clusters=CLUSTERS, seed=1).reason
    )
    assert relative_cost_text(cost_comparison_to_json(mixed)).startswith("not compared: ")


def test_below_twenty_clusters_the_cost_reads_insufficient_evidence() -> None:
    few = {key: i // 4 for i, key in enumerate(KEYS)}  # 10 clusters
    rows = _rows([100] * 40, [10] * 40)
    large = variant_cost(rows, _chat(5.0, 15.0), CHAT, clusters=few, seed=1)
    small = variant_cost(rows, _chat(3.0, 9.0), CHAT, clusters=few, seed=1)
    assert cost_per_record_text(variant_cost_to_json(large)) == (
        f"{INSUFFICIENT} (n=40, clusters=10)"
    )
    shown = cost_comparison_to_json(compare_costs(large, small, clusters=few, seed=1))
    assert (
        shown["difference"]["value"] == INSUFFICIENT and shown["relative"]["value"] == INSUFFICIENT
    )
    assert relative_cost_text(shown) == f"{INSUFFICIENT} (n=40, clusters=10)"
