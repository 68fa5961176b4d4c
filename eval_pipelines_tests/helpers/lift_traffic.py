"""Simulated live traffic for the lift tests: a log file written through the real assignment
library with a known true lift."""

from __future__ import annotations

import dataclasses
import json
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines.core.lift.simulate import simulate_traffic

FIRST_DAY = date(2026, 11, 23)


def write_log(
    path: Path,
    config: LiftConfig,
    *,
    true_lift: float,
    days: int = 7,
    first_day: date = FIRST_DAY,
    conversations_per_day: int = 300,
    seed: int = 1,
    request_prefix: str = "",
    **options: Any,
) -> Path:
    """``request_prefix`` keeps the request ids of two simulations of the same days apart
    (a request id is stored once per workspace: the same id with other content is
    refused)."""
    rows = simulate_traffic(
        config,
        days=[first_day + timedelta(days=d) for d in range(days)],
        conversations_per_day=conversations_per_day,
        base_rate=0.6,
        true_lift=true_lift,
        rng=seed,
        **options,
    )
    for row in rows:
        row["request_id"] = request_prefix + row["request_id"]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


LEVER = LiftConfig("ws", "e1", 0.10, lever="memo-v2")


def lever_split() -> LiftConfig:
    """The split the checks use, stored as the workspace's settings; the first change from the
    defaults starts a new epoch (e2), so the logs are written for the epoch it returns."""
    from eval_pipelines.api import lift

    settings = lift.set_settings("ws", holdout_fraction=0.10, lever="memo-v2")
    return dataclasses.replace(LEVER, epoch=settings.epoch)


#: A price table where the treated arm's model tier costs a fifth of the baseline's.
PRICES = {
    "currency": "USD",
    "models": {"big-1": {"input": 3.0, "output": 15.0}, "small-1": {"input": 0.6, "output": 3.0}},
}
ENVELOPE = {
    "provider": "acme",
    "tools": "sha256:tools-v1",
    "response_format": "json_schema",
    "generation_params": "temperature=0",
    "streaming": False,
    "provider_policy": "zero-retention",
}


def with_cost(
    path: Path,
    *,
    treated_model: str = "small-1",
    control_model: str = "big-1",
    treated_envelope: dict[str, Any] | None = None,
    seed: int = 5,
) -> Path:
    """The log with each request's tokens (seeded, about 1,000 in and 200 out) and execution
    envelope: the treated arm on ``treated_model`` (and ``treated_envelope`` over the shared
    envelope), every other arm on ``control_model``."""
    import numpy as np

    generator = np.random.default_rng(seed)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        treated = row["exposure_arm"] == "treated"
        row.update(ENVELOPE)
        if treated and treated_envelope:
            row.update(treated_envelope)
        row["model"] = treated_model if treated else control_model
        row["input_tokens"] = int(generator.poisson(1000))
        row["output_tokens"] = int(generator.poisson(200))
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
