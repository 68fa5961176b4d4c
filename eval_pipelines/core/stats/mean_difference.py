"""Difference of two means of continuous values (a cost per task, per record) between two
disjoint sets of clusters, with the two-sample cluster bootstrap of
:func:`~eval_pipelines.core.stats.aa.unpaired_difference`."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from eval_pipelines.core.stats.aa import _named_codes
from eval_pipelines.core.stats.bootstrap import (
    BootstrapEstimate,
    _check_options,
    _cluster_replicates,
    _percentile_interval,
    _unestimated,
)
from eval_pipelines.core.stats.intervals import Interval
from eval_pipelines.core.stats.policy import MIN_N

__all__ = ["METHOD", "PER", "MeanDifference", "unpaired_mean_difference"]

#: ``MeanDifference.method`` of every interval this module computes.
METHOD = "two-sample cluster bootstrap of means, percentile"

#: What a side's mean is per: its clusters (a cost per task) or its rows (per record).
PER = ("cluster", "row")


@dataclass(frozen=True)
class MeanDifference(BootstrapEstimate):
    """Mean of side B minus mean of side A, on two disjoint sets of clusters: ``estimate`` is
    ``mean_b - mean_a`` (None when either side has fewer than the minimum sample of rows or
    clusters); ``interval``, its two-sample cluster-bootstrap percentile interval
    (:data:`METHOD`). The other attributes are
    :class:`~eval_pipelines.core.stats.bootstrap.BootstrapEstimate`'s.

    Attributes
    ----------
    per
        ``cluster``: a side's mean is ``sum / clusters``; ``row``: ``sum / rows``.
    n_a, n_b
        Rows on each side.
    clusters_a, clusters_b
        Clusters on each side (``n_a``, ``n_b`` when ungrouped).
    sum_a, sum_b
        The sum of each side's values: raw sums, always given.
    mean_a, mean_b
        Each side's mean, or None below the minimum sample.
    relative_estimate
        ``mean_b / mean_a - 1``, or None below the minimum sample or when ``mean_a`` is 0.
    relative_interval
        Percentile interval of the replicates of ``mean_b / mean_a - 1``, or None with the
        relative estimate (or when a replicate of side A is 0).
    interval_a, interval_b
        Percentile interval of each side's mean alone (from the same replicates), or None
        below the minimum sample: a one-arm bound.
    """

    per: str
    n_a: int
    n_b: int
    clusters_a: int
    clusters_b: int
    sum_a: float
    sum_b: float
    mean_a: float | None = None
    mean_b: float | None = None
    relative_estimate: float | None = None
    relative_interval: Interval | None = None
    interval_a: Interval | None = None
    interval_b: Interval | None = None


def unpaired_mean_difference(
    a_values: Sequence[float] | np.ndarray,
    b_values: Sequence[float] | np.ndarray,
    *,
    a_clusters: Sequence[Hashable] | np.ndarray | None = None,
    b_clusters: Sequence[Hashable] | np.ndarray | None = None,
    per: str = "cluster",
    n_resamples: int = 2000,
    confidence_level: float = 0.95,
    rng: np.random.Generator | int | None = None,
    min_n: int = MIN_N,
) -> MeanDifference:
    """Difference of two means of continuous values, with a cluster-bootstrap interval.

    Parameters
    ----------
    a_values, b_values
        1-d arrays of finite numbers (any lengths): one value per row of side A, and of
        side B (e.g. each request's cost).
    a_clusters, b_clusters
        1-d arrays of hashable group ids, one per row of that side. Rows of one side that
        share an id are resampled together. None makes each row its own cluster. The two
        sides are coded separately: the same id on both sides names two clusters.
    per
        ``cluster``: a side's mean is the sum of its values over its number of clusters
        (e.g. a cost per task, the task being the cluster); ``row``: over its number of
        rows (a cost per record).
    n_resamples
        Bootstrap resamples, at least 1 (each side is resampled this many times).
    confidence_level
        Two-sided coverage in (0, 1).
    rng
        A :class:`numpy.random.Generator`, or an int seed for one. None draws fresh entropy
        and is not reproducible.
    min_n
        Below this many rows, or clusters, on either side every mean, estimate and interval
        is None (``insufficient_evidence``); counts and raw sums are always returned.

    Returns
    -------
    MeanDifference

    Raises
    ------
    ValueError
        When a value is not a finite number, the cluster ids do not match the values, or an
        option is out of range (each message names the parameter).

    Notes
    -----
    With per-cluster sums ``Y_g`` and sizes ``m_g`` a side's mean is ``sum Y_g / G``
    (``per="cluster"``) or ``sum Y_g / sum m_g`` (``per="row"``, the ratio estimator). A
    replicate draws ``G_a`` clusters with replacement from side A and, independently, ``G_b``
    from side B, and recomputes each side's mean [1]_ [2]_: the engine of
    :func:`~eval_pipelines.core.stats.aa.unpaired_difference` with values in place of
    right/wrong. The intervals are percentile intervals (linear interpolation) of the
    replicates of ``mean_b - mean_a``, of ``mean_b / mean_a - 1`` and of each side's mean.

    The draws are made side A first, all ``n_resamples`` of them, then side B, in the
    blocks of :func:`~eval_pipelines.core.stats.bootstrap.paired_difference`: with
    ``per="cluster"`` and at most 1,048 clusters a side at 2,000 resamples this is the order
    in which ``scipy.stats.bootstrap(paired=False)`` draws two samples, so feeding it the
    per-cluster sums gives the same interval with the same generator (the tests check it).

    References
    ----------
    .. [1] B. Efron and R. J. Tibshirani, "An Introduction to the Bootstrap", Chapman & Hall
           (1993), section 8.3 (two-sample problems) and chapter 13 (percentile interval).
    .. [2] A. C. Davison and D. V. Hinkley, "Bootstrap Methods and their Application",
           Cambridge University Press (1997), sections 3.2 (several samples) and 3.8
           (resampling clustered data).

    Examples
    --------
    >>> from eval_pipelines.core.stats.mean_difference import unpaired_mean_difference
    >>> a = [1.0, 2.0, 3.0, 4.0] * 10
    >>> b = [0.5, 1.5, 2.5, 3.5] * 10
    >>> result = unpaired_mean_difference(a, b, n_resamples=500, rng=7)
    >>> result.mean_a, result.mean_b, result.estimate, round(result.relative_estimate, 6)
    (2.5, 2.0, -0.5, -0.2)
    >>> print(f'{result.interval.low:+.3f} {result.interval.high:+.3f}')
    -0.988 -0.025
    """
    if per not in PER:
        raise ValueError(f"per={per!r}: must be one of {', '.join(PER)}")
    a = _as_values(a_values, "a_values")
    b = _as_values(b_values, "b_values")
    codes_a, g_a = _named_codes(a_clusters, a.size, "a_clusters")
    codes_b, g_b = _named_codes(b_clusters, b.size, "b_clusters")
    _check_options(n_resamples, confidence_level, min_n)
    generator = np.random.default_rng(rng)

    counts_only = MeanDifference(
        per=per,
        n_a=int(a.size),
        n_b=int(b.size),
        clusters_a=g_a,
        clusters_b=g_b,
        sum_a=float(a.sum()),
        sum_b=float(b.sum()),
        **_unestimated(n_resamples, confidence_level, METHOD),
    )
    if min(a.size, b.size, g_a, g_b) < min_n:
        return counts_only

    sums_a, sizes_a = _cluster_sums(a, codes_a, g_a, per)
    sums_b, sizes_b = _cluster_sums(b, codes_b, g_b, per)
    mean_a = float(sums_a.sum() / sizes_a.sum())
    mean_b = float(sums_b.sum() / sizes_b.sum())
    replicates_a = _cluster_replicates(sums_a, sizes_a, int(n_resamples), generator)
    replicates_b = _cluster_replicates(sums_b, sizes_b, int(n_resamples), generator)

    relative_estimate = relative_interval = None
    if mean_a != 0.0:
        relative_estimate = mean_b / mean_a - 1.0
        if np.all(replicates_a != 0.0):
            relative_interval = _percentile_interval(
                replicates_b / replicates_a - 1.0, confidence_level
            )
    return dataclasses.replace(
        counts_only,
        estimate=mean_b - mean_a,
        interval=_percentile_interval(replicates_b - replicates_a, confidence_level),
        mean_a=mean_a,
        mean_b=mean_b,
        relative_estimate=relative_estimate,
        relative_interval=relative_interval,
        interval_a=_percentile_interval(replicates_a, confidence_level),
        interval_b=_percentile_interval(replicates_b, confidence_level),
    )


def _as_values(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name}: must be 1-d, got shape {array.shape}")
    if array.size and array.dtype.kind not in "iuf":
        raise ValueError(f"{name}: must hold numbers, got dtype {array.dtype}")
    array = array.astype(np.float64)
    if not np.isfinite(array).all():
        bad = array[~np.isfinite(array)][0]
        raise ValueError(f"{name}: must hold finite numbers, got {bad}")
    return array


def _cluster_sums(
    values: np.ndarray, codes: np.ndarray, n_clusters: int, per: str
) -> tuple[np.ndarray, np.ndarray]:
    """Each cluster's sum of values, and its weight in the mean: 1 per cluster, or its rows."""
    sums = np.bincount(codes, weights=values, minlength=n_clusters)
    if per == "cluster":
        return sums, np.ones(n_clusters, dtype=np.float64)
    return sums, np.bincount(codes, minlength=n_clusters).astype(np.float64)
