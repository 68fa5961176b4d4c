"""The one minimum-sample rule: below it a derived statistic is not a number.

Every figure a report shows travels with its n; a proportion estimated from fewer than
``MIN_N`` observations reads ``insufficient_evidence`` instead of an estimate and an interval,
while its raw counts are still shown.
"""

from __future__ import annotations

from eval_pipelines.core.verdicts import INSUFFICIENT

__all__ = ["INSUFFICIENT", "MIN_N", "is_sufficient"]

MIN_N = 20


def is_sufficient(n: int, *, min_n: int = MIN_N) -> bool:
    """True when ``n`` observations are enough to report a derived statistic.

    Examples
    --------
    >>> from eval_pipelines.core.stats import is_sufficient
    >>> is_sufficient(19), is_sufficient(20)
    (False, True)
    """
    return n >= min_n
