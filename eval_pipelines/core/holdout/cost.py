"""Cost per record of a holdout variant, and the paired difference in cost between two
variants, priced from the tokens each record's invocation took.

What is counted: the record's scored invocation (trial 1, the answer every accuracy figure
uses), at the tokens the endpoint reported for it, priced with the variant's price table
(:func:`~eval_pipelines.core.chat.cost.call_cost`). An answer read from the call cache counts
the tokens it took when it was made: the figure is what the setup costs per record, whoever
paid for it (the report's ``spent`` says what this run paid). A row a memo rule decided
without a call, or a call that got no answer, costs 0: no tokens were reported for it.

When there is no figure, the variant says why instead of a cost of 0: it calls no model
(``no_model_calls``), its model has no price (``no_price``), or it was classified before
per-record tokens were recorded (``not_recorded``). Two variants' costs are compared only
when both are priced in the same currency (a table with no ``currency`` compares only with
another without one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from eval_pipelines.core.chat.cost import call_cost
from eval_pipelines.core.chat.settings import ModelPrice, parse_prices
from eval_pipelines.core.holdout.classify_config import CHAT_CLASSIFIER, ClassifyConfig
from eval_pipelines.core.stats.clustered import ClusterRatio, cluster_ratio
from eval_pipelines.core.stats.paired_means import PairedMeanDifference, paired_mean_difference

PRICED = "priced"
NO_MODEL_CALLS = "no_model_calls"
NO_PRICE = "no_price"
NOT_RECORDED = "not_recorded"
COMPARED = "compared"
NOT_COMPARED = "not_compared"

BOOTSTRAP_RESAMPLES = 2000
# The bootstrap's stream is seeded by the evaluation's seed and this tag ("cost"), apart from
# the accuracy levels' streams (seeded by the seed and a depth).
_COST_STREAM = 0x636F7374

BASIS = (
    "cost per record: the priced tokens of each record's scored invocation (trial 1), an "
    "answer from the call cache counted at the tokens it took when made (the setup's cost, "
    "whoever paid it); a row a memo rule decided, or a call with no answer, costs 0; "
    "interval: 95% cluster bootstrap over the groups held out together"
)


@dataclass(frozen=True)
class VariantCost:
    """One variant's cost per record, or why it has none.

    Attributes
    ----------
    status
        :data:`PRICED`, :data:`NO_MODEL_CALLS`, :data:`NO_PRICE` or :data:`NOT_RECORDED`.
    reason
        Why there is no cost (None when priced).
    currency
        The price table's currency, None when it declares none.
    model
        The model priced (chat variants).
    record_costs
        Each record's cost, by record key (None unless priced).
    per_record
        Mean cost per record with its cluster-bootstrap interval (None unless priced).
    """

    status: str
    reason: str | None = None
    currency: str | None = None
    model: str | None = None
    record_costs: Mapping[str, float] | None = None
    per_record: ClusterRatio | None = None


@dataclass(frozen=True)
class CostComparison:
    """Candidate minus baseline cost per record over the same records, or why not."""

    status: str
    reason: str | None = None
    currency: str | None = None
    difference: PairedMeanDifference | None = None


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, _COST_STREAM])


def _priced(prices: Mapping[str, ModelPrice], model: str, tokens_in: int, tokens_out: int) -> float:
    cost = call_cost(prices, model, tokens_in, tokens_out)
    assert cost is not None, "the model's price was looked up before"
    return cost


def variant_cost(
    rows: pl.DataFrame,
    config: ClassifyConfig,
    usage: Mapping[str, Any],
    *,
    clusters: Mapping[str, int],
    seed: int,
) -> VariantCost:
    """The cost per record of one variant's predictions ``rows`` (``record_key``,
    ``input_tokens``, ``output_tokens``; tokens null when not recorded), with ``usage`` as
    stored with its run (a chat variant's ``usage.chat.model`` is the model it called) and
    ``clusters`` the sample's clusters."""
    chat = usage.get("chat")
    recorded = rows.get_column("input_tokens").is_not_null().all() and (
        rows.get_column("output_tokens").is_not_null().all()
    )
    if config.classifier != CHAT_CLASSIFIER or not chat:
        # The run's usage holds the tokens the classifier reported (older evaluations too).
        if usage.get("tokens"):
            return VariantCost(
                NO_PRICE,
                f"classifier {config.classifier!r} reports tokens but has no price table "
                "(prices are for chat variants)",
            )
        return VariantCost(NO_MODEL_CALLS, "the variant calls no model")
    model = str(chat["model"])
    if not recorded:
        return VariantCost(
            NOT_RECORDED,
            "per-record tokens were not recorded (classified before they were); "
            "re-materialise variant_predictions to record them (answers come from the cache)",
            currency=config.currency,
            model=model,
        )
    prices = parse_prices(config.prices or {}, "config.prices")
    if model not in prices:
        return VariantCost(
            NO_PRICE,
            f"model {model!r} has no price in the config's prices table",
            currency=config.currency,
            model=model,
        )
    ordered = rows.sort("record_key")
    keys = ordered.get_column("record_key").to_list()
    costs = [
        _priced(prices, model, int(tokens_in), int(tokens_out))
        for tokens_in, tokens_out in zip(
            ordered.get_column("input_tokens").to_list(),
            ordered.get_column("output_tokens").to_list(),
            strict=True,
        )
    ]
    return VariantCost(
        PRICED,
        currency=config.currency,
        model=model,
        record_costs=dict(zip(keys, costs, strict=True)),
        per_record=cluster_ratio(
            costs,
            clusters=[clusters[key] for key in keys],
            n_resamples=BOOTSTRAP_RESAMPLES,
            rng=_rng(seed),
        ),
    )


def calls_a_model(*costs: VariantCost) -> bool:
    """Whether a pair has a cost to compare or a reason worth saying: some side calls a model
    (two variants that call none have no cost, and their comparison says nothing of it)."""
    return any(cost.status != NO_MODEL_CALLS for cost in costs)


def compare_costs(
    baseline: VariantCost,
    candidate: VariantCost,
    *,
    clusters: Mapping[str, int],
    seed: int,
) -> CostComparison:
    """The paired difference in cost per record (candidate minus baseline, and candidate /
    baseline - 1), or why there is none: a side without a cost, or two currencies."""
    for side, cost in (("baseline", baseline), ("candidate", candidate)):
        if cost.status != PRICED:
            return CostComparison(NOT_COMPARED, f"{side} has no cost per record: {cost.reason}")
    if baseline.currency != candidate.currency:
        return CostComparison(
            NOT_COMPARED,
            f"the price tables' currencies differ ({baseline.currency or 'none declared'} vs "
            f"{candidate.currency or 'none declared'}): costs in two currencies are not "
            "compared",
        )
    assert baseline.record_costs is not None and candidate.record_costs is not None
    keys = sorted(baseline.record_costs)
    if keys != sorted(candidate.record_costs):
        return CostComparison(NOT_COMPARED, "the two variants priced different records")
    return CostComparison(
        COMPARED,
        currency=baseline.currency,
        difference=paired_mean_difference(
            [baseline.record_costs[key] for key in keys],
            [candidate.record_costs[key] for key in keys],
            clusters=[clusters[key] for key in keys],
            n_resamples=BOOTSTRAP_RESAMPLES,
            rng=_rng(seed),
        ),
    )
