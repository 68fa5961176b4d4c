"""Simulated live traffic with a known true lift, stamped by the real assignment library: the
demo's week of logs and the tests' ground truth.

Each conversation (a trace id, or for a share of them an untagged chat whose system prompt
embeds the time) has 1-4 requests, each one claim outcome. A conversation has its own
difficulty (a normal effect on the log-odds scale, so its requests are correlated: the
cluster bootstrap is needed). The treated arm's success probability is the control's plus
``true_lift`` (clipped to [0, 1]); every other arm is served the frozen baseline. A share of
outcomes is still unresolved (censored).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np

from eval_pipelines.core.lift.assignment import LiftConfig, Message, Request, assign

UNTAGGED_SHARE = 0.3
CENSORED_SHARE = 0.05
SITUATIONS = ("single_line", "multi_line")


def _logit(p: float) -> float:
    return float(np.log(p / (1 - p)))


def simulate_traffic(
    config: LiftConfig,
    *,
    days: list[date],
    conversations_per_day: int,
    base_rate: float,
    true_lift: float,
    rng: np.random.Generator | int,
    claim_type: str = "invoice_coding",
    cluster_sd: float = 0.8,
    baseline_head: str = "baseline-7f3a",
    app_config: str = "cfg-1",
    marks: bool = False,
) -> list[dict[str, Any]]:
    """Log rows (the ingest schema) for ``days`` of traffic of one workspace; with ``marks``,
    each row also says whether its request is a later one of its conversation (``turn``) or
    trace (``child_span``)."""
    generator = np.random.default_rng(rng)
    rows: list[dict[str, Any]] = []
    for day in days:
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        for i in range(conversations_per_day):
            # Conversations start before 23:00, so all their turns fall on their own day.
            at = start + timedelta(seconds=int(generator.integers(0, 82_800)))
            untagged = generator.random() < UNTAGGED_SHARE
            turns = int(generator.integers(1, 5))
            effect = generator.normal(0.0, cluster_sd)
            situation = SITUATIONS[int(generator.integers(0, len(SITUATIONS)))]
            opening = f"Please code invoice {day.isoformat()}-{i} from {situation}"
            for turn in range(turns):
                request_id = f"req-{day.isoformat()}-{i}-{turn}"
                if untagged:
                    # The system prompt embeds the time: it must not split the conversation.
                    system = Message("system", f"You are a coder. Now: {at.isoformat()} +{turn}")
                    history = [system, Message("user", opening)]
                    history += [Message("assistant", "ok"), Message("user", "next")] * turn
                    request = Request(
                        config.workspace_id, messages=tuple(history), request_id=request_id
                    )
                else:
                    request = Request(config.workspace_id, trace_id=f"trace-{day.isoformat()}-{i}")
                assignment = assign(request, config)
                p = 1.0 / (1.0 + np.exp(-(_logit(base_rate) + effect)))
                if assignment.arm == "treated":
                    p = min(1.0, max(0.0, p + true_lift))
                resolved = generator.random() >= CENSORED_SHARE
                outcome = bool(generator.random() < p) if resolved else None
                marked: dict[str, Any] = {}
                if marks:
                    marked = {"turn": turn + 1} if untagged else {"child_span": turn > 0}
                rows.append(
                    {
                        "timestamp": (at + timedelta(minutes=turn)).isoformat(),
                        "request_id": request_id,
                        "workspace_id": config.workspace_id,
                        "cluster": assignment.cluster,
                        "exposure_arm": str(assignment.arm),
                        "exposure_epoch": assignment.epoch,
                        "claim_type": claim_type,
                        "situation_class": situation,
                        "source": "declared",
                        "outcome": outcome,
                        "candidate": config.lever if assignment.arm == "treated" else None,
                        "baseline_head": baseline_head,
                        "app_config": app_config,
                        "key_source": assignment.key_source,
                        **marked,
                    }
                )
    return rows
