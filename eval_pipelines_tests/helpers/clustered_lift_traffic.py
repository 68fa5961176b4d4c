"""Live-lift traffic with a known truth for the core's lift tests: clusters of requests whose
outcomes share a random effect, so the true per-request rates and lift are known exactly."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from scipy import special

COLUMNS = (
    "workspace_id",
    "claim_type",
    "situation_class",
    "exposure_arm",
    "exposure_epoch",
    "source",
    "cluster",
    "outcome",
)


def simulate_traffic(
    rng,
    *,
    clusters=4_000,
    control_rate=0.60,
    treated_rate=0.66,
    cluster_sd=0.8,
    censored=0.10,
    workspace_id="w1",
    epoch="e1",
    arms=("treated", "lever_holdout"),
    prefix="k",
):
    """Live traffic of ``clusters`` clusters of 1-5 requests, each cluster in one arm.

    Cluster ``g`` goes to ``arms[0]`` or ``arms[1]`` with probability 1/2 (assignment is
    per cluster, as FNV bucketing of the cluster key makes it). Request ``i`` of cluster
    ``g`` is right when ``c_arm + u_g + e_i > 0`` with ``u_g ~ N(0, cluster_sd^2)`` shared
    by the cluster and ``e_i ~ N(0, 1)``, so outcomes within a cluster are correlated and
    the marginal per-request rate is ``Phi(c_arm / sqrt(1 + cluster_sd^2))``: ``c_arm`` is
    set to make it ``control_rate`` and ``treated_rate`` exactly. Cluster size is
    independent of ``u_g``, so the ratio estimator's target is that rate, and the true lift
    is ``treated_rate - control_rate``. A share ``censored`` of requests, at random, is
    still unresolved (null outcome).
    """
    sizes = rng.integers(1, 6, clusters)
    codes = np.repeat(np.arange(clusters), sizes)
    first = (rng.random(clusters) < 0.5)[codes]
    scale = math.sqrt(1.0 + cluster_sd**2)
    shift = np.where(first, special.ndtri(treated_rate), special.ndtri(control_rate)) * scale
    latent = shift + rng.normal(0.0, cluster_sd, clusters)[codes] + rng.standard_normal(codes.size)
    outcome = np.where(rng.random(codes.size) < censored, None, latent > 0)
    n = codes.size
    return pl.DataFrame(
        {
            "workspace_id": [workspace_id] * n,
            "claim_type": ["fact"] * n,
            "situation_class": ["routine"] * n,
            "exposure_arm": np.where(first, arms[0], arms[1]).tolist(),
            "exposure_epoch": [epoch] * n,
            "source": ["declared"] * n,
            "cluster": [f"{prefix}{code}" for code in codes],
            "outcome": outcome.tolist(),
        },
        schema={name: pl.Boolean if name == "outcome" else pl.String for name in COLUMNS},
    )
