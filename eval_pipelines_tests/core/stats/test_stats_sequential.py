"""The always-valid interval (confidence sequence) of the live lift.

Oracles: the normal-mixture martingale integrated numerically (scipy.integrate.quad) and its
crossing solved with scipy.optimize.brentq, independently of the closed form; and a Monte
Carlo of Gaussian random walks, whose running mean the sequence must cover at every step at
once in at least 95% of paths (Ville's inequality).
"""

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from eval_pipelines.core.stats.sequential import (
    mixing_rho_squared,
    sequence_half_width,
    sequence_multiplier,
)


def _log_mixture(s, n, rho2):
    # log of the integral over lambda ~ N(0, rho^2) of exp(lambda s - lambda^2 n / 2): the
    # mixture martingale, integrated numerically around its numerically found peak (in logs,
    # so large n does not overflow).
    def exponent(lam):
        return lam * s - lam * lam * n / 2.0 + stats.norm.logpdf(lam, 0.0, math.sqrt(rho2))

    peak = optimize.minimize_scalar(lambda lam: -exponent(lam)).x
    width = 1.0 / math.sqrt(n + 1.0 / rho2)
    value, _ = integrate.quad(
        lambda lam: math.exp(exponent(lam) - exponent(peak)),
        peak - 40 * width,
        peak + 40 * width,
        epsabs=0.0,
        epsrel=1e-12,
        limit=200,
    )
    return exponent(peak) + math.log(value)


@pytest.mark.exhaustive
@pytest.mark.parametrize("n", [20, 200, 2_000, 20_000])
@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_the_closed_form_is_where_the_mixture_martingale_reaches_one_over_alpha(n, alpha):
    rho2 = mixing_rho_squared(2_000, alpha)
    # Oracle: the standardised sum S at which the mixture equals 1/alpha, found numerically;
    # the half-width of the mean is S / n with unit sigma, i.e. S / sqrt(n) standard errors.
    # Tolerance 1e-6 relative.
    top = 50.0 * math.sqrt(n)
    crossing = optimize.brentq(
        lambda s: _log_mixture(s, n, rho2) - math.log(1.0 / alpha), 0.0, top, xtol=1e-10
    )
    expected = crossing / math.sqrt(n)
    assert sequence_multiplier(n, alpha=alpha, n_star=2_000) == pytest.approx(expected, rel=1e-6)


def test_rho_and_hand_values():
    # rho^2 = (-2 log 0.05 + log(-2 log 0.05 + 1)) / 2000 = (5.991465 + 1.944691) / 2000.
    assert mixing_rho_squared(2_000, 0.05) == pytest.approx(0.00396808, rel=1e-5)
    # At n_star the sequence is about 3.04 standard errors each side (1.96 for one look).
    assert sequence_multiplier(2_000) == pytest.approx(3.035, abs=0.002)
    assert sequence_half_width(0.01, 2_000) == pytest.approx(0.03035, abs=2e-5)
    assert sequence_multiplier(100) > sequence_multiplier(2_000) < sequence_multiplier(20_000)


def test_random_walks_stay_inside_the_sequence_at_every_step():
    # 2,000 walks of 2,000 standard normal steps: the running mean must stay inside
    # +- multiplier(n) / sqrt(n) at every n at once in at least 95% of walks, less 2.6
    # binomial standard errors of 2,000 walks.
    rng = np.random.default_rng(19)
    steps = np.arange(1, 2_001)
    bound = np.array([sequence_multiplier(int(n)) for n in steps]) / np.sqrt(steps)
    escaped = 0
    for _ in range(4):
        walks = rng.standard_normal((500, steps.size)).cumsum(axis=1) / steps
        escaped += int((np.abs(walks) > bound).any(axis=1).sum())
    print(f"{escaped} of 2000 walks left the sequence")
    assert escaped / 2_000 <= 0.05 + 2.6 * math.sqrt(0.05 * 0.95 / 2_000), escaped


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: sequence_multiplier(0), "n=0"),
        (lambda: sequence_multiplier(10, alpha=1.0), "alpha=1.0"),
        (lambda: sequence_half_width(-1.0, 10), "se=-1.0"),
        (lambda: mixing_rho_squared(0, 0.05), "n_star=0"),
    ],
)
def test_bad_input_is_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()
