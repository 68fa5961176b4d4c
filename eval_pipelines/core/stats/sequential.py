"""Always-valid intervals: a confidence sequence that may be read at every look.

A fixed-sample 95% interval read every day and acted on the first day it excludes zero
confirms a null effect far more often than 2.5% of the time (docs/lift.md gives the rate
measured over a week of daily reports). A confidence sequence covers the true value at every
sample size at once, with probability at least ``1 - alpha``, so any number of looks, and
stopping at any of them, keeps the false-confirmation rate at its stated level.

This is the asymptotic confidence sequence of Waudby-Smith et al. [1]_ built on the two-sided
normal-mixture boundary of Howard et al. [2]_, the one GrowthBook's sequential engine uses
[3]_. For an estimate from ``n`` independent units whose standard error is ``se`` (so the
per-unit standard deviation is ``sigma = se * sqrt(n)``), the interval at ``n`` is
``estimate +- sigma * sqrt(2 (n rho^2 + 1) / (n^2 rho^2) * log(sqrt(n rho^2 + 1) / alpha))``.
The mixing parameter ``rho`` makes the sequence narrowest at ``n_star`` units:
``rho^2 = (-2 log alpha + log(-2 log alpha + 1)) / n_star``. It is fixed in advance, never
chosen from the data; any value keeps the guarantee.

Derivation (checked numerically in the tests): for standardised sums ``S_n`` the mixture
``integral exp(lambda S_n - lambda^2 n / 2) dN(lambda; 0, rho^2)
= exp(rho^2 S_n^2 / (2 (1 + n rho^2))) / sqrt(1 + n rho^2)`` is a nonnegative martingale of
mean 1, so by Ville's inequality it exceeds ``1 / alpha`` at some ``n`` with probability at
most ``alpha``; solving for ``|S_n| / n`` gives the half-width above.

References
----------
.. [1] I. Waudby-Smith, D. Arbour, R. Sinha, E. H. Kennedy and A. Ramdas, "Time-uniform
       central limit theory and asymptotic confidence sequences", Annals of Statistics
       (2024); arXiv:2103.06476, eq. (2.9) and (2.10).
.. [2] S. R. Howard, A. Ramdas, J. McAuliffe and J. Sekhon, "Time-uniform, nonparametric,
       nonasymptotic confidence sequences", Annals of Statistics 49(2), 1055-1080 (2021).
.. [3] GrowthBook documentation, "Sequential Testing"
       (https://docs.growthbook.io/statistics/sequential).
"""

from __future__ import annotations

import math

__all__ = ["DEFAULT_N_STAR", "mixing_rho_squared", "sequence_half_width", "sequence_multiplier"]

#: Units (clusters) at which the live lift's sequence is tuned to be narrowest.
DEFAULT_N_STAR = 2_000


def _check(name: str, value: float, *, low: float, high: float = math.inf) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and low < value < high):
        raise ValueError(f"{name}={value!r}: must be a finite number in ({low}, {high})")


def mixing_rho_squared(n_star: float, alpha: float) -> float:
    """``rho^2`` that makes the sequence narrowest at ``n_star`` units [1]_ (eq. 2.10).

    Examples
    --------
    >>> from eval_pipelines.core.stats.sequential import mixing_rho_squared
    >>> round(mixing_rho_squared(2000, 0.05), 8)
    0.00396808
    """
    _check("n_star", n_star, low=0)
    _check("alpha", alpha, low=0, high=1)
    log_term = -2.0 * math.log(alpha)
    return (log_term + math.log(log_term + 1.0)) / n_star


def sequence_multiplier(n: int, *, alpha: float = 0.05, n_star: float = DEFAULT_N_STAR) -> float:
    """Half-width of the sequence in standard errors at ``n`` units: ``sqrt(n) * sqrt(2 (n
    rho^2 + 1) / (n^2 rho^2) * log(sqrt(n rho^2 + 1) / alpha))`` (1.96 for a fixed 95%
    interval; larger here, the price of looking at every n).

    Examples
    --------
    >>> from eval_pipelines.core.stats.sequential import sequence_multiplier
    >>> round(sequence_multiplier(2000), 4)
    3.0352
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n={n!r}: must be an integer of at least 1")
    rho2 = mixing_rho_squared(n_star, alpha)
    inner = 2.0 * (n * rho2 + 1.0) / (n * n * rho2) * math.log(math.sqrt(n * rho2 + 1.0) / alpha)
    return math.sqrt(n) * math.sqrt(inner)


def sequence_half_width(
    se: float, n: int, *, alpha: float = 0.05, n_star: float = DEFAULT_N_STAR
) -> float:
    """Half-width of the always-valid interval of an estimate with standard error ``se`` from
    ``n`` independent units (:func:`sequence_multiplier` times ``se``).

    Examples
    --------
    >>> from eval_pipelines.core.stats.sequential import sequence_half_width
    >>> round(sequence_half_width(0.01, 2000), 6)
    0.030352
    """
    if not (isinstance(se, int | float) and math.isfinite(se) and se >= 0):
        raise ValueError(f"se={se!r}: must be a finite number of at least 0")
    return sequence_multiplier(n, alpha=alpha, n_star=n_star) * se
