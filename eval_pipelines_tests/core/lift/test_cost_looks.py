"""The cost bar by simulation: a report every day of a week, the claim settled the first time
a report reads ``cheaper`` (as the ledger settles a claim).

Oracle: the simulation's truth (helpers/cost_traffic.py). With no true cost difference every
``cheaper`` is a false one, and the always-valid interval must keep them at or below 5% of
experiments over 7 looks (its design: 2.5% one-sided); with a true 20% cut per task at the
planned size (100 tasks a day, about 350 per arm over the week) ``cheaper`` must be read in at
least 80%. The quality verdict passed is ``not_established``: the simulated outcomes carry no
quality change, which is what the quality bar reads of them at least 97.5% of the time (one
reading ``inferior`` would only make ``cheaper`` rarer). Then two properties over random
experiments: a mismatched or incomplete envelope never yields a cost figure, and a budget's
verdict never reads as savings.

Run: ``pytest -m slow -s eval_pipelines_tests/core/lift/test_cost_looks.py``
(the figures are in docs/lift-cost.md).
"""

import json
import math
import re
import time

import numpy as np
import polars as pl
import pytest

from eval_pipelines.core.lift.cost import live_cost
from eval_pipelines.core.lift.cost_columns import ENVELOPE
from eval_pipelines.core.lift.cost_verdict import CHEAPER, INELIGIBLE
from eval_pipelines.core.lift.intents import decision_intent
from eval_pipelines.core.lift.lift import NOT_ESTABLISHED
from eval_pipelines_tests.helpers.cost_traffic import prices, week

DAYS = 7
PLANNED_TASKS_PER_DAY = 100
OPTIMIZE = decision_intent("cost_optimization")
SAVINGS = re.compile(r"sav(e|ed|ing|ings)\b", re.IGNORECASE)
DECIMAL = re.compile(r"\d\.\d")
NOT_COSTS = {"censoredShare", "budget"}


def _wilson(k, n, z=1.959964):
    centre = (k + z * z / 2) / (n + z * z)
    half = z * math.sqrt(k * (n - k) / n + z * z / 4) / (n + z * z)
    return centre - half, centre + half


def _report(name, k, n, started):
    low, high = _wilson(k, n)
    seconds = time.perf_counter() - started
    print(f"{name}: {k} of {n} ({k / n:.1%}, 95% Wilson [{low:.3f}, {high:.3f}]), {seconds:.0f} s")


def first_cheaper_look(seed, cost_cut):
    """The first daily look (1-7) that reads cheaper, or None."""
    traffic = week(seed, tasks_per_day=PLANNED_TASKS_PER_DAY, days=DAYS, cost_cut=cost_cut)
    table = prices(cost_cut)
    for look in range(1, DAYS + 1):
        result = live_cost(
            traffic.filter(pl.col("day") < look),
            workspace_id="w1",
            epoch="e1",
            intent=OPTIMIZE,
            lever_changes="model",
            prices=table,
            quality_verdict=NOT_ESTABLISHED,
            rng=seed,
        )
        if result.verdict == CHEAPER:
            return look
    return None


@pytest.mark.slow
def test_daily_looks_at_no_true_difference_read_cheaper_at_most_5_percent():
    # 400 experiments, no true cost difference, 7 daily looks, 2,000 resamples.
    started = time.perf_counter()
    n = 400
    confirmed = sum(first_cheaper_look(seed, 0.0) is not None for seed in range(n))
    _report("no true difference, cheaper at some look", confirmed, n, started)
    assert confirmed <= 20, f"{confirmed} of {n} null experiments read cheaper at some look"


@pytest.mark.slow
def test_a_true_20_percent_cut_reads_cheaper_at_the_planned_size():
    # 200 experiments, a true 20% cut per task, no quality change; planned size 100 tasks a
    # day for 7 days (700 tasks, about 350 per arm).
    started = time.perf_counter()
    n = 200
    looks = [first_cheaper_look(1_000 + seed, 0.2) for seed in range(n)]
    confirmed = sum(look is not None for look in looks)
    _report("true 20% cut, cheaper by the 7th look", confirmed, n, started)
    by_day = [sum(look is not None and look <= day for look in looks) for day in range(1, 8)]
    print(f"  cheaper by look 1..7: {by_day}")
    assert confirmed >= 0.8 * n


def cost_figures(document):
    if isinstance(document, dict):
        return [f for k, v in document.items() if k not in NOT_COSTS for f in cost_figures(v)]
    if isinstance(document, list):
        return [f for v in document for f in cost_figures(v)]
    if isinstance(document, float):
        return [document]
    if isinstance(document, str):
        return DECIMAL.findall(document)
    return []


def broken(traffic, rng):
    """The week with one random envelope element broken: mismatched (the treated rows log
    another value) or incomplete (a random share of either arm's rows lose it), or a share
    of rows without tokens (no cost)."""
    kind = ["mismatch", "incomplete", "no cost"][int(rng.integers(0, 3))]
    # A random share of the rows, at least one.
    share = rng.random(traffic.height) < rng.uniform(0.001, 0.5)
    share[int(rng.integers(0, traffic.height))] = True
    lose = pl.Series(share)
    if kind == "no cost":
        return traffic.with_columns(
            input_tokens=pl.when(lose).then(None).otherwise(pl.col("input_tokens")),
            output_tokens=pl.when(lose).then(None).otherwise(pl.col("output_tokens")),
        ), "cost"
    element = [e for e in ENVELOPE if e != "model"][int(rng.integers(0, len(ENVELOPE) - 1))]
    if kind == "mismatch":
        other = pl.lit(True) if element == "streaming" else pl.lit("other")
        changed = (
            pl.when(pl.col("exposure_arm") == "treated").then(other).otherwise(pl.col(element))
        )
        return traffic.with_columns(changed.alias(element)), element
    return traffic.with_columns(
        pl.when(lose).then(None).otherwise(pl.col(element)).alias(element)
    ), element


@pytest.mark.slow
def test_a_broken_envelope_never_yields_a_cost_figure():
    # 300 random experiments (sizes, cuts, intents, budgets, quality verdicts), each with one
    # element broken: always ineligible naming it, and no cost figure in the document or
    # the message.
    started = time.perf_counter()
    rng = np.random.default_rng(331)
    n = 300
    for seed in range(n):
        cut = float(rng.choice([0.0, 0.2, 0.5]))
        traffic, element = broken(
            week(seed, tasks_per_day=int(rng.integers(5, 150)), cost_cut=cut), rng
        )
        budget = float(rng.uniform(0.001, 0.02))
        intent = [
            OPTIMIZE,
            decision_intent("required_migration", budget=budget, currency="USD"),
            decision_intent("product_improvement", budget=budget, currency="USD"),
            decision_intent("product_improvement"),
        ][int(rng.integers(0, 4))]
        result = live_cost(
            traffic,
            workspace_id="w1",
            epoch="e1",
            intent=intent,
            lever_changes="model",
            prices=prices(cut),
            quality_verdict=str(rng.choice(["superior", "not_established", "inferior"])),
            rng=seed,
        )
        assert result.verdict == INELIGIBLE, (seed, result.message)
        assert result.eligibility.element == element
        document = result.to_json()
        message = document.pop("message").replace(intent.words(), "the intent")
        assert cost_figures(document) == [], (seed, document)
        assert not DECIMAL.search(message), (seed, message)
    _report("broken envelopes ineligible with no cost figure", n, n, started)


@pytest.mark.slow
def test_a_budget_verdict_never_reads_as_savings():
    # 200 random budget claims (either budget intent, budgets around the treated cost per
    # task, sizes from insufficient to large, a cut or none, a parked quality instrument or
    # a broken envelope now and then): no saving, savings or saved in the document or message.
    started = time.perf_counter()
    rng = np.random.default_rng(332)
    n = 200
    verdicts: dict[str, int] = {}
    for seed in range(n):
        cut = float(rng.choice([0.0, 0.2, 0.5]))
        traffic = week(seed, tasks_per_day=int(rng.integers(2, 150)), cost_cut=cut)
        if rng.random() < 0.1:
            traffic, _ = broken(traffic, rng)
        kind = str(rng.choice(["required_migration", "product_improvement"]))
        intent = decision_intent(kind, budget=float(rng.uniform(0.002, 0.012)), currency="USD")
        result = live_cost(
            traffic,
            workspace_id="w1",
            epoch="e1",
            intent=intent,
            lever_changes="model",
            prices=prices(cut),
            quality_verdict=str(rng.choice(["superior", "not_established", "inferior", "parked"])),
            rng=seed,
            n_resamples=500,
        )
        verdicts[result.verdict] = verdicts.get(result.verdict, 0) + 1
        text = result.message + json.dumps(result.to_json())
        assert not SAVINGS.search(text), (seed, text)
    print(f"  budget verdicts: {dict(sorted(verdicts.items()))}")
    _report("budget claims with no savings word", n, n, started)
    assert {"within_budget", "over_budget", "budget_not_established"} <= set(verdicts)
