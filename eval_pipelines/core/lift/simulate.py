"""Simulated live traffic with a known true lift, stamped by the real assignment library: the
demo's week of logs and the tests' ground truth.

Each conversation (a trace id, or for a share of them an untagged chat whose system prompt
embeds the time) has 1-4 requests, each one claim outcome. A conversation has its own
difficulty (a normal effect on the log-odds scale, so its requests are correlated: the
cluster bootstrap is needed). The treated arm's success probability is the control's plus
``true_lift`` (clipped to [0, 1]); every other arm is served the frozen baseline. A share of
outcomes is still unresolved (censored).

With ``cost`` (a :class:`CostProfile`), each row also logs what its invocation cost and its
execution envelope (:mod:`eval_pipelines.core.lift.cost_columns`): tokens in and out drawn
around the arm's means, with a conversation's own scale (its requests are correlated), and
the arm's model and envelope. These draws come from a generator of their own (seeded by
``CostProfile.seed``), so the outcomes, arms and ids are the same with or without costs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np

from eval_pipelines.core.lift.assignment import LiftConfig, Message, Request, assign

UNTAGGED_SHARE = 0.3
CENSORED_SHARE = 0.05
SITUATIONS = ("single_line", "multi_line")
#: The envelope every simulated invocation runs in, unless an arm says otherwise.
ENVELOPE = {
    "model": "tier-large",
    "provider": "acme",
    "tools": "tools-3f9a",
    "response_format": "json_schema",
    "generation_params": "temperature-zero",
    "streaming": False,
    "provider_policy": "zero-retention",
}


@dataclass(frozen=True)
class ArmCost:
    """What one arm's invocations use: mean tokens in and out per request, and the envelope
    elements it changes from :data:`ENVELOPE` (e.g. ``{"model": "tier-small"}``, or
    ``{"tools": "none"}`` for an arm that drops the tool definitions)."""

    input_tokens: float = 1_200.0
    output_tokens: float = 150.0
    envelope: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CostProfile:
    """Costs and envelopes to log: ``treated`` for the treated arm, ``baseline`` for every
    other arm (served the frozen baseline); ``conversation_sd`` the spread of a
    conversation's scale (log scale), ``token_sd`` a request's own; ``seed`` the cost draws'
    generator."""

    treated: ArmCost = ArmCost()
    baseline: ArmCost = ArmCost()
    conversation_sd: float = 0.3
    token_sd: float = 0.4
    seed: int = 0


def _cost_columns(
    profile: CostProfile, arm: str, scale: float, generator: np.random.Generator
) -> dict[str, Any]:
    """One request's tokens (around its arm's means, times its conversation's ``scale``) and
    envelope."""
    served = profile.treated if arm == "treated" else profile.baseline
    noise = generator.lognormal(0.0, profile.token_sd, 2)
    return {
        "input_tokens": int(round(served.input_tokens * scale * noise[0])),
        "output_tokens": int(round(served.output_tokens * scale * noise[1])),
        **ENVELOPE,
        **served.envelope,
    }


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
    cost: CostProfile | None = None,
) -> list[dict[str, Any]]:
    """Log rows (the ingest schema) for ``days`` of traffic of one workspace; with ``marks``,
    each row also says whether its request is a later one of its conversation (``turn``) or
    trace (``child_span``); with ``cost``, what its invocation cost (tokens) and its
    envelope."""
    generator = np.random.default_rng(rng)
    cost_generator = np.random.default_rng([31, cost.seed]) if cost is not None else None
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
            scale = 1.0
            if cost is not None and cost_generator is not None:
                scale = float(cost_generator.lognormal(0.0, cost.conversation_sd))
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
                if cost is not None and cost_generator is not None:
                    marked |= _cost_columns(cost, str(assignment.arm), scale, cost_generator)
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
