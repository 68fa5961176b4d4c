"""A ratio of sums over units grouped in clusters, with a cluster-bootstrap interval: the mean
of per-record figures (one per record, its trials kept together) and pooled rates such as
disagreeing pairs over pairs."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from eval_pipelines.core.stats.bootstrap import (
    BootstrapEstimate,
    _check_options,
    _cluster_codes,
    _cluster_replicates,
    _percentile_interval,
    _unestimated,
)
from eval_pipelines.core.stats.policy import MIN_N

#: ``ClusterRatio.method`` for every interval this module computes.
METHOD = "cluster bootstrap, percentile"


@dataclass(frozen=True)
class ClusterRatio(BootstrapEstimate):
    """``sum(numerators) / sum(denominators)`` over units resampled by cluster: ``estimate``
    is ``numerator / denominator`` (None below the minimum sample of units or clusters); the
    interval, a cluster-bootstrap percentile interval (:data:`METHOD`). The other attributes
    are :class:`~eval_pipelines.core.stats.bootstrap.BootstrapEstimate`'s.

    Attributes
    ----------
    numerator, denominator
        The two sums over all units (always present).
    n
        Units (e.g. records).
    n_clusters
        Clusters resampled (``n`` when each unit is its own).
    """

    numerator: float
    denominator: float
    n: int
    n_clusters: int


def cluster_ratio(
    numerators: Sequence[float] | np.ndarray,
    denominators: Sequence[float] | np.ndarray | None = None,
    *,
    clusters: Sequence[Hashable] | np.ndarray | None = None,
    n_resamples: int = 2000,
    confidence_level: float = 0.95,
    rng: np.random.Generator | int | None = None,
    min_n: int = MIN_N,
) -> ClusterRatio:
    """Ratio estimator ``sum y_i / sum m_i`` with a cluster-bootstrap confidence interval.

    Parameters
    ----------
    numerators
        1-d array of finite values ``y_i``, one per unit (a record's share of right trials,
        its count of disagreeing trial pairs, ...).
    denominators
        1-d array of positive finite weights ``m_i``, one per unit (its number of trial
        pairs, ...). None gives every unit weight 1, which makes the estimate the mean of
        ``numerators``.
    clusters
        1-d array of hashable group ids, one per unit. Units that share an id are resampled
        together. None makes each unit its own cluster.
    n_resamples
        Bootstrap resamples, at least 1.
    confidence_level
        Two-sided coverage in (0, 1).
    rng
        A :class:`numpy.random.Generator`, or an int seed for one. The same seed gives the
        same interval. None draws fresh entropy and is not reproducible.
    min_n
        Below this many units, or clusters, the estimate and interval are None
        (``insufficient_evidence``); the sums are always returned. At least 1.

    Returns
    -------
    ClusterRatio

    Notes
    -----
    With cluster sums ``Y_g = sum y_i`` and ``M_g = sum m_i`` the estimate is
    ``sum Y_g / sum M_g``; each replicate recomputes that ratio over ``G`` clusters drawn with
    replacement from the ``G`` observed ones [1]_ [2]_, and the interval is the percentile
    interval of the replicates (linear interpolation), as in
    :func:`~eval_pipelines.core.stats.bootstrap.paired_difference` (same resampling, same
    block stream). Units of one cluster are never split, so whatever is correlated inside a
    cluster (the trials of one record, the records held out together) widens the interval.

    To first order the bootstrap variance is the linearised (cluster-robust, "sandwich")
    variance ``sum_g (Y_g - r M_g)^2 / (sum M_g)^2`` [3]_ without the small-sample factor
    ``G / (G - 1)``: with few clusters the percentile interval is somewhat too narrow (the
    same limit as the paired interval's), hence the minimum number of clusters. When every
    replicate equals the estimate (no variation between clusters) the interval is that point.

    References
    ----------
    .. [1] B. Efron and R. J. Tibshirani, "An Introduction to the Bootstrap", Chapman & Hall
           (1993), chapter 13 (percentile interval).
    .. [2] A. C. Davison and D. V. Hinkley, "Bootstrap Methods and their Application",
           Cambridge University Press (1997), section 3.8 (resampling clustered data).
    .. [3] A. C. Cameron and D. L. Miller, "A Practitioner's Guide to Cluster-Robust
           Inference", Journal of Human Resources 50(2) (2015), 317-372.

    Examples
    --------
    >>> from eval_pipelines.core.stats.clustered import cluster_ratio
    >>> share_right = [1.0, 0.5, 1.0, 0.0] * 6
    >>> clusters = [i // 2 for i in range(24)]  # two records per cluster
    >>> result = cluster_ratio(share_right, clusters=clusters, n_resamples=500, rng=7, min_n=10)
    >>> result.estimate, result.n_clusters
    (0.625, 12)
    >>> print(f'{result.interval.low:.3f} {result.interval.high:.3f}')
    0.562 0.688
    """
    values = _as_finite(numerators, "numerators")
    n = int(values.size)
    if denominators is None:
        weights = np.ones(n, dtype=np.float64)
    else:
        weights = _as_finite(denominators, "denominators")
        if weights.shape != values.shape:
            raise ValueError(
                f"denominators has {weights.size} units and numerators {n}: one each per unit"
            )
        if n and not (weights > 0).all():
            raise ValueError("denominators: every unit's weight must be positive")
    codes, n_clusters = _cluster_codes(clusters, n)
    _check_options(n_resamples, confidence_level, min_n)
    generator = np.random.default_rng(rng)

    total, weight = float(values.sum()), float(weights.sum())
    counts_only = ClusterRatio(
        numerator=total,
        denominator=weight,
        n=n,
        n_clusters=n_clusters,
        **_unestimated(n_resamples, confidence_level, METHOD),
    )
    if n < min_n or n_clusters < min_n:
        return counts_only
    cluster_sums = np.bincount(codes, weights=values, minlength=n_clusters)
    cluster_weights = np.bincount(codes, weights=weights, minlength=n_clusters)
    replicates = _cluster_replicates(cluster_sums, cluster_weights, int(n_resamples), generator)
    interval = _percentile_interval(replicates, confidence_level)
    return dataclasses.replace(counts_only, estimate=total / weight, interval=interval)


def _as_finite(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name}: must be 1-d, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name}: must hold finite numbers")
    return array
