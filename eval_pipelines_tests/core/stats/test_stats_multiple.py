"""Holm adjustment against statsmodels multipletests(method="holm")."""

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from eval_pipelines.core.stats import holm

# Both sort, multiply by (m - i) and take a running maximum in double precision; 1e-12
# absorbs a different order of operations.
TOL = 1e-12


@pytest.mark.parametrize(
    "pvalues",
    [
        [0.01],
        [0.01, 0.04],
        [0.04, 0.01, 0.03],
        [0.2, 0.2, 0.2],  # ties
        [0.0, 1.0, 0.5, 0.001],  # bounds
        [0.3, 0.6, 0.9],  # capped at 1
        [0.012, 0.0004, 0.051, 0.049, 0.3, 0.0201, 0.013],
    ],
)
def test_matches_statsmodels(pvalues):
    # expected from statsmodels multipletests(pvalues, method="holm")[1]
    expected = multipletests(pvalues, method="holm")[1]
    result = holm(pvalues)
    assert isinstance(result, tuple)
    assert result == pytest.approx(tuple(expected), abs=TOL)


@pytest.mark.exhaustive
def test_matches_statsmodels_on_random_pvalues():
    # expected from statsmodels multipletests(method="holm") on 25 seeded families of 1-30
    # p-values, half of them with repeated values (25, not more: each multipletests call
    # runs gc.collect, about 70 ms in a test process).
    rng = np.random.default_rng(3)
    for _ in range(25):
        m = int(rng.integers(1, 31))
        pvalues = rng.beta(0.5, 2.0, size=m)
        if rng.random() < 0.5:
            pvalues = np.round(pvalues, 2)
        expected = multipletests(pvalues, method="holm")[1]
        assert holm(pvalues) == pytest.approx(tuple(expected), abs=TOL)


def test_monotone_in_the_raw_pvalues_and_never_below_them():
    pvalues = [0.04, 0.001, 0.03, 0.02, 0.5]
    adjusted = holm(pvalues)
    order = np.argsort(pvalues)
    assert list(np.array(adjusted)[order]) == sorted(adjusted)
    assert all(a >= p for a, p in zip(adjusted, pvalues, strict=True))
    assert max(adjusted) <= 1.0


def test_hand_value():
    # Holm (1979) by hand: sorted 0.01, 0.02, 0.04 times 3, 2, 1 -> 0.03, 0.04, 0.04.
    assert holm([0.04, 0.01, 0.02]) == pytest.approx((0.04, 0.03, 0.04), abs=TOL)


def test_edge_cases():
    # Pinned policy: no comparisons gives no adjusted values; one comparison is unchanged.
    assert holm([]) == ()
    assert holm([0.037]) == (0.037,)


@pytest.mark.parametrize("pvalues", [[0.1, 1.2], [-0.01], [float("nan")], [[0.1, 0.2]]])
def test_rejects_bad_input(pvalues):
    with pytest.raises(ValueError, match="pvalues"):
        holm(pvalues)
