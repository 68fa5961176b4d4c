"""Confidence intervals for a binomial proportion."""

from __future__ import annotations

import math
from dataclasses import dataclass

# scipy.special.ndtri is the normal quantile scipy.stats.norm.ppf calls, without importing
# scipy.stats (slow to import, docs/benchmarks.md).
from scipy import special

from eval_pipelines.core.stats.arguments import check_probability


@dataclass(frozen=True)
class Interval:
    """A two-sided confidence interval.

    Attributes
    ----------
    low, high
        The bounds, ``0 <= low <= high <= 1`` for a proportion.
    confidence_level
        The nominal coverage, e.g. 0.95.
    """

    low: float
    high: float
    confidence_level: float


def wilson_interval(k: int, n: int, *, confidence_level: float = 0.95) -> Interval:
    """Wilson score interval for ``k`` successes in ``n`` trials.

    Parameters
    ----------
    k
        Number of successes, ``0 <= k <= n``.
    n
        Number of trials, ``n >= 1``.
    confidence_level
        Two-sided coverage in (0, 1).

    Returns
    -------
    Interval
        With ``low = 0`` exactly when ``k == 0`` and ``high = 1`` exactly when ``k == n``.

    Raises
    ------
    ValueError
        If ``n < 1``, ``k`` is outside ``[0, n]`` or ``confidence_level`` outside (0, 1).
        There is no interval for no trials: callers report ``insufficient_evidence`` instead.

    References
    ----------
    .. [1] E. B. Wilson, "Probable inference, the law of succession, and statistical
           inference", J. Am. Stat. Assoc. 22 (1927), 209-212.
    .. [2] R. G. Newcombe, "Two-sided confidence intervals for the single proportion:
           comparison of seven methods", Statistics in Medicine 17 (1998), 857-872.

    Examples
    --------
    >>> from eval_pipelines.core.stats import wilson_interval
    >>> interval = wilson_interval(45, 50)
    >>> print(f'{interval.low:.4f} {interval.high:.4f}')
    0.7864 0.9565
    """
    if n < 1:
        raise ValueError(f"n={n}: a Wilson interval needs at least one trial")
    if not 0 <= k <= n:
        raise ValueError(f"k={k}: must be between 0 and n={n}")
    check_probability(confidence_level, "confidence_level")
    z = float(special.ndtri(0.5 + confidence_level / 2.0))
    p_hat = k / n
    denominator = 1.0 + z * z / n
    centre = (p_hat + z * z / (2.0 * n)) / denominator
    half_width = z * math.sqrt(p_hat * (1.0 - p_hat) / n + z * z / (4.0 * n * n)) / denominator
    low = 0.0 if k == 0 else max(0.0, centre - half_width)
    high = 1.0 if k == n else min(1.0, centre + half_width)
    return Interval(low=low, high=high, confidence_level=confidence_level)
