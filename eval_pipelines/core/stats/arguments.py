"""The option check every statistic shares: a level, coverage or power strictly between 0 and 1,
refused with one message wherever it is given."""

from __future__ import annotations

__all__ = ["check_probability"]


def check_probability(value: float, name: str) -> None:
    """Raise ``ValueError`` unless ``0 < value < 1`` (NaN is refused too); ``name`` is the
    option's name, as the message quotes it."""
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name}={value}: must be in (0, 1)")
