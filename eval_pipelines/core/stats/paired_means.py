"""Paired difference of two means of a continuous figure (a cost per record), absolute and
relative, with cluster-bootstrap intervals that respect the grouping: the continuous-valued
sibling of :func:`~eval_pipelines.core.stats.bootstrap.paired_difference`, on its resampling."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from eval_pipelines.core.stats.bootstrap import (
    METHOD,
    BootstrapEstimate,
    _check_options,
    _cluster_codes,
    _percentile_interval,
    _resampled_sums,
    _unestimated,
)
from eval_pipelines.core.stats.clustered import _as_finite
from eval_pipelines.core.stats.intervals import Interval
from eval_pipelines.core.stats.policy import MIN_N


@dataclass(frozen=True)
class PairedMeanDifference(BootstrapEstimate):
    """Candidate mean minus baseline mean over the same units: ``estimate`` is
    ``candidate_mean - baseline_mean``; the interval, a cluster bootstrap (:data:`METHOD`).
    The other attributes are :class:`~eval_pipelines.core.stats.bootstrap.BootstrapEstimate`'s.

    Attributes
    ----------
    n
        Units compared (pairs).
    n_clusters
        Clusters resampled (``n`` when each unit is its own).
    baseline_mean, candidate_mean
        The two means over all units (None when there are none).
    relative
        ``candidate_mean / baseline_mean - 1``; None below the minimum sample or when the
        baseline's mean is not positive (no relative change of nothing).
    relative_interval
        Percentile interval of the same resamples' ``sum(candidate) / sum(baseline) - 1``;
        None with ``relative``, or when a resample's baseline sum is 0 (the ratio does not
        exist there, and dropping those resamples would bias the interval).
    """

    n: int
    n_clusters: int
    baseline_mean: float | None
    candidate_mean: float | None
    relative: float | None
    relative_interval: Interval | None


def paired_mean_difference(
    baseline: Sequence[float] | np.ndarray,
    candidate: Sequence[float] | np.ndarray,
    *,
    clusters: Sequence[Hashable] | np.ndarray | None = None,
    n_resamples: int = 2000,
    confidence_level: float = 0.95,
    rng: np.random.Generator | int | None = None,
    min_n: int = MIN_N,
) -> PairedMeanDifference:
    """Paired difference of means, and their ratio, with cluster-bootstrap intervals.

    Parameters
    ----------
    baseline, candidate
        1-d arrays of finite values of equal length, one pair per unit (e.g. each record's
        cost under the baseline and under the candidate).
    clusters
        1-d array of hashable group ids, one per unit; units that share an id are resampled
        together. None makes each unit its own cluster.
    n_resamples
        Bootstrap resamples, at least 1.
    confidence_level
        Two-sided coverage in (0, 1).
    rng
        A :class:`numpy.random.Generator`, or an int seed for one. The same seed gives the
        same intervals. None draws fresh entropy and is not reproducible.
    min_n
        Below this many units, or clusters, the estimates and intervals are None
        (``insufficient_evidence``); the means are always returned. At least 1.

    Returns
    -------
    PairedMeanDifference

    Notes
    -----
    With per-cluster sums ``B_g``, ``C_g`` and sizes ``m_g``, the difference is
    ``sum (C_g - B_g) / sum m_g`` and the relative difference ``sum C_g / sum B_g - 1``; each
    replicate recomputes both over the same ``G`` clusters drawn with replacement [1]_ [2]_,
    and each interval is the percentile interval of its replicates (linear interpolation),
    the resampling of :func:`~eval_pipelines.core.stats.bootstrap.paired_difference`. The
    units of a pair are never split, so the pairing removes what the two sides share (the
    record's length drives both costs) and the interval is that of the difference, far
    narrower than two separate intervals. Same limits as the paired difference: few
    clusters give a somewhat narrow interval, hence the minimum number of clusters; when
    every replicate equals the estimate, the interval is that point.

    References
    ----------
    .. [1] B. Efron and R. J. Tibshirani, "An Introduction to the Bootstrap", Chapman & Hall
           (1993), chapter 13 (percentile interval).
    .. [2] A. C. Davison and D. V. Hinkley, "Bootstrap Methods and their Application",
           Cambridge University Press (1997), section 3.8 (resampling clustered data).

    Examples
    --------
    >>> from eval_pipelines.core.stats.paired_means import paired_mean_difference
    >>> baseline = [1.0, 2.0, 3.0, 4.0] * 6
    >>> candidate = [0.6, 1.2, 1.8, 2.4] * 6
    >>> result = paired_mean_difference(baseline, candidate, n_resamples=500, rng=7)
    >>> result.estimate, round(result.relative, 3)
    (-1.0, -0.4)
    >>> print(f'{result.relative_interval.low:+.3f} {result.relative_interval.high:+.3f}')
    -0.400 -0.400
    """
    base, cand = _as_finite(baseline, "baseline"), _as_finite(candidate, "candidate")
    if base.shape != cand.shape:
        raise ValueError(
            f"baseline has {base.size} units and candidate {cand.size}: "
            "they must pair up unit by unit"
        )
    n = int(base.size)
    codes, n_clusters = _cluster_codes(clusters, n)
    _check_options(n_resamples, confidence_level, min_n)
    generator = np.random.default_rng(rng)

    counts_only = PairedMeanDifference(
        n=n,
        n_clusters=n_clusters,
        baseline_mean=float(base.mean()) if n else None,
        candidate_mean=float(cand.mean()) if n else None,
        relative=None,
        relative_interval=None,
        **_unestimated(n_resamples, confidence_level, METHOD),
    )
    if n < min_n or n_clusters < min_n:
        return counts_only

    base_sums = np.bincount(codes, weights=base, minlength=n_clusters)
    cand_sums = np.bincount(codes, weights=cand, minlength=n_clusters)
    sizes = np.bincount(codes, minlength=n_clusters).astype(np.float64)
    base_drawn, cand_drawn, sizes_drawn = _resampled_sums(
        (base_sums, cand_sums, sizes), int(n_resamples), generator
    )
    estimate = float((cand.sum() - base.sum()) / n)
    result = dataclasses.replace(
        counts_only,
        estimate=estimate,
        interval=_percentile_interval((cand_drawn - base_drawn) / sizes_drawn, confidence_level),
    )
    if base.sum() <= 0:
        return result
    return dataclasses.replace(
        result,
        relative=float(cand.sum() / base.sum() - 1.0),
        relative_interval=None
        if (base_drawn <= 0).any()
        else _percentile_interval(cand_drawn / base_drawn - 1.0, confidence_level),
    )
