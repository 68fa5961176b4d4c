"""The ratio estimator with a cluster-bootstrap interval, against independent oracles.

Oracles: the closed-form ratio (numpy), statsmodels' cluster-robust standard error of a mean
(OLS on a constant, ``cov_type="cluster"``), and its non-robust one for the same data treated
as independent (which the clustered interval must not match)."""

import numpy as np
import pytest
import statsmodels.api as sm

from eval_pipelines.core.stats.clustered import METHOD, cluster_ratio
from eval_pipelines.core.stats.policy import INSUFFICIENT, MIN_N

Z95 = 1.959963984540054  # scipy.stats.norm.ppf(0.975)


def clustered_outcomes(n_clusters: int, *, seed: int, size: int = 4):
    """0/1 outcomes in clusters of ``size`` that share most of their chance of success."""
    rng = np.random.default_rng(seed)
    p = rng.beta(1.0, 1.0, n_clusters)  # strongly different clusters: ICC near 1/3
    y = (rng.random((n_clusters, size)) < p[:, None]).astype(float)
    return y.ravel(), np.repeat(np.arange(n_clusters), size)


def cluster_se(y: np.ndarray, groups: np.ndarray) -> float:
    """statsmodels' cluster-robust SE of the mean of ``y`` (with its small-sample factor)."""
    fit = sm.OLS(y, np.ones((y.size, 1))).fit(cov_type="cluster", cov_kwds={"groups": groups})
    return float(fit.bse[0])


def naive_se(y: np.ndarray) -> float:
    return float(sm.OLS(y, np.ones((y.size, 1))).fit().bse[0])


def test_the_estimate_is_the_ratio_of_sums_and_the_counts_are_always_given():
    num = np.array([1.0, 0.0, 2.0, 3.0])
    den = np.array([1.0, 2.0, 2.0, 3.0])
    result = cluster_ratio(num, den, rng=0, min_n=2)
    assert result.estimate == pytest.approx(6.0 / 8.0, abs=1e-15)
    assert (result.numerator, result.denominator, result.n, result.n_clusters) == (6, 8, 4, 4)
    assert result.method == METHOD
    small = cluster_ratio(num, den, rng=0)  # 4 units < MIN_N
    assert small.estimate is None and small.interval is None and not small.sufficient
    assert (small.numerator, small.denominator) == (6.0, 8.0)


def test_fewer_clusters_than_the_minimum_give_no_estimate_whatever_the_units():
    y = np.ones(100)
    result = cluster_ratio(y, clusters=np.arange(100) % (MIN_N - 1), rng=1)
    assert result.n == 100 and result.n_clusters == MIN_N - 1
    assert result.estimate is None and INSUFFICIENT == "insufficient_evidence"


def test_no_variation_between_clusters_is_a_point_interval():
    result = cluster_ratio(np.ones(40), np.full(40, 3.0), rng=2)
    assert result.estimate == 1 / 3
    assert result.interval is not None
    assert result.interval.low == pytest.approx(1 / 3, abs=1e-12)
    assert result.interval.high == pytest.approx(1 / 3, abs=1e-12)


def test_the_width_agrees_with_the_statsmodels_cluster_robust_standard_error():
    y, groups = clustered_outcomes(400, seed=5)
    result = cluster_ratio(y, clusters=groups, rng=np.random.default_rng(9))
    assert result.estimate == pytest.approx(y.mean(), abs=1e-12)
    se = cluster_se(y, groups)
    assert result.interval is not None
    width = result.interval.high - result.interval.low
    # Reference 2 * 1.96 * SE (statsmodels OLS on a constant, cov_type="cluster"). Tolerance
    # 8%: the Monte Carlo error of a 2,000-resample percentile width is about 2.2% (one sd),
    # statsmodels' G/(G-1) factor 0.1%; the seed is fixed, so this is not flaky.
    assert width == pytest.approx(2 * Z95 * se, rel=0.08)
    # And the design effect is real here: ignoring the clusters the SE is much smaller, so a
    # bootstrap that split clusters would miss the reference by far more than the tolerance.
    assert naive_se(y) < 0.75 * se


def test_ignoring_the_clusters_gives_a_narrower_interval_that_matches_the_naive_se():
    y, groups = clustered_outcomes(400, seed=6)
    clustered = cluster_ratio(y, clusters=groups, rng=3)
    ignored = cluster_ratio(y, rng=3)
    assert clustered.interval is not None and ignored.interval is not None
    clustered_width = clustered.interval.high - clustered.interval.low
    ignored_width = ignored.interval.high - ignored.interval.low
    assert ignored_width < 0.75 * clustered_width
    # expected from statsmodels OLS (non-robust SE): independent units; tolerance as above
    assert ignored_width == pytest.approx(2 * Z95 * naive_se(y), rel=0.08)


def test_a_weighted_ratio_agrees_with_the_cluster_robust_se_of_the_pooled_mean():
    # Units with different weights (e.g. records with different numbers of trial pairs): the
    # ratio of sums is the pooled mean of the expanded observations, whose cluster-robust SE
    # statsmodels gives with the unit's cluster as the group.
    rng = np.random.default_rng(12)
    n_clusters = 300
    p = rng.beta(0.5, 2.0, n_clusters)
    weights, hits, groups, expanded, expanded_groups = [], [], [], [], []
    for g in range(n_clusters):
        for _ in range(rng.integers(1, 4)):
            m = int(rng.integers(1, 7))
            k = int((rng.random(m) < p[g]).sum())
            weights.append(m)
            hits.append(k)
            groups.append(g)
            expanded += [1.0] * k + [0.0] * (m - k)
            expanded_groups += [g] * m
    result = cluster_ratio(hits, weights, clusters=groups, rng=4)
    y, eg = np.array(expanded), np.array(expanded_groups)
    assert result.estimate == pytest.approx(y.mean(), abs=1e-12)
    assert result.interval is not None
    width = result.interval.high - result.interval.low
    assert width == pytest.approx(2 * Z95 * cluster_se(y, eg), rel=0.08)


def test_the_same_seed_gives_the_same_interval():
    y, groups = clustered_outcomes(50, seed=7)
    assert cluster_ratio(y, clusters=groups, rng=11) == cluster_ratio(y, clusters=groups, rng=11)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (([1.0, np.nan],), {}, "numerators: must hold finite"),
        (([1.0, 2.0], [1.0, 0.0]), {}, "weight must be positive"),
        (([1.0, 2.0], [1.0]), {}, "one each per unit"),
        (([1.0, 2.0],), {"clusters": [1]}, "one id per record"),
        (([1.0],), {"n_resamples": 0}, "n_resamples=0"),
        (([1.0],), {"confidence_level": 1.0}, "confidence_level=1.0"),
        (([1.0],), {"min_n": 0}, "min_n=0"),
    ],
)
def test_bad_input_is_refused_naming_the_parameter(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        cluster_ratio(*args, **kwargs)
