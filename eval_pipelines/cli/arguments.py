"""Argument types shared by the commands: numbers are finite, timeouts positive.

``float("nan")`` and ``float("inf")`` parse, so ``type=float`` accepted ``--timeout nan``
(a deadline that never passes: ``now > nan`` is always false) and NaN thresholds, which slip
through range checks. These types refuse them as usage errors (one line, exit 2).
"""

from __future__ import annotations

import argparse
import math


def finite_float(text: str) -> float:
    """A finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a finite number")
    return value


def seconds(text: str) -> float:
    """A finite, positive number of seconds."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be a positive number of seconds")
    return value
