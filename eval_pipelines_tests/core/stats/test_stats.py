"""Statistics against independent oracles (statsmodels, scipy), with stated tolerances."""

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from eval_pipelines.core.stats import mcnemar_exact, wilson_interval

# Both implementations evaluate the same closed form in double precision; 1e-12 absorbs
# the different order of floating-point operations.
TOL = 1e-12


@pytest.mark.parametrize(
    ("k", "n"), [(0, 1), (1, 1), (0, 10), (10, 10), (3, 10), (57, 200), (199, 200), (4_321, 5_000)]
)
@pytest.mark.parametrize("level", [0.90, 0.95, 0.99])
def test_wilson_matches_statsmodels(k, n, level):
    # expected from statsmodels proportion_confint(method="wilson")
    low, high = proportion_confint(k, n, alpha=1 - level, method="wilson")
    result = wilson_interval(k, n, confidence_level=level)
    assert result.low == pytest.approx(low, abs=TOL)
    assert result.high == pytest.approx(high, abs=TOL)
    assert result.confidence_level == level


def test_wilson_edges_are_exact_bounds():
    # Pinned policy: k=0 gives low exactly 0, k=n gives high exactly 1.
    assert wilson_interval(0, 25).low == 0.0
    assert wilson_interval(25, 25).high == 1.0


@pytest.mark.parametrize(
    ("k", "n", "level"), [(0, 0, 0.95), (-1, 5, 0.95), (6, 5, 0.95), (1, 5, 1.0), (1, 5, 0.0)]
)
def test_wilson_rejects_bad_input(k, n, level):
    with pytest.raises(ValueError):
        wilson_interval(k, n, confidence_level=level)


def test_wilson_reference_value():
    # Newcombe (1998), table I, example 81/263: Wilson 95% interval 0.2553 to 0.3662 (4 d.p.)
    result = wilson_interval(81, 263)
    assert result.low == pytest.approx(0.2553, abs=5e-5)
    assert result.high == pytest.approx(0.3662, abs=5e-5)


@pytest.mark.parametrize(
    ("b", "c"), [(0, 1), (1, 0), (3, 9), (9, 3), (10, 10), (0, 25), (47, 61), (120, 80), (1, 2)]
)
def test_mcnemar_matches_statsmodels(b, c):
    # expected from statsmodels mcnemar(table, exact=True): binomial test on b, c
    table = np.array([[20, b], [c, 30]])
    expected = mcnemar(table, exact=True)
    result = mcnemar_exact(b, c)
    assert result.pvalue == pytest.approx(expected.pvalue, abs=TOL)
    assert result.statistic == expected.statistic
    assert result.discordant == b + c


def test_mcnemar_no_discordant_pairs_is_p_one():
    # Pinned policy: b = c = 0 gives p = 1.0 (no evidence of a difference).
    assert mcnemar_exact(0, 0).pvalue == 1.0


def test_mcnemar_matches_scipy_binomtest():
    # expected from scipy.stats.binomtest(min(b,c), b+c, 0.5) two-sided
    from scipy.stats import binomtest

    for b, c in [(5, 17), (30, 12)]:
        assert mcnemar_exact(b, c).pvalue == pytest.approx(
            binomtest(min(b, c), b + c, 0.5).pvalue, abs=TOL
        )


def test_mcnemar_p_is_exact_to_the_last_bit_for_small_counts():
    # Reference: the two-sided tail as a fraction of integers, rounded once by Python.
    from fractions import Fraction
    from math import comb

    for discordant in range(1, 120):
        for smaller in range(discordant // 2 + 1):
            tail = sum(comb(discordant, i) for i in range(smaller + 1))
            expected = float(min(Fraction(1), Fraction(2 * tail, 2**discordant)))
            assert mcnemar_exact(smaller, discordant - smaller).pvalue == expected
    assert mcnemar_exact(3, 4).pvalue == 1.0  # P[X <= 3] is exactly 1/2 for 7 pairs


def test_mcnemar_agrees_with_binomtest_on_both_sides_of_the_exact_limit():
    # expected from scipy.stats.binomtest; relative tolerance 1e-12 (binomtest itself is
    # 2e-14 off the exact value at 10,000 pairs).
    from scipy.stats import binomtest

    from eval_pipelines.core.stats.paired import EXACT_TAIL_PAIRS

    for discordant in (EXACT_TAIL_PAIRS, EXACT_TAIL_PAIRS + 1, 40_001):
        smaller = discordant // 2 - 110
        expected = binomtest(smaller, discordant, 0.5).pvalue
        got = mcnemar_exact(smaller, discordant - smaller).pvalue
        assert got == pytest.approx(expected, rel=1e-12)


def test_mcnemar_rejects_negative_counts():
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)
