"""The two-sample cluster bootstrap of means (a cost per task), against independent oracles.

Oracles: scipy.stats.bootstrap(paired=False, method="percentile") fed the per-cluster sums
with the same generator (this module draws side A's indices then side B's, in one block each
at these sizes, which is the order scipy draws two samples in: see unpaired_difference's
Notes), a one-sample scipy bootstrap for each side's own interval, and own computations of
the means and the relative difference from their definitions.
"""

import numpy as np
import pytest
from scipy import stats

from eval_pipelines.core.stats.mean_difference import MeanDifference, unpaired_mean_difference


def costs(rng, clusters, mean):
    """Rows of lognormal costs in ``clusters`` clusters of 1-4 rows: (values, cluster ids)."""
    sizes = rng.integers(1, 5, clusters)
    codes = np.repeat(np.arange(clusters), sizes)
    return rng.lognormal(np.log(mean), 0.5, codes.size), codes


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(2031)
    a, a_clusters = costs(rng, 600, 0.010)
    b, b_clusters = costs(rng, 700, 0.008)
    return a, a_clusters, b, b_clusters


def cluster_totals(values, codes):
    return np.bincount(codes, weights=values)


def test_per_cluster_matches_scipy_bootstrap_on_cluster_totals(data):
    # expected from scipy.stats.bootstrap(paired=False, method="percentile") on the
    # per-cluster totals, statistic mean(b) - mean(a), the same seed. Tolerance 1e-12: the
    # same sums taken in another order.
    a, a_clusters, b, b_clusters = data
    result = unpaired_mean_difference(a, b, a_clusters=a_clusters, b_clusters=b_clusters, rng=5)
    expected = stats.bootstrap(
        (cluster_totals(a, a_clusters), cluster_totals(b, b_clusters)),
        lambda x, y, axis=-1: y.mean(axis=axis) - x.mean(axis=axis),
        paired=False,
        vectorized=True,
        method="percentile",
        n_resamples=2000,
        confidence_level=0.95,
        rng=np.random.default_rng(5),
    ).confidence_interval
    assert result.interval.low == pytest.approx(expected.low, abs=1e-12)
    assert result.interval.high == pytest.approx(expected.high, abs=1e-12)


def test_estimates_and_raw_sums_are_the_definitions(data):
    # Own computation: a side's cost per task is its total over its clusters; per row, over
    # its rows. Tolerance 1e-12 (sums in another order).
    a, a_clusters, b, b_clusters = data
    for per, units_a, units_b in (
        ("cluster", 600, 700),
        ("row", a.size, b.size),
    ):
        result = unpaired_mean_difference(
            a, b, a_clusters=a_clusters, b_clusters=b_clusters, per=per, rng=1, n_resamples=50
        )
        assert isinstance(result, MeanDifference) and result.per == per
        assert (result.n_a, result.n_b, result.clusters_a, result.clusters_b) == (
            a.size,
            b.size,
            600,
            700,
        )
        assert result.sum_a == pytest.approx(a.sum(), abs=1e-12)
        assert result.mean_a == pytest.approx(a.sum() / units_a, abs=1e-12)
        assert result.mean_b == pytest.approx(b.sum() / units_b, abs=1e-12)
        assert result.estimate == pytest.approx(b.sum() / units_b - a.sum() / units_a, abs=1e-12)
        relative = (b.sum() / units_b) / (a.sum() / units_a) - 1
        assert result.relative_estimate == pytest.approx(relative, abs=1e-12)


def test_each_side_alone_matches_a_one_sample_scipy_bootstrap(data):
    # Side A's indices are drawn first: its interval is scipy's one-sample percentile
    # bootstrap of the mean of the cluster totals with the same seed; side B's uses the
    # generator where side A left it. Tolerance 1e-12.
    a, a_clusters, b, b_clusters = data
    result = unpaired_mean_difference(a, b, a_clusters=a_clusters, b_clusters=b_clusters, rng=8)
    generator = np.random.default_rng(8)
    for totals, interval in (
        (cluster_totals(a, a_clusters), result.interval_a),
        (cluster_totals(b, b_clusters), result.interval_b),
    ):
        expected = stats.bootstrap(
            (totals,),
            np.mean,
            vectorized=True,
            method="percentile",
            n_resamples=2000,
            rng=generator,
        ).confidence_interval
        assert interval.low == pytest.approx(expected.low, abs=1e-12)
        assert interval.high == pytest.approx(expected.high, abs=1e-12)


def test_relative_interval_is_the_percentile_interval_of_the_ratio(data):
    # Own computation: the replicates of each side (scipy's index draws, as above) and the
    # 2.5% and 97.5% quantiles of mean_b / mean_a - 1. Tolerance 1e-12.
    a, a_clusters, b, b_clusters = data
    result = unpaired_mean_difference(a, b, a_clusters=a_clusters, b_clusters=b_clusters, rng=4)
    generator = np.random.default_rng(4)
    totals_a, totals_b = cluster_totals(a, a_clusters), cluster_totals(b, b_clusters)
    replicates_a = totals_a[generator.integers(0, 600, (2000, 600))].mean(axis=1)
    replicates_b = totals_b[generator.integers(0, 700, (2000, 700))].mean(axis=1)
    low, high = np.quantile(replicates_b / replicates_a - 1, [0.025, 0.975])
    assert result.relative_interval.low == pytest.approx(low, abs=1e-12)
    assert result.relative_interval.high == pytest.approx(high, abs=1e-12)
    assert result.relative_interval.low < result.relative_estimate < result.relative_interval.high


def test_below_the_minimum_sample_only_counts_and_sums():
    # 19 clusters on side B: no mean, estimate or interval; the raw sums stay.
    result = unpaired_mean_difference([1.0] * 40, [2.0] * 19, rng=0)
    assert result.estimate is None and result.interval is None and result.mean_b is None
    assert result.relative_estimate is None and result.interval_a is None
    assert (result.sum_a, result.sum_b, result.clusters_b) == (40.0, 38.0, 19)
    rows = unpaired_mean_difference([1.0] * 40, [2.0] * 40, b_clusters=[0, 1] * 20, rng=0)
    assert rows.estimate is None and rows.clusters_b == 2


def test_a_zero_side_a_has_no_relative_difference():
    result = unpaired_mean_difference([0.0] * 30, [1.0] * 30, rng=0, n_resamples=100)
    assert result.estimate == 1.0
    assert result.relative_estimate is None and result.relative_interval is None


def test_the_same_seed_gives_the_same_interval(data):
    a, a_clusters, b, b_clusters = data
    first = unpaired_mean_difference(a, b, a_clusters=a_clusters, b_clusters=b_clusters, rng=3)
    again = unpaired_mean_difference(a, b, a_clusters=a_clusters, b_clusters=b_clusters, rng=3)
    assert first == again


@pytest.mark.parametrize(
    ("arguments", "options", "match"),
    [
        (([1.0, float("nan")], [1.0]), {}, "a_values: must hold finite numbers"),
        (([1.0], [np.inf]), {}, "b_values: must hold finite numbers"),
        ((["x"], [1.0]), {}, "a_values: must hold numbers"),
        (([[1.0]], [1.0]), {}, "a_values: must be 1-d"),
        (([1.0], [1.0]), {"per": "task"}, "per='task': must be one of cluster, row"),
        (([1.0, 2.0], [1.0]), {"a_clusters": [1]}, "a_clusters: must hold one id per record"),
        (([1.0], [1.0]), {"n_resamples": 0}, "n_resamples=0"),
        (([1.0], [1.0]), {"confidence_level": 1.5}, "confidence_level"),
    ],
)
def test_bad_arguments_are_refused_by_name(arguments, options, match):
    with pytest.raises(ValueError, match=match):
        unpaired_mean_difference(*arguments, **options)
