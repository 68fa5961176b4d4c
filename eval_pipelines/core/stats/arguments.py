"""The option check every statistic shares: a level, coverage or power strictly between 0 and 1,
refused with one message wherever it is given."""

from __future__ import annotations

__all__ = ["check_probability"]


def check_probability(value: float, name: str) -> None:
    """Raise ``ValueError`` unless ``0 < value < 1`` (NaN is refused too); ``name`` is the
    option's name, as the message quotes it.

    Examples
    --------
    >>> from eval_pipelines.core.stats.arguments import check_probability
    >>> check_probability(0.95, "confidence_level")
    >>> check_probability(1.5, "power")
    Traceback (most recent call last):
    ValueError: power=1.5: must be in (0, 1)
    """
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name}={value}: must be in (0, 1)")
