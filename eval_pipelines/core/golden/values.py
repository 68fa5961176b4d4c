"""Whether an extracted value matches its label."""

from __future__ import annotations

import math
from typing import Any

from eval_pipelines.core.workflows.output import normalise_value

# Numbers go through text and back (prompts, PDFs, JSON); a relative tolerance absorbs the
# representation error without letting a real difference (a cent on a million) pass.
REL_TOL = 1e-9


def values_match(expected: Any, actual: Any, value_type: str) -> bool:
    """True when ``actual`` equals ``expected`` after normalisation for ``value_type``.

    Both sides go through the same ``normalise_value`` the node output does, so formatting
    differences (whitespace, ``"12.50"`` versus ``12.5``, date layouts) never count as misses.
    Numbers match within a relative tolerance of ``REL_TOL``.
    """
    left = normalise_value(expected, value_type)
    right = normalise_value(actual, value_type)
    if _is_number(left) and _is_number(right):
        return math.isclose(left, right, rel_tol=REL_TOL)
    return bool(left == right)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
