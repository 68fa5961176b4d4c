"""Simulated live experiments whose logs are healthy or broken in a known way, assigned by the
real assignment library (the checks re-derive arms from the logged keys, so the arms must be
the library's).

Traffic: ``traces`` traces of 1-4 requests, each request one claim outcome, assigned per trace
(:func:`~eval_pipelines.core.lift.assignment.assign_many` of the trace id) under ``CONFIG``.
Request ``j`` of trace ``g`` is right when ``c + u_g + e_j > 0`` with ``u_g ~ N(0, s^2)`` and
``e_j ~ N(0, 1)``: the latent intra-trace correlation is ``s^2 / (1 + s^2)`` (``icc``), and
``c`` makes the marginal rate ``base_rate`` exactly in every arm (no true lift unless
``true_lift``). 5% of outcomes are unresolved.

Breakages:

``per_request``
    The logger writes a per-request key into ``cluster`` although the arm was assigned per
    trace or conversation (its ``key_source`` still says so): the request id for a trace, a
    ``conv-`` token of the request for a conversation.
``stamp_bias``
    The arm is stamped on the outcome path: a lever_holdout request that succeeded is logged
    as ``treated`` with this probability (0.24 gives the treated arm about +0.05).
``outcome_bias``
    A treated failure is logged as a success with this probability (0.125 gives about +0.05);
    arms, keys and counts are untouched.

Shapes: ``single_share`` makes a trace one request with that probability (else 2-4),
instead of 1-4 uniformly; ``key_source`` ``conversation`` logs each trace as a conversation
(``conv-`` tokens, one per conversation), and ``log_key_source=False`` leaves the
``key_source`` column null; ``marks`` logs what tells a later request of its unit: ``turn``
(1-based) for a conversation, ``child_span`` for a trace.

``with_truth`` adds ``true_outcome``, each request's outcome before any logging bias (null
where unresolved): what an outcome audit establishes.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from scipy import special

from eval_pipelines.core.lift.assignment import ARMS, LiftConfig, assign_many, fnv1a_32

CONFIG = LiftConfig("w1", "e1", 0.10, lever="memo-v2", lever_holdout_share=0.5)
SCHEMA = {
    "workspace_id": pl.String,
    "claim_type": pl.String,
    "situation_class": pl.String,
    "exposure_arm": pl.String,
    "exposure_epoch": pl.String,
    "source": pl.String,
    "cluster": pl.String,
    "key_source": pl.String,
    "request_id": pl.String,
    "outcome": pl.Boolean,
}


def experiment(
    seed: int,
    *,
    traces: int = 1_500,
    base_rate: float = 0.60,
    true_lift: float = 0.0,
    icc: float = 0.3,
    per_request: bool = False,
    stamp_bias: float = 0.0,
    outcome_bias: float = 0.0,
    config: LiftConfig = CONFIG,
    days: int = 1,
    with_truth: bool = False,
    single_share: float | None = None,
    key_source: str = "trace",
    log_key_source: bool = True,
    marks: bool = False,
) -> pl.DataFrame:
    rng = np.random.default_rng([19, seed])
    trace_ids = [f"t{seed}-{g}" for g in range(traces)]
    arms = np.array(
        [str(ARMS[int(c)]) for c in assign_many(config.workspace_id, trace_ids, config)]
    )
    if single_share is None:
        sizes = rng.integers(1, 5, traces)
    else:
        sizes = np.where(rng.random(traces) < single_share, 1, rng.integers(2, 5, traces))
    codes = np.repeat(np.arange(traces), sizes)
    turn = np.arange(codes.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    sd = math.sqrt(icc / (1.0 - icc))
    scale = math.sqrt(1.0 + sd**2)
    arm = arms[codes]
    rate = np.where(arm == "treated", base_rate + true_lift, base_rate)
    latent = special.ndtri(rate) * scale + rng.normal(0.0, sd, traces)[codes]
    right = latent + rng.standard_normal(codes.size) > 0
    truth = right.copy()
    if outcome_bias:
        right = right | ((arm == "treated") & (rng.random(codes.size) < outcome_bias))
    resolved = rng.random(codes.size) >= 0.05
    logged_arm = arm.copy()
    if stamp_bias:
        flip = (arm == "lever_holdout") & right & resolved & (rng.random(codes.size) < stamp_bias)
        logged_arm[flip] = "treated"
    request_ids = [f"r{seed}-{g}-{j}" for g, j in zip(codes.tolist(), turn.tolist(), strict=True)]
    keys = request_ids if per_request else [trace_ids[g] for g in codes.tolist()]
    conversation = key_source == "conversation"
    cluster = [_token(k) for k in keys] if conversation else keys
    n = codes.size
    turns = pl.Series("turn", (turn + 1).tolist() if marks and conversation else [None] * n)
    child = pl.Series(
        "child_span", (turn > 0).tolist() if marks and not conversation else [None] * n
    )
    frame = pl.DataFrame(
        {
            "workspace_id": [config.workspace_id] * n,
            "claim_type": ["fact"] * n,
            "situation_class": ["routine"] * n,
            "exposure_arm": logged_arm.tolist(),
            "exposure_epoch": [config.epoch] * n,
            "source": ["declared"] * n,
            "cluster": cluster,
            "key_source": [key_source if log_key_source else None] * n,
            "request_id": request_ids,
            "outcome": np.where(resolved, right, None).tolist(),
            # The day each trace arrived (0 .. days - 1), for looks at the running experiment.
            "day": rng.integers(0, days, traces)[codes],
        },
        schema={**SCHEMA, "day": pl.Int64},
    ).with_columns(turns.cast(pl.Int64), child.cast(pl.Boolean))
    if with_truth:
        frame = frame.with_columns(
            true_outcome=pl.Series(np.where(resolved, truth, None).tolist(), dtype=pl.Boolean)
        )
    return frame


def _token(key: str) -> str:
    """A ``conv-`` token of a key, shaped as the assignment library logs a conversation's."""
    return f"conv-{fnv1a_32(key.encode()):08x}"
