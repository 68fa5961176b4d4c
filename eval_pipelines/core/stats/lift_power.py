"""The minimum detectable effect of an unpaired (two-arm) comparison from its standard error.

:func:`~eval_pipelines.core.stats.power.minimum_detectable_effect` answers the question for a
paired McNemar design. A live lift compares two disjoint arms with a two-sample cluster
bootstrap (:func:`~eval_pipelines.core.stats.aa.unpaired_difference`), whose only measure of
spread is its interval; these two functions turn that interval into the standard error and the
standard error into the effect the comparison could have detected. A power diagnostic, never a
verdict.
"""

from __future__ import annotations

import math

from scipy import special

from eval_pipelines.core.stats.arguments import check_probability
from eval_pipelines.core.stats.intervals import Interval

__all__ = ["interval_standard_error", "minimum_detectable_effect_from_se"]


def interval_standard_error(interval: Interval) -> float:
    """Normal-equivalent standard error of a two-sided interval: its width over ``2 z``.

    Parameters
    ----------
    interval
        A two-sided interval with ``low <= high`` and its nominal ``confidence_level``.

    Returns
    -------
    float
        ``(high - low) / (2 z)`` with ``z`` the upper ``(1 - confidence_level) / 2`` normal
        quantile: the standard deviation a normal sampling distribution with this central
        interval would have. For a percentile bootstrap interval it is the bootstrap standard
        error read off the replicates' quantiles, robust to a few outlying replicates. 0.0 for
        a single-point interval (the bootstrap saw no variation).

    Raises
    ------
    ValueError
        If ``high < low`` or the confidence level is outside (0, 1).

    References
    ----------
    .. [1] B. Efron and R. J. Tibshirani, "An Introduction to the Bootstrap", Chapman & Hall
           (1993), sections 12.2 and 13.3 (normal and percentile intervals).

    Examples
    --------
    >>> from eval_pipelines.core.stats import Interval
    >>> from eval_pipelines.core.stats.lift_power import interval_standard_error
    >>> round(interval_standard_error(Interval(low=-0.02, high=0.06, confidence_level=0.95)), 6)
    0.020409
    """
    level = interval.confidence_level
    check_probability(level, "confidence_level")
    if not interval.low <= interval.high:
        raise ValueError(f"interval [{interval.low}, {interval.high}]: low must not exceed high")
    z = float(-special.ndtri((1.0 - level) / 2.0))
    return (interval.high - interval.low) / (2.0 * z)


def minimum_detectable_effect_from_se(
    standard_error: float, *, alpha: float = 0.05, power: float = 0.8
) -> float:
    """Smallest true difference a two-sided test with this standard error detects with ``power``.

    Parameters
    ----------
    standard_error
        Standard error of the estimated difference, at least 0 (finite).
    alpha
        Two-sided significance level in (0, 1).
    power
        Required power in (0, 1).

    Returns
    -------
    float
        ``(z_{1 - alpha / 2} + z_{power}) * standard_error``: 2.8016 standard errors at the
        default 5% two-sided level and 80% power. The far tail (rejecting in the wrong
        direction) is ignored, as in [1]_ [2]_.

    Raises
    ------
    ValueError
        If ``standard_error`` is negative or not finite, or ``alpha`` or ``power`` is outside
        (0, 1).

    Notes
    -----
    A test that rejects when ``|estimate| > z_{1 - alpha / 2} SE`` has, against a true
    difference ``d > 0`` with a normal estimate, power
    ``Phi(d / SE - z_{1 - alpha / 2})`` from the near tail; setting it to ``power`` gives the
    formula. With the interval's lower bound above zero as the rule (superiority), the same
    figure is the true lift that rule finds with probability ``power``.

    References
    ----------
    .. [1] H. S. Bloom, "Minimum detectable effects: a simple way to report the statistical
           power of experimental designs", Evaluation Review 19 (1995), 547-556.
    .. [2] E. Duflo, R. Glennerster and M. Kremer, "Using randomization in development
           economics research: a toolkit", Handbook of Development Economics 4 (2007),
           section 4.1.

    Examples
    --------
    >>> from eval_pipelines.core.stats.lift_power import minimum_detectable_effect_from_se
    >>> round(minimum_detectable_effect_from_se(0.01), 6)
    0.028016
    """
    if not math.isfinite(standard_error) or standard_error < 0.0:
        raise ValueError(f"standard_error={standard_error}: must be finite and at least 0")
    check_probability(alpha, "alpha")
    check_probability(power, "power")
    z_alpha = float(-special.ndtri(alpha / 2.0))
    z_power = float(special.ndtri(power))
    # A power below alpha / 2 is reached by no difference at all (the multiplier turns
    # negative): 0, as in power.minimum_detectable_effect.
    return max(0.0, (z_alpha + z_power) * standard_error)
