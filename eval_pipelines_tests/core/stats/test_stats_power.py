"""McNemar power and sample size against statsmodels' normal power and a simulated exact test."""

import math

import numpy as np
import pytest
from scipy.stats import binomtest
from statsmodels.stats.power import normal_power_het, normal_sample_size_one_tail

from eval_pipelines.core.stats import (
    minimum_detectable_effect,
    paired_power,
    paired_sample_size,
)

# (difference p01 - p10, discordance p01 + p10): accuracy changes of 1-10 points on
# records where 5-30% of pairs disagree, the range a memo or config change produces.
DESIGNS = [(0.05, 0.15), (0.02, 0.10), (0.10, 0.30), (-0.05, 0.20), (0.03, 0.05), (0.10, 0.20)]


@pytest.mark.parametrize(("difference", "discordance"), DESIGNS)
@pytest.mark.parametrize(("alpha", "power"), [(0.05, 0.8), (0.01, 0.9), (0.10, 0.5)])
def test_sample_size_matches_statsmodels(difference, discordance, alpha, power):
    # expected from statsmodels normal_sample_size_one_tail(diff, power, alpha / 2,
    # std_null, std_alternative): the one-tail normal sample size with the McNemar
    # per-pair standard deviations sqrt(q) under H0 and sqrt(q - d^2) under H1 (Connor
    # 1987, eq. 3). Tolerance: both are the same closed form; ceil of the continuous n.
    continuous = normal_sample_size_one_tail(
        abs(difference),
        power,
        alpha / 2,
        std_null=math.sqrt(discordance),
        std_alternative=math.sqrt(discordance - difference**2),
    )
    assert paired_sample_size(difference, discordance, alpha=alpha, power=power) == math.ceil(
        continuous - 1e-9
    )


def test_sample_size_hand_value():
    # Connor (1987) formula by hand: d = 0.05, q = 0.15, z_0.975 = 1.959964, z_0.8 = 0.841621:
    # (1.959964 * 0.387298 + 0.841621 * 0.384057)^2 / 0.0025 = 468.57 -> 469 pairs.
    assert paired_sample_size(0.05, 0.15) == 469


@pytest.mark.parametrize(("difference", "discordance"), DESIGNS)
@pytest.mark.parametrize("n", [50, 400, 3_000])
def test_power_matches_statsmodels(difference, discordance, n):
    # expected from statsmodels normal_power_het(alternative="larger") at alpha / 2 with the
    # same standard deviations: the near tail of the two-sided test, which is what Connor
    # (1987) and paired_power count. Tolerance 1e-12: the same closed form.
    std_null = math.sqrt(discordance)
    std_alternative = math.sqrt(discordance - difference**2)
    near = normal_power_het(
        abs(difference), n, 0.05 / 2, std_null, std_alternative, alternative="larger"
    )
    assert paired_power(n, difference, discordance) == pytest.approx(near, abs=1e-12)
    # The far tail (rejecting in the wrong direction), which statsmodels' two-sided power
    # adds, is what the approximation leaves out: below 0.01 even at n = 50.
    both = normal_power_het(
        abs(difference), n, 0.05, std_null, std_alternative, alternative="two-sided"
    )
    assert 0 <= both - near < 0.01


@pytest.mark.exhaustive
@pytest.mark.parametrize(("difference", "discordance"), DESIGNS)
def test_planned_n_reaches_the_power_of_the_exact_test(difference, discordance):
    # Simulation of what the report actually runs: the exact McNemar test
    # (scipy.stats.binomtest on the discordant counts, two-sided) on 4,000 seeded tables of
    # the planned n. Power within 0.05 of the planned 0.8: the normal approximation vs the
    # slightly conservative exact test (observed 0.764-0.778), plus Monte Carlo SE
    # sqrt(0.8 * 0.2 / 4000) = 0.006.
    n = paired_sample_size(difference, discordance)
    p01, p10 = (discordance + difference) / 2, (discordance - difference) / 2
    rng = np.random.default_rng(DESIGNS.index((difference, discordance)))
    tables = rng.multinomial(n, [p01, p10, 1 - discordance], size=4_000)[:, :2]
    distinct, index = np.unique(tables, axis=0, return_inverse=True)
    pvalues = np.array(
        [binomtest(int(c), int(c + b), 0.5).pvalue if b + c else 1.0 for c, b in distinct]
    )
    power = float(np.mean(pvalues[index.ravel()] < 0.05))
    assert power == pytest.approx(0.8, abs=0.05)


@pytest.mark.parametrize(("difference", "discordance"), DESIGNS)
def test_minimum_detectable_effect_inverts_the_sample_size(difference, discordance):
    # The MDE at the planned n is the planned difference, up to the rounding of n upward
    # (which can only make the MDE smaller): within 2% of |d|.
    n = paired_sample_size(difference, discordance)
    effect = minimum_detectable_effect(n, discordance)
    assert effect <= abs(difference)
    assert effect == pytest.approx(abs(difference), rel=0.02)


@pytest.mark.parametrize("discordance", [0.02, 0.1, 0.35, 1.0])
@pytest.mark.parametrize("n", [200, 1_000, 5_000])
@pytest.mark.parametrize("power", [0.3, 0.8, 0.95])
def test_minimum_detectable_effect_solves_the_power_equation(n, discordance, power):
    # Closed-form root against the forward formula: power at the MDE equals the target.
    # Tolerance 1e-9: a root of a smooth equation in double precision. An infinite MDE means
    # even the largest difference the discordance allows (d = q) falls short of the power.
    effect = minimum_detectable_effect(n, discordance, power=power)
    if math.isinf(effect):
        assert paired_power(n, discordance, discordance) < power
        return
    assert 0 < effect <= discordance
    assert paired_power(n, effect, discordance) == pytest.approx(power, abs=1e-9)


def test_minimum_detectable_effect_edges():
    # Pinned policy: no discordant pairs expected, or too few for any difference the
    # discordance allows to reach the power, read math.inf (nothing is detectable).
    assert minimum_detectable_effect(200, 0.0) == math.inf
    assert minimum_detectable_effect(20, 0.05) == math.inf  # one expected discordant pair
    assert math.isfinite(minimum_detectable_effect(200, 0.1))


def test_more_pairs_detect_smaller_effects():
    effects = [minimum_detectable_effect(n, 0.1) for n in (100, 400, 1_600, 6_400)]
    assert effects == sorted(effects, reverse=True)
    # Quadrupling n about halves the MDE once q - d^2 is close to q.
    assert effects[3] / effects[2] == pytest.approx(0.5, rel=0.02)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: paired_sample_size(0.0, 0.1), "difference"),
        (lambda: paired_sample_size(0.2, 0.1), "must not exceed discordance"),
        (lambda: paired_sample_size(0.05, 0.0), "discordance"),
        (lambda: paired_sample_size(0.05, 1.2), "discordance"),
        (lambda: paired_sample_size(0.05, 0.1, alpha=0.0), "alpha"),
        (lambda: paired_sample_size(0.05, 0.1, alpha=1.5), "alpha"),
        (lambda: paired_sample_size(0.05, 0.1, power=1.0), "power"),
        (lambda: minimum_detectable_effect(0, 0.1), "n"),
        (lambda: minimum_detectable_effect(10.5, 0.1), "n"),
        (lambda: minimum_detectable_effect(100, -0.1), "discordance"),
        (lambda: minimum_detectable_effect(100, 0.1, power=0.0), "power"),
        (lambda: paired_power(0, 0.05, 0.1), "n"),
        (lambda: paired_power(100, 0.05, 0.01), "must not exceed discordance"),
    ],
)
def test_rejects_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_numpy_integers_are_accepted():
    assert minimum_detectable_effect(np.int64(400), 0.1) == minimum_detectable_effect(400, 0.1)
