"""The shared number rule: finite int or float, a bool is not a number."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from eval_pipelines.core.inputs import is_finite_number


@pytest.mark.parametrize("value", [0, 1, -3, 0.5, -1e300, 2**53])
def test_finite_ints_and_floats_are_numbers(value: object) -> None:
    assert is_finite_number(value)


@pytest.mark.parametrize(
    "value", [math.nan, math.inf, -math.inf, True, False, "1", None, [1], Fraction(1, 2)]
)
def test_non_finite_values_bools_and_other_types_are_not(value: object) -> None:
    assert not is_finite_number(value)


@pytest.mark.exhaustive
@pytest.mark.parametrize("timeout", [math.nan, math.inf, 0, -1, True, "5"])
def test_waiting_refuses_a_timeout_that_is_not_a_finite_positive_number(timeout: object) -> None:
    from eval_pipelines.api.holdout_status import wait_for_eval
    from eval_pipelines.core.errors import InputError

    with pytest.raises(InputError) as refused:
        wait_for_eval("any", "any-e0001-s1", timeout=timeout)  # type: ignore[arg-type]
    assert refused.value.field == "timeout"
