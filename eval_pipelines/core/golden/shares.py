"""A golden share (field accuracy, pass rate, a field's accuracy) as every report, the gate and
the JSON documents write it: truncated to three decimals, ``insufficient_evidence`` from fewer
than 20 observations, the counts beside it."""

from __future__ import annotations

import math

from eval_pipelines.core.stats import INSUFFICIENT, is_sufficient


def format_share(value: float | None) -> str:
    """A share (field accuracy, pass rate, a field's accuracy) as every report and the gate
    print it: three decimals, **truncated**, never rounded, so a score below a threshold never
    reads as reaching it (0.9996 reads ``0.999``, never ``1.000``) and one score reads the same
    everywhere (22/23 is ``0.956`` in the report and in the gate's reason). ``—`` for None.

    The product is rounded to 6 decimals before truncating, so that 0.29 (``289.99999999999997``
    thousandths in floating point) reads ``0.290``; a share of counts below 2,000,000 is never
    within that of the next thousandth, so no count ratio is lifted by it.
    """
    if value is None:
        return "—"
    return f"{math.floor(round(value * 1000, 6)) / 1000:.3f}"


def shown_share(value: float | None, n: int) -> str:
    """A share of ``n`` observations as a report prints it: :func:`format_share`, or
    ``insufficient_evidence`` from fewer than 20 (the one minimum-sample rule,
    :mod:`eval_pipelines.core.stats.policy`), ``—`` when nothing was scored."""
    if value is None or n == 0:
        return "—"
    return format_share(value) if is_sufficient(n) else INSUFFICIENT


def counted_share(correct: int, n: int) -> str:
    """``0.909 (30/33)``; ``insufficient_evidence (3/4)`` from fewer than 20: the counts are
    always shown."""
    return f"{shown_share(correct / n if n else None, n)} ({correct}/{n})"


def json_share(value: float | None, n: int) -> float | str | None:
    """A share as the JSON documents write it: the value, ``insufficient_evidence`` from
    fewer than 20 observations (as every report's proportions), None when nothing was
    scored; the counts are written beside it."""
    if value is None or n == 0:
        return None
    return value if is_sufficient(n) else INSUFFICIENT


def json_difference(difference: float | None, n_a: int, n_b: int) -> float | str | None:
    """A difference of two shares (``b - a``) as the JSON documents write it: None when
    either side has no share, ``insufficient_evidence`` when either side has fewer than 20
    observations (both sides' counts are written beside it), else the difference."""
    if difference is None:
        return None
    return difference if is_sufficient(n_a) and is_sufficient(n_b) else INSUFFICIENT
