"""A week of simulated live traffic with costs, for the cost bar's simulations: many
experiments, so drawn with numpy in one go (the cost bar runs no assignment check, so the
arms are drawn directly, half and half).

Each task (the claim's cluster) has 1-4 requests and a scale of its own (lognormal, sd
``task_sd``): its requests' token counts are correlated. A request's tokens in and out are
``1,200`` and ``150`` times its task's scale times its own lognormal noise (sd 0.4). The
lever_holdout arm runs ``tier-large``; the treated arm ``tier-small`` when ``cost_cut`` is not
0, priced ``1 - cost_cut`` times tier-large's price per token (the same tokens): the true
cost per task is then exactly ``1 - cost_cut`` times the control's. Every row logs the same
envelope but for the model. 5% of outcomes are unresolved (the outcome itself is noise: the
cost bar does not read it).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from eval_pipelines.core.lift.prices import PriceTable, parse_price_table

ENVELOPE = {
    "provider": "acme",
    "tools": "tools-3f9a",
    "response_format": "json_schema",
    "generation_params": "temperature-zero",
    "streaming": False,
    "provider_policy": "zero-retention",
}
LARGE = {"input": 3.0, "output": 15.0}


def prices(cost_cut: float) -> PriceTable:
    """tier-large's prices, and tier-small's at ``1 - cost_cut`` of them."""
    small = {side: price * (1.0 - cost_cut) for side, price in LARGE.items()}
    return parse_price_table(
        {"currency": "USD", "models": {"tier-large": LARGE, "tier-small": small}}
    )


def week(
    seed: int,
    *,
    tasks_per_day: int = 200,
    days: int = 7,
    cost_cut: float = 0.0,
    task_sd: float = 0.3,
) -> pl.DataFrame:
    """The log rows of one experiment, with a ``day`` column (0-based)."""
    rng = np.random.default_rng([33, seed])
    tasks = tasks_per_day * days
    treated = rng.random(tasks) < 0.5
    sizes = rng.integers(1, 5, tasks)
    task = np.repeat(np.arange(tasks), sizes)
    scale = rng.lognormal(0.0, task_sd, tasks)[task]
    n = task.size
    input_tokens = np.rint(1_200 * scale * rng.lognormal(0.0, 0.4, n)).astype(np.int64)
    output_tokens = np.rint(150 * scale * rng.lognormal(0.0, 0.4, n)).astype(np.int64)
    resolved = rng.random(n) >= 0.05
    outcome = np.where(resolved, rng.random(n) < 0.6, None)
    arm = np.where(treated[task], "treated", "lever_holdout")
    model = np.where(treated[task] & (cost_cut != 0.0), "tier-small", "tier-large")
    return pl.DataFrame(
        {
            "workspace_id": "w1",
            "claim_type": "coding",
            "situation_class": "single",
            "exposure_arm": arm,
            "exposure_epoch": "e1",
            "source": "declared",
            "cluster": [f"t{seed}-{g}" for g in task],
            "outcome": pl.Series(outcome.tolist(), dtype=pl.Boolean),
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "model": model,
            **{name: pl.repeat(value, n, eager=True) for name, value in ENVELOPE.items()},
            "day": task // tasks_per_day,
        }
    )
