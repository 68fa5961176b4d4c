"""The live cost bar of one claim: eligibility first, then the cost per task of each arm, its
difference with the quality lift's engine, and the verdict under the claim's intent.

Oracles: the cost per task and the bootstrap recomputed from their definitions
(unpaired_mean_difference on each cluster's rows, itself checked against scipy), and the
always-valid interval from docs/lift.md's formula (sequence_half_width of the interval's
standard error with the clusters of both arms).
"""

import json
import re
from datetime import date, timedelta

import numpy as np
import polars as pl
import pytest

from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines.core.lift.cost import CostBound, live_cost
from eval_pipelines.core.lift.cost_verdict import (
    CHEAPER,
    INELIGIBLE,
    INSUFFICIENT,
    NO_INTENT,
    NOT_CHEAPER,
    OVER_BUDGET,
    PARKED,
    WITHIN_BUDGET,
)
from eval_pipelines.core.lift.intents import decision_intent
from eval_pipelines.core.lift.lift import INFERIOR, NOT_ESTABLISHED
from eval_pipelines.core.lift.prices import parse_price_table
from eval_pipelines.core.lift.simulate import ArmCost, CostProfile, simulate_traffic
from eval_pipelines.core.stats.lift_power import interval_standard_error
from eval_pipelines.core.stats.mean_difference import unpaired_mean_difference
from eval_pipelines.core.stats.sequential import sequence_half_width

PRICES = parse_price_table(
    {
        "currency": "USD",
        "models": {
            "tier-large": {"input": 3, "output": 15},
            "tier-small": {"input": 2.4, "output": 12},
        },
    }
)
OPTIMIZE = decision_intent("cost_optimization")
ENVELOPE = {
    "model": "m",
    "provider": "p",
    "tools": "t",
    "response_format": "json",
    "generation_params": "g",
    "streaming": False,
    "provider_policy": "pp",
}
# Numbers that look like a cost: a decimal point between digits.
DECIMAL = re.compile(r"\d\.\d")
# Figures that are not costs: an arm's unresolved share, the declared budget.
NOT_COSTS = {"censoredShare", "budget"}


def cost_figures(document):
    """Every real number of a JSON document but :data:`NOT_COSTS`' (row counts are whole)."""
    if isinstance(document, dict):
        return [f for k, v in document.items() if k not in NOT_COSTS for f in cost_figures(v)]
    if isinstance(document, list):
        return [f for v in document for f in cost_figures(v)]
    if isinstance(document, float):
        return [document]
    if isinstance(document, str):
        return DECIMAL.findall(document)
    return []


def claim_rows(clusters=60, treated_cost=1.0, control_cost=1.6, seed=0, **envelope):
    """Rows of two arms of ``clusters`` tasks of 1-3 requests, each request's ``cost``
    logged (USD) around its arm's level; a tenth unresolved."""
    rng = np.random.default_rng(seed)
    rows = []
    for arm, level in (("treated", treated_cost), ("lever_holdout", control_cost)):
        for g in range(clusters):
            for _request in range(int(rng.integers(1, 4))):
                rows.append(
                    {
                        "workspace_id": "w1",
                        "claim_type": "coding",
                        "situation_class": "single",
                        "exposure_arm": arm,
                        "exposure_epoch": "e1",
                        "source": "declared",
                        "cluster": f"{arm}-{g}",
                        "outcome": None if rng.random() < 0.1 else bool(rng.random() < 0.7),
                        "cost": float(rng.gamma(4.0, level / 4.0)),
                        "currency": "USD",
                        **ENVELOPE,
                        **(envelope if arm == "treated" else {}),
                    }
                )
    return pl.DataFrame(rows)


def cost(events, **options):
    arguments = {
        "workspace_id": "w1",
        "epoch": "e1",
        "intent": OPTIMIZE,
        "prices": PRICES,
        "quality_verdict": NOT_ESTABLISHED,
        "rng": 3,
        "n_resamples": 500,
    }
    return live_cost(events, **{**arguments, **options})


@pytest.fixture(scope="module")
def events():
    return claim_rows()


def test_cost_per_task_and_intervals_are_the_definitions(events):
    result = cost(events)
    treated = events.filter(pl.col("exposure_arm") == "treated")
    control = events.filter(pl.col("exposure_arm") == "lever_holdout")
    # Own computation: every row's cost (unresolved ones too) summed per arm, over its tasks.
    assert result.treated.total_cost == pytest.approx(treated.get_column("cost").sum(), abs=1e-12)
    assert result.difference.mean_b == pytest.approx(
        treated.get_column("cost").sum() / 60, abs=1e-12
    )
    assert result.difference.mean_a == pytest.approx(
        control.get_column("cost").sum() / 60, abs=1e-12
    )
    assert result.treated.censored == treated.get_column("outcome").null_count() > 0
    expected = unpaired_mean_difference(
        control.get_column("cost").to_numpy(),
        treated.get_column("cost").to_numpy(),
        a_clusters=control.get_column("cluster").to_numpy(),
        b_clusters=treated.get_column("cluster").to_numpy(),
        n_resamples=500,
        rng=np.random.default_rng(3),
    )
    assert result.difference == expected
    # Always-valid: the estimate +- the sequence's half-width at 120 clusters (both arms),
    # from the one-look interval's standard error. Tolerance 1e-12.
    half = sequence_half_width(interval_standard_error(expected.interval), 120)
    assert result.sequence.low == pytest.approx(expected.estimate - half, abs=1e-12)
    assert result.sequence.high == pytest.approx(expected.estimate + half, abs=1e-12)
    # The treated arm's own bound: its interval's standard error, its 60 clusters.
    half_b = sequence_half_width(interval_standard_error(expected.interval_b), 60)
    assert result.treated_per_task.low == pytest.approx(expected.mean_b - half_b, abs=1e-12)
    assert result.treated_per_task.clusters == 60 and result.treated_per_task.currency == "USD"
    # The relative difference's always-valid interval: the same construction on the
    # bootstrap of treated / lever_holdout - 1.
    half_r = sequence_half_width(interval_standard_error(expected.relative_interval), 120)
    assert result.relative_sequence.low == pytest.approx(
        expected.relative_estimate - half_r, abs=1e-12
    )
    assert result.relative_sequence.high == pytest.approx(
        expected.relative_estimate + half_r, abs=1e-12
    )
    assert result.verdict == CHEAPER and result.read


def test_cheaper_needs_quality_not_inferior(events):
    assert cost(events, quality_verdict=INFERIOR).verdict == NOT_CHEAPER


def test_the_same_cost_is_not_cheaper():
    assert cost(claim_rows(treated_cost=1.6)).verdict == NOT_CHEAPER


def test_rows_of_other_arms_epochs_and_scopes_are_never_read(events):
    noise = events.head(40).with_columns(cost=pl.lit(1e6), tools=pl.lit(None, pl.String))
    others = pl.concat(
        [
            noise.with_columns(exposure_arm=pl.lit("holdout"), cluster=pl.lit("h")),
            noise.with_columns(exposure_arm=pl.lit("pre_lever"), cluster=pl.lit("p")),
            noise.with_columns(exposure_epoch=pl.lit("e0")),
            noise.with_columns(claim_type=pl.lit("other")),
        ]
    )
    base = cost(events, claim_type="coding")
    assert cost(pl.concat([events, others]), claim_type="coding").to_json() == base.to_json()


def test_mixed_clusters_are_left_out_as_in_the_quality_lift(events):
    # A treated cluster token also logged in the lever_holdout arm: out of both arms.
    stray = events.filter(pl.col("cluster") == "treated-0").with_columns(
        exposure_arm=pl.lit("lever_holdout")
    )
    result = cost(pl.concat([events, stray]))
    assert result.mixed_clusters == 1
    assert (result.treated.clusters, result.control.clusters) == (59, 60)


def test_an_ineligible_claim_carries_no_cost_figure():
    result = cost(claim_rows(tools="none"))
    assert result.verdict == INELIGIBLE
    assert result.eligibility.reason == "envelope_mismatch: tools"
    document = result.to_json()
    assert document["difference"] is None and document["treatedPerTask"] is None
    assert document["frozenBound"] is None and document["currency"] is None
    assert document["treated"]["totalCost"] is None and document["control"]["totalCost"] is None
    assert cost_figures(document) == []
    assert "tools" in result.message and not DECIMAL.search(result.message)
    # Under a budget, and with a frozen bound stored: the budget is the claim's declaration
    # (shown), no cost figure is.
    budget = decision_intent("required_migration", budget=2.5, currency="USD")
    stored = CostBound(9.5, 8.5, 10.5, 0.95, 33, "USD")
    result = cost(claim_rows(tools="none"), intent=budget, frozen_bound=stored)
    document = result.to_json()
    assert document["intent"]["budget"] == 2.5
    message = document.pop("message").replace(budget.words(), "the intent")
    assert result.verdict == INELIGIBLE and cost_figures(document) == []
    assert not DECIMAL.search(message)


def test_a_lever_that_declares_it_changes_an_element_is_eligible():
    assert cost(claim_rows(model="m2")).eligibility.reason == "envelope_mismatch: model"
    assert cost(claim_rows(model="m2"), lever_changes="model").verdict == CHEAPER


def test_a_stored_frozen_bound_is_kept_and_a_budget_does_not_replace_it(events):
    opened = cost(events).frozen_bound
    assert opened == CostBound.from_json(opened.to_json())
    stored = CostBound(9.0, 8.0, 10.0, 0.95, 33, "USD")
    budget = decision_intent("product_improvement", budget=5.0, currency="USD")
    later = cost(events, intent=budget, frozen_bound=stored)
    assert later.frozen_bound == stored
    assert later.verdict == WITHIN_BUDGET
    assert later.to_json()["frozenBound"]["estimate"] == 9.0


def test_a_budget_is_read_against_the_treated_arm_and_never_called_savings(events):
    for budget, word in ((5.0, WITHIN_BUDGET), (0.5, OVER_BUDGET)):
        intent = decision_intent("required_migration", budget=budget, currency="USD")
        result = cost(events, intent=intent)
        assert result.verdict == word
        text = (result.message + json.dumps(result.to_json())).lower()
        assert "sav" not in text


def test_a_budget_in_another_currency_is_not_compared(events):
    intent = decision_intent("required_migration", budget=5.0, currency="EUR")
    result = cost(events, intent=intent)
    assert result.verdict == INELIGIBLE
    assert result.eligibility.reason == "currency_mismatch: currency"


def test_below_twenty_tasks_only_the_raw_sums():
    result = cost(claim_rows(clusters=19))
    assert result.verdict == INSUFFICIENT
    assert result.difference.estimate is None and result.sequence is None
    assert result.frozen_bound is None and result.treated_per_task is None
    assert result.treated.total_cost > 0 and result.to_json()["difference"] is None


@pytest.mark.parametrize(
    ("options", "word"), [({"intent": None}, NO_INTENT), ({"quality_verdict": "parked"}, PARKED)]
)
def test_an_unread_claim_shows_counts_only(events, options, word):
    result = cost(events, **options)
    assert result.verdict == word and not result.read
    assert result.currency is None and result.difference is None and result.frozen_bound is None
    assert result.treated.total_cost is None
    assert result.treated.rows > 0
    assert not DECIMAL.search(result.message)


def test_a_cheaper_model_tier_in_a_week_of_simulated_traffic_confirms_cheaper():
    # The new-user trial: the treated arm runs a model tier 20% cheaper per token
    # (same tokens, same quality); the lever declares it changes the model. Then the same
    # week with the treated arm also dropping the tool definitions: ineligible, naming tools.
    config = LiftConfig("w1", "e1", 0.10, lever="small-tier")
    days = [date(2026, 11, 23) + timedelta(days=d) for d in range(7)]

    def week(treated_envelope):
        profile = CostProfile(treated=ArmCost(envelope=treated_envelope), seed=5)
        rows = simulate_traffic(
            config,
            days=days,
            conversations_per_day=150,
            base_rate=0.6,
            true_lift=0.0,
            rng=5,
            cost=profile,
        )
        return pl.DataFrame(rows)

    cheaper = cost(week({"model": "tier-small"}), lever_changes=["model"], n_resamples=1000)
    assert cheaper.verdict == CHEAPER, cheaper.message
    assert cheaper.difference.relative_estimate == pytest.approx(-0.2, abs=0.05)
    assert cheaper.treated.priced_rows == cheaper.treated.rows
    dropped = cost(week({"model": "tier-small", "tools": "none"}), lever_changes=["model"])
    assert (dropped.verdict, dropped.eligibility.element) == (INELIGIBLE, "tools")
