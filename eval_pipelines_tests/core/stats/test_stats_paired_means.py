"""paired_mean_difference: the difference of two paired means and their ratio, against scipy's
bootstrap (unclustered) and an own computation of the cluster bootstrap from its docstring."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from eval_pipelines.core.stats.paired_means import paired_mean_difference


def _costs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A model-tier A/B: the candidate's price is 41% lower, its tokens a little noisier."""
    rng = np.random.default_rng(seed)
    tokens = rng.gamma(4.0, 100.0, size=n)
    baseline = tokens * 2e-6
    candidate = tokens * rng.normal(1.0, 0.05, size=n) * 2e-6 * 0.59
    return baseline, candidate


def test_difference_and_relative_match_scipy_bootstrap_paired_percentile() -> None:
    baseline, candidate = _costs(300, seed=3)
    result = paired_mean_difference(baseline, candidate, n_resamples=4000, rng=11)
    assert result.estimate == pytest.approx(candidate.mean() - baseline.mean(), rel=1e-12)
    assert result.relative == pytest.approx(candidate.sum() / baseline.sum() - 1, rel=1e-12)
    # expected from scipy.stats.bootstrap(paired=True, method="percentile") on the same pairs;
    # the two draw different resamples, so the bounds agree to Monte Carlo error: 5% of the
    # interval's width (measured: about 1% apart with 4,000 resamples each).
    difference = stats.bootstrap(
        (baseline, candidate),
        lambda b, c: np.mean(c) - np.mean(b),
        paired=True,
        vectorized=False,
        n_resamples=4000,
        method="percentile",
        random_state=5,
    ).confidence_interval
    relative = stats.bootstrap(
        (baseline, candidate),
        lambda b, c: np.sum(c) / np.sum(b) - 1,
        paired=True,
        vectorized=False,
        n_resamples=4000,
        method="percentile",
        random_state=5,
    ).confidence_interval
    for ours, oracle in (
        (result.interval, difference),
        (result.relative_interval, relative),
    ):
        assert ours is not None
        width = oracle.high - oracle.low
        assert ours.low == pytest.approx(oracle.low, abs=0.05 * width)
        assert ours.high == pytest.approx(oracle.high, abs=0.05 * width)
    assert result.relative == pytest.approx(-0.41, abs=0.01)


def test_the_cluster_bootstrap_is_the_documented_resampling_of_whole_clusters() -> None:
    baseline, candidate = _costs(120, seed=4)
    clusters = np.arange(120) // 3  # records held out three by three
    result = paired_mean_difference(baseline, candidate, clusters=clusters, n_resamples=500, rng=9)
    # Own computation from the docstring: the same generator draws G cluster indices per
    # resample (one block: 500 x 40 cells); per cluster the sums B_g, C_g and sizes m_g.
    drawn = np.random.default_rng(9).integers(0, 40, size=(500, 40))
    base_g = np.bincount(clusters, weights=baseline)
    cand_g = np.bincount(clusters, weights=candidate)
    size_g = np.bincount(clusters).astype(float)
    differences = (cand_g[drawn].sum(1) - base_g[drawn].sum(1)) / size_g[drawn].sum(1)
    ratios = cand_g[drawn].sum(1) / base_g[drawn].sum(1) - 1
    assert result.interval is not None and result.relative_interval is not None
    # Exact up to float summation order.
    assert result.interval.low == pytest.approx(np.quantile(differences, 0.025), rel=1e-9)
    assert result.interval.high == pytest.approx(np.quantile(differences, 0.975), rel=1e-9)
    assert result.relative_interval.low == pytest.approx(np.quantile(ratios, 0.025), rel=1e-9)
    assert result.relative_interval.high == pytest.approx(np.quantile(ratios, 0.975), rel=1e-9)
    assert result.n == 120 and result.n_clusters == 40


def test_clusters_widen_the_interval_when_their_records_move_together() -> None:
    rng = np.random.default_rng(2)
    shared = np.repeat(rng.normal(0, 1, size=30), 4)  # four records per cluster share it
    baseline = np.full(120, 10.0)
    candidate = baseline + shared
    clusters = np.arange(120) // 4
    alone = paired_mean_difference(baseline, candidate, n_resamples=1000, rng=1)
    grouped = paired_mean_difference(
        baseline, candidate, clusters=clusters, n_resamples=1000, rng=1
    )
    assert alone.interval is not None and grouped.interval is not None
    width = grouped.interval.high - grouped.interval.low
    assert width > 1.5 * (alone.interval.high - alone.interval.low)


def test_below_the_minimum_sample_only_the_means_are_returned() -> None:
    result = paired_mean_difference([1.0] * 19, [0.5] * 19, rng=0)
    assert result.estimate is None and result.interval is None
    assert result.relative is None and result.relative_interval is None
    assert (result.baseline_mean, result.candidate_mean, result.n) == (1.0, 0.5, 19)
    few_clusters = paired_mean_difference(
        [1.0] * 40, [0.5] * 40, clusters=[i // 4 for i in range(40)], rng=0
    )
    assert few_clusters.estimate is None and few_clusters.n_clusters == 10


def test_no_relative_difference_of_a_baseline_that_costs_nothing() -> None:
    result = paired_mean_difference([0.0] * 30, [0.5] * 30, rng=0)
    assert result.estimate == 0.5 and result.relative is None
    assert result.relative_interval is None
    # A resample whose baseline sum is 0 leaves the ratio undefined: no relative interval.
    mostly_free = paired_mean_difference([0.0] * 29 + [1.0], [0.5] * 30, rng=0, n_resamples=200)
    assert mostly_free.relative is not None and mostly_free.relative_interval is None


@pytest.mark.parametrize(
    ("baseline", "candidate", "message"),
    [
        ([1.0, 2.0], [1.0], "pair up unit by unit"),
        ([1.0, float("nan")], [1.0, 1.0], "baseline: must hold finite numbers"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(
    baseline: list[float], candidate: list[float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        paired_mean_difference(baseline, candidate)
