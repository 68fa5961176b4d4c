"""A proportion with its counts, estimate and interval, or the reason it has none."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.stats.intervals import Interval, wilson_interval
from eval_pipelines.core.stats.policy import INSUFFICIENT, MIN_N, is_sufficient


@dataclass(frozen=True)
class Proportion:
    """``k`` of ``n``, with the Wilson interval when ``n`` is large enough.

    Attributes
    ----------
    k, n
        Successes and trials, always present.
    estimate
        ``k / n``, or None below the minimum sample (``insufficient_evidence``).
    interval
        Wilson interval of the estimate, or None below the minimum sample.
    """

    k: int
    n: int
    estimate: float | None
    interval: Interval | None

    @property
    def sufficient(self) -> bool:
        return self.estimate is not None

    def to_json(self) -> dict[str, Any]:
        """``{k, n, value, interval}`` as every report writes it: ``value`` reads
        ``insufficient_evidence`` below the minimum sample and the interval is then null;
        figures rounded to 6 decimals."""
        if self.estimate is None or self.interval is None:
            return {"k": self.k, "n": self.n, "value": INSUFFICIENT, "interval": None}
        return {
            "k": self.k,
            "n": self.n,
            "value": round(self.estimate, 6),
            "interval": [round(self.interval.low, 6), round(self.interval.high, 6)],
        }


def estimate_proportion(
    k: int, n: int, *, confidence_level: float = 0.95, min_n: int = MIN_N
) -> Proportion:
    """Estimate a proportion with its Wilson interval, or mark it insufficient.

    Parameters
    ----------
    k, n
        Successes and trials, ``0 <= k <= n``.
    confidence_level
        Coverage of the Wilson interval.
    min_n
        Below this many trials the estimate and interval are None (see
        :mod:`eval_pipelines.core.stats.policy`).

    Examples
    --------
    >>> from eval_pipelines.core.stats import estimate_proportion
    >>> accuracy = estimate_proportion(45, 50)
    >>> accuracy.estimate, accuracy.sufficient
    (0.9, True)
    >>> estimate_proportion(9, 10).estimate is None  # below the minimum n
    True
    """
    if n < 0 or not 0 <= k <= max(n, 0):
        raise ValueError(f"k={k}, n={n}: need 0 <= k <= n")
    if not is_sufficient(n, min_n=min_n):
        return Proportion(k=k, n=n, estimate=None, interval=None)
    return Proportion(
        k=k, n=n, estimate=k / n, interval=wilson_interval(k, n, confidence_level=confidence_level)
    )
