"""Paired comparison of two classifiers on the same records."""

from __future__ import annotations

from dataclasses import dataclass

# scipy.special, not scipy.stats: the binomial tail without importing all of scipy.stats
# (slow to import, docs/benchmarks.md), which every evaluation's run would pay for one function.
from scipy import special

# Up to this many discordant pairs the binomial tail is summed exactly in integers (cheap at
# the limit, docs/benchmarks.md) and rounded once; above it, the regularised incomplete beta
# function (relative error below 1e-13) takes over.
EXACT_TAIL_PAIRS = 10_000


@dataclass(frozen=True)
class McNemarResult:
    """Result of an exact McNemar test.

    Attributes
    ----------
    b
        Pairs right under the baseline and wrong under the candidate (newly wrong).
    c
        Pairs wrong under the baseline and right under the candidate (newly right).
    statistic
        ``min(b, c)``, the smaller discordant count (the binomial test statistic).
    pvalue
        Two-sided exact p-value, capped at 1.
    """

    b: int
    c: int
    statistic: int
    pvalue: float

    @property
    def discordant(self) -> int:
        return self.b + self.c


def mcnemar_exact(b: int, c: int) -> McNemarResult:
    """Exact (binomial) McNemar test on the discordant pairs of a paired 2x2 table.

    Parameters
    ----------
    b
        Pairs right under the baseline and wrong under the candidate (newly wrong).
    c
        Pairs wrong under the baseline and right under the candidate (newly right).

    Returns
    -------
    McNemarResult
        ``pvalue = min(1, 2 * P[X <= min(b, c)])`` with ``X ~ Binomial(b + c, 1/2)``;
        ``b = c = 0`` gives ``pvalue = 1.0`` (no discordant pair is no evidence of a difference).

    References
    ----------
    .. [1] Q. McNemar, "Note on the sampling error of the difference between correlated
           proportions or percentages", Psychometrika 12 (1947), 153-157.
    .. [2] A. Agresti, "Categorical Data Analysis", 3rd ed., Wiley (2013), section 11.1.

    Examples
    --------
    >>> from eval_pipelines.core.stats import mcnemar_exact
    >>> result = mcnemar_exact(12, 3)
    >>> result.statistic, round(result.pvalue, 6)
    (3, 0.035156)
    """
    if b < 0 or c < 0:
        raise ValueError(f"b={b}, c={c}: discordant counts must be non-negative")
    discordant = b + c
    smaller = min(b, c)
    if discordant == 0:
        return McNemarResult(b=b, c=c, statistic=0, pvalue=1.0)
    return McNemarResult(b=b, c=c, statistic=smaller, pvalue=_two_sided_half(smaller, discordant))


def _two_sided_half(k: int, n: int) -> float:
    """``min(1, 2 P[X <= k])`` for ``X ~ Binomial(n, 1/2)``, ``k <= n / 2``: exact to the last
    bit up to :data:`EXACT_TAIL_PAIRS` (so ``b = 3, c = 4`` reads exactly 1.0)."""
    if n > EXACT_TAIL_PAIRS:
        return min(1.0, 2.0 * float(special.betainc(n - k, k + 1, 0.5)))
    term = total = 1
    for i in range(k):
        term = term * (n - i) // (i + 1)
        total += term
    # An integer ratio is rounded once, correctly: 2 * total / 2**n.
    return min(1.0, total / 2 ** (n - 1))
