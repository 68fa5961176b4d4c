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
