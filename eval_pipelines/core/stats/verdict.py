"""The verdict words a comparison is allowed to print, and the one rule that picks them."""

from __future__ import annotations

from typing import Protocol

from eval_pipelines.core.stats.intervals import Interval
from eval_pipelines.core.stats.policy import INSUFFICIENT

BETTER = "better"
WORSE = "worse"
NO_DETECTABLE_DIFFERENCE = "no detectable difference"


class HasInterval(Protocol):
    """A difference with its interval (paired or unpaired); None below the minimum sample."""

    @property
    def interval(self) -> Interval | None: ...


def verdict(difference: HasInterval) -> str:
    """Word for a difference (candidate minus baseline), read off its interval alone.

    Parameters
    ----------
    difference
        A result of :func:`~eval_pipelines.core.stats.bootstrap.paired_difference` or
        :func:`~eval_pipelines.core.stats.aa.unpaired_difference`.

    Returns
    -------
    str
        :data:`BETTER` only when the interval's lower bound is above zero, :data:`WORSE` only
        when its upper bound is below zero, :data:`NO_DETECTABLE_DIFFERENCE` when the
        interval contains zero, and ``insufficient_evidence`` when there is no interval
        (below the minimum sample). The point estimate never decides: an interval that
        touches zero reads no detectable difference whatever the estimate.

    References
    ----------
    .. [1] The superiority rule of specification 004 ("the lower bound of the confidence
           interval above zero").

    Examples
    --------
    >>> from eval_pipelines.core.stats import paired_difference, verdict
    >>> baseline = [True] * 60 + [False] * 40
    >>> candidate = [True] * 58 + [False] * 2 + [True] * 30 + [False] * 10
    >>> verdict(paired_difference(baseline, candidate, n_resamples=500, rng=7))
    'better'
    >>> verdict(paired_difference(baseline, baseline, n_resamples=500, rng=7))
    'no detectable difference'
    """
    interval = difference.interval
    if interval is None:
        return INSUFFICIENT
    if interval.low > 0.0:
        return BETTER
    if interval.high < 0.0:
        return WORSE
    return NO_DETECTABLE_DIFFERENCE
