"""The unpaired difference and the A/A noise floor, against independent oracles.

Oracles: scipy.stats.bootstrap with two independent samples (the same resampling done by a
general implementation, with the same generator), Newcombe's hybrid-score interval and the
Wald interval for two independent proportions (statsmodels), the design effect of
duplicated records, counting for the flip rate, and a simulation of the A/A false-positive
rate against the interval's nominal 5%.
"""

import dataclasses
import math
import time

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from eval_pipelines.core.stats import (
    BETTER,
    INSUFFICIENT,
    NO_DETECTABLE_DIFFERENCE,
    WORSE,
    AACheck,
    Interval,
    PairedDifference,
    UnpairedDifference,
    aa_check,
    unpaired_difference,
    unpaired_verdict,
    verdict,
)
from eval_pipelines.core.stats.aa import CALIBRATED_FAILURE_RATES, MEASURED_FAILURE_RATES, SPLITS
from eval_pipelines_tests.helpers.draws import CountingGenerator


def outcomes(right: int, n: int) -> np.ndarray:
    return np.repeat([True, False], [right, n - right])


def clustered_dataset(rng, cluster_sd=1.0):
    """1,000 records in 400 clusters of sizes 1, 2, 3, 4 (100 of each).

    Record i of cluster g is right when ``0.8 + u_g + e_i > 0``, ``u_g ~ N(0, cluster_sd^2)``
    shared by the cluster: outcomes within a cluster are positively correlated, about 72%
    right overall.
    """
    sizes = np.tile([1, 2, 3, 4], 100)
    codes = np.repeat(np.arange(sizes.size), sizes)
    shared = rng.normal(0.0, cluster_sd, sizes.size)[codes]
    right = 0.8 + shared + rng.standard_normal(codes.size) > 0
    return right, codes


# --- unpaired_difference -------------------------------------------------------------------


def test_counts_and_estimate():
    result = unpaired_difference(outcomes(70, 100), outcomes(90, 120), rng=1)
    assert isinstance(result, UnpairedDifference)
    assert (result.n_a, result.n_b, result.clusters_a, result.clusters_b) == (100, 120, 100, 120)
    assert (result.right_a, result.right_b) == (70, 90)
    assert result.estimate == pytest.approx(0.75 - 0.70, abs=1e-15)
    assert result.n_resamples == 2000 and result.confidence_level == 0.95
    assert result.method == "two-sample cluster bootstrap, percentile"
    assert result.sufficient
    assert result.interval.low <= result.estimate <= result.interval.high


@pytest.mark.parametrize("clustered", [False, True])
def test_matches_scipy_bootstrap_two_independent_samples(clustered):
    # expected from scipy.stats.bootstrap(paired=False, method="percentile") with the same
    # generator. scipy resamples each sample in turn, drawing
    # rng.integers(0, n_k, (n_resamples, n_k)) for sample k in one batch; this module draws
    # side A's indices, then side B's, in one block each while n_resamples * G stays under
    # its block size (2,000 x 700 here), so the replicates are the same. Clustered, each
    # sample is the 2 x G array (cluster sums; cluster sizes) resampled along its last axis:
    # scipy takes the same columns of both rows. Tolerance 1e-12: the same sums in a
    # different order.
    data_rng = np.random.default_rng(2024)
    a = data_rng.random(700) < 0.70
    b = data_rng.random(900) < 0.75
    a_clusters = np.sort(data_rng.integers(0, 400, a.size)) if clustered else None
    b_clusters = np.sort(data_rng.integers(0, 500, b.size)) if clustered else None
    result = unpaired_difference(a, b, a_clusters=a_clusters, b_clusters=b_clusters, rng=99)

    def side(right, clusters):
        codes = (
            np.arange(right.size)
            if clusters is None
            else np.unique(clusters, return_inverse=True)[1]
        )
        return np.stack([np.bincount(codes, weights=right.astype(float)), np.bincount(codes)])

    def difference(x, y, axis=-1):
        return y[0].sum(axis=axis) / y[1].sum(axis=axis) - x[0].sum(axis=axis) / x[1].sum(axis=axis)

    expected = stats.bootstrap(
        (side(a, a_clusters), side(b, b_clusters)),
        difference,
        paired=False,
        vectorized=True,
        axis=-1,
        method="percentile",
        n_resamples=2000,
        confidence_level=0.95,
        rng=np.random.default_rng(99),
    ).confidence_interval
    assert (result.clusters_a, result.clusters_b) == (
        side(a, a_clusters).shape[1],
        side(b, b_clusters).shape[1],
    )
    assert result.interval.low == pytest.approx(expected.low, abs=1e-12)
    assert result.interval.high == pytest.approx(expected.high, abs=1e-12)


def test_unclustered_matches_scipy_on_the_plain_means():
    # The same check written the way a reader would call scipy on per-record 0/1 rows:
    # statistic mean(b) - mean(a). Tolerance 1e-12 as above.
    a, b = outcomes(560, 800), outcomes(610, 810)
    result = unpaired_difference(a, b, n_resamples=3000, confidence_level=0.9, rng=3)
    expected = stats.bootstrap(
        (a.astype(float), b.astype(float)),
        lambda x, y, axis=-1: y.mean(axis=axis) - x.mean(axis=axis),
        paired=False,
        vectorized=True,
        method="percentile",
        n_resamples=3000,
        confidence_level=0.9,
        rng=np.random.default_rng(3),
    ).confidence_interval
    assert result.interval.low == pytest.approx(expected.low, abs=1e-12)
    assert result.interval.high == pytest.approx(expected.high, abs=1e-12)


@pytest.mark.parametrize("method", ["newcomb", "wald"])
def test_large_sample_agrees_with_newcombe_and_wald(method):
    # 4,000 records a side, 70% and 73% right: the percentile bootstrap, Newcombe's hybrid
    # score interval (Newcombe 1998, Stat Med 17:873, method 10) and the Wald interval agree
    # to O(1/n) (they differ from each other by 0.002 SE here). Tolerance 0.1 standard
    # errors: the Monte Carlo error of a 2.5% quantile from 10,000 resamples is
    # sqrt(0.025 * 0.975 / 10000) / phi(1.96) = 0.027 SE, so 0.1 SE is nearly 4 MC SEs.
    n, right_a, right_b = 4_000, 2_800, 2_920
    result = unpaired_difference(
        outcomes(right_a, n), outcomes(right_b, n), n_resamples=10_000, rng=4
    )
    low, high = confint_proportions_2indep(
        right_b, n, right_a, n, method=method, compare="diff", alpha=0.05
    )
    se = math.sqrt(0.70 * 0.30 / n + 0.73 * 0.27 / n)
    assert result.estimate == pytest.approx(0.03, abs=1e-15)
    assert result.interval.low == pytest.approx(low, abs=0.1 * se)
    assert result.interval.high == pytest.approx(high, abs=0.1 * se)


def test_duplicated_records_widen_the_interval_by_the_design_effect():
    # Each record of both sides copied 4 times. Resampled as clusters the copies add
    # nothing: the interval is exactly that of the originals (same seed, same draws).
    # Treated as independent records it is half as wide: design effect 1 + (m - 1) rho = 4
    # for m = 4 identical copies (rho = 1; Kish 1965), standard-error ratio 2. Tolerance 10%
    # on the ratio: Monte Carlo error of two 2,000-resample widths.
    a, b = outcomes(280, 400), outcomes(300, 400)
    originals = unpaired_difference(a, b, rng=21)
    copies = np.repeat(np.arange(400), 4)
    clustered = unpaired_difference(
        a[copies], b[copies], a_clusters=copies, b_clusters=copies, rng=21
    )
    naive = unpaired_difference(a[copies], b[copies], rng=21)
    assert (clustered.clusters_a, clustered.clusters_b, naive.clusters_a) == (400, 400, 1600)
    assert clustered.estimate == pytest.approx(originals.estimate, abs=1e-15)
    assert clustered.interval.low == pytest.approx(originals.interval.low, abs=1e-15)
    assert clustered.interval.high == pytest.approx(originals.interval.high, abs=1e-15)
    width = clustered.interval.high - clustered.interval.low
    naive_width = naive.interval.high - naive.interval.low
    assert width / naive_width == pytest.approx(2.0, rel=0.10)


def test_correlated_clusters_widen_the_interval():
    # Records sharing a cluster effect (clustered_dataset): the cluster interval is wider than
    # the one that treats records as independent, by the ratio of linearised standard errors
    # of the two ratio estimators, sum over sides of sum_g (R_g - p m_g)^2 / M^2 against
    # sum_i (r_i - p)^2 / n^2 (Cochran, "Sampling Techniques", 3rd ed. 1977, section 6.4).
    # Tolerance 8% on the width ratio: Monte Carlo error of two 4,000-resample widths (about
    # 2% each) plus the O(1/G) gap between bootstrap and linearised variance.
    rng = np.random.default_rng(8)
    a, a_codes = clustered_dataset(rng)
    b, b_codes = clustered_dataset(rng)
    clustered = unpaired_difference(
        a, b, a_clusters=a_codes, b_clusters=b_codes, n_resamples=4000, rng=1
    )
    naive = unpaired_difference(a, b, n_resamples=4000, rng=1)
    ratio = (clustered.interval.high - clustered.interval.low) / (
        naive.interval.high - naive.interval.low
    )

    def variances(right, codes):
        p = right.mean()
        sums, sizes = np.bincount(codes, weights=right), np.bincount(codes)
        by_cluster = np.sum((sums - p * sizes) ** 2)
        by_record = np.sum((right - p) ** 2)
        return by_cluster / right.size**2, by_record / right.size**2

    (ca, ia), (cb, ib) = variances(a, a_codes), variances(b, b_codes)
    expected = math.sqrt((ca + cb) / (ia + ib))
    assert expected > 1.25  # the design really is clustered (1.29 here)
    assert ratio == pytest.approx(expected, rel=0.08)


def test_expanded_interval_has_the_width_of_the_welch_t_interval_with_few_records():
    # Oracle: scipy.stats.ttest_ind(equal_var=False).confidence_interval, the Welch t
    # interval (unbiased variances, Welch-Satterthwaite df), which the expanded percentile
    # interval reproduces for unclustered records (Hesterberg 2015). 25 and 24 records: the
    # plain percentile interval is 9% narrower than Welch's (plug-in variances and a normal
    # quantile); the expanded one is within 3% of it. Widths are compared because the
    # bootstrap distribution of 25 Bernoulli records is discrete and a little skewed, which
    # moves both ends together (by up to 0.04 here); 40,000 resamples keep the Monte Carlo
    # error of each end under 0.003.
    a, b = outcomes(18, 25), outcomes(15, 24)
    expanded = unpaired_difference(a, b, n_resamples=40_000, rng=1, interval="expanded")
    plain = unpaired_difference(a, b, n_resamples=40_000, rng=1)
    welch = stats.ttest_ind(b.astype(float), a.astype(float), equal_var=False)
    oracle = welch.confidence_interval(0.95)
    width = oracle.high - oracle.low  # 0.549

    def ratio(result):
        return (result.interval.high - result.interval.low) / width

    assert expanded.method == "two-sample cluster bootstrap, expanded percentile"
    assert expanded.estimate == plain.estimate == pytest.approx(15 / 24 - 18 / 25, abs=1e-15)
    assert 0.97 <= ratio(expanded) <= 1.03
    assert ratio(plain) < 0.93
    assert expanded.interval.low <= plain.interval.low and expanded.interval.high >= (
        plain.interval.high
    )


def test_expanded_interval_is_the_percentile_one_with_many_records():
    # 1,000 records a side (df about 2,000, sqrt(G / (G - 1)) = 1.0005): the two intervals
    # agree within 0.01 standard errors (0.0002 here).
    a, b = outcomes(700, 1_000), outcomes(720, 1_000)
    expanded = unpaired_difference(a, b, rng=2, interval="expanded")
    plain = unpaired_difference(a, b, rng=2)
    assert expanded.interval.low == pytest.approx(plain.interval.low, abs=2e-4)
    assert expanded.interval.high == pytest.approx(plain.interval.high, abs=2e-4)
    with pytest.raises(ValueError, match="interval='bca': must be one of percentile, expanded"):
        unpaired_difference(a, b, rng=2, interval="bca")


def test_below_minimum_sample_on_either_side_reads_insufficient():
    # Pinned policy (issue 7): below n = 20 records, or clusters, on either side no
    # estimate or interval; the counts are always returned.
    short = unpaired_difference(outcomes(10, 19), outcomes(30, 40), rng=0)
    assert (short.n_a, short.right_a, short.n_b, short.right_b) == (19, 10, 40, 30)
    assert short.estimate is None and short.interval is None and not short.sufficient
    assert unpaired_verdict(short) == INSUFFICIENT
    few_clusters = unpaired_difference(
        outcomes(20, 40), outcomes(30, 40), b_clusters=np.arange(40) // 4, rng=0
    )
    assert few_clusters.clusters_b == 10 and few_clusters.estimate is None
    assert unpaired_difference(outcomes(10, 20), outcomes(10, 20), rng=0).sufficient
    empty = unpaired_difference([], [], rng=0)
    assert (empty.n_a, empty.n_b, empty.clusters_a) == (0, 0, 0) and empty.interval is None


def test_same_seed_same_interval_and_any_hashable_ids():
    a, b = outcomes(150, 200), outcomes(170, 210)
    first = unpaired_difference(a, b, rng=7)
    assert unpaired_difference(a, b, rng=7) == first
    assert unpaired_difference(a, b, rng=np.random.default_rng(7)) == first
    assert unpaired_difference(a, b, rng=8).interval != first.interval
    assert unpaired_difference(a, b, a_clusters=np.arange(200), rng=7) == first
    groups = np.arange(210) // 3
    by_int = unpaired_difference(a, b, b_clusters=groups, rng=5)
    by_str = unpaired_difference(a, b, b_clusters=[f"g{g}" for g in groups], rng=5)
    assert by_int == by_str and by_int.clusters_b == 70


def test_no_variation_gives_a_point_interval():
    # Pinned: every record right on both sides, every replicate is 0.
    result = unpaired_difference([True] * 30, [True] * 25, rng=0)
    assert (result.estimate, result.interval.low, result.interval.high) == (0.0, 0.0, 0.0)
    assert unpaired_verdict(result) == NO_DETECTABLE_DIFFERENCE


@pytest.mark.parametrize(
    ("low", "high"),
    [(0.001, 0.05), (0.0, 0.05), (-0.05, 0.0), (-0.05, -0.001), (-0.02, 0.03)],
)
def test_unpaired_verdict_is_the_paired_verdict_rule(low, high):
    # Oracle: verdict() of the paired module on a PairedDifference with the same bounds.
    interval = Interval(low=low, high=high, confidence_level=0.95)
    estimate = {
        "estimate": 0.02,
        "interval": interval,
        "n_resamples": 2000,
        "confidence_level": 0.95,
        "method": "x",
    }
    unpaired = UnpairedDifference(100, 100, 100, 100, 70, 72, **estimate)
    paired = PairedDifference(100, 100, 70, 72, 5, 3, **estimate)
    assert unpaired_verdict(unpaired) == verdict(paired)
    assert unpaired_verdict(unpaired) in (BETTER, WORSE, NO_DETECTABLE_DIFFERENCE)


def test_two_sides_of_2500_records_are_drawn_in_four_vectorised_blocks():
    # Issue 7 scale, split in two: 2,000 resamples of 1,500 clusters a side. What keeps it fast
    # is that the resamples are drawn as whole blocks of cluster indices, never one resample
    # per Python call: 2 x 2,000 x 1,500 indices in 4 draws (blocks of 2^21 // 1,500 = 1,398
    # resamples). The wall time (about 0.1 s) is measured by benchmarks/suite_timings.py.
    data_rng = np.random.default_rng(0)
    a = data_rng.random(2_500) < 0.8
    b = data_rng.random(2_500) < 0.8
    codes = np.concatenate([np.arange(1_500), data_rng.integers(0, 1_500, 1_000)])
    counting = CountingGenerator(0)
    result = unpaired_difference(a, b, a_clusters=codes, b_clusters=codes, rng=counting)
    assert counting.draws == [(1_398, 1_500), (602, 1_500)] * 2
    # Counting does not change the stream: the same interval as the plain seed.
    assert result == unpaired_difference(a, b, a_clusters=codes, b_clusters=codes, rng=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"a_right": [[True]]}, "a_right: must be 1-d"),
        ({"b_right": [0, 2]}, "b_right: must hold booleans"),
        ({"a_clusters": [1, 2]}, "a_clusters: must hold one id per record"),
        ({"b_clusters": np.zeros((3, 1))}, "b_clusters: must be 1-d"),
        ({"n_resamples": 0}, "n_resamples"),
        ({"n_resamples": 2.5}, "n_resamples"),
        ({"confidence_level": 1.0}, "confidence_level"),
        ({"min_n": 0}, "min_n"),
    ],
)
def test_unpaired_rejects_bad_input(kwargs, message):
    arguments = {"a_right": [True, False, True], "b_right": [True, True, False]}
    arguments.update(kwargs)
    a, b = arguments.pop("a_right"), arguments.pop("b_right")
    with pytest.raises(ValueError, match=message):
        unpaired_difference(a, b, **arguments)


# --- aa_check ------------------------------------------------------------------------------


def test_identical_twin_has_no_flips_and_passes():
    # A deterministic classifier run twice: flips 0 by counting. The 20 splits of this
    # fixed 1,000-record clustered dataset (seed 0 for the data, 0 for the splits) give 1
    # false positive (seeds 0-9 for the splits give 0 to 2); the rule is <= 10%, at most 2
    # of 20. Split estimates within +-0.1 (seen: -0.082 to 0.066; the SE of a half-vs-half
    # difference is about 0.035 here, design effect included).
    right, codes = clustered_dataset(np.random.default_rng(0))
    check = aa_check(right, right, codes, rng=0)
    assert isinstance(check, AACheck)
    assert (check.n, check.n_clusters, check.splits) == (1_000, 400, 20)
    assert (check.flips, check.flip_rate) == (0, 0.0)
    assert check.false_positives == 1 and check.false_positive_rate == 0.05 <= 0.10
    assert check.passed
    assert check.false_positive_rate == check.false_positives / 20
    assert check.insufficient_splits == 0 and check.sufficient
    assert len(check.split_estimates) == 20
    assert all(abs(e) < 0.1 for e in check.split_estimates)
    assert check.max_false_positive_rate == 0.10
    assert (check.n_resamples, check.confidence_level) == (2000, 0.95)


def test_twin_that_flips_a_tenth_of_records():
    # Oracle: counting. Exactly 100 of 1,000 records flipped -> flip rate 100 / 1000 = 0.1
    # exactly (the same float); 50 flipped each way keep the twin's accuracy equal.
    right, codes = clustered_dataset(np.random.default_rng(1))
    twin = right.copy()
    flip = np.concatenate([np.flatnonzero(right)[::7][:50], np.flatnonzero(~right)[::3][:50]])
    twin[flip] = ~twin[flip]
    check = aa_check(right, twin, codes, rng=3)
    assert check.flips == 100
    assert check.flip_rate == 0.1
    assert check.passed


def test_splits_keep_clusters_whole_and_halves_are_random():
    # Every split's estimate is the twin's accuracy on the clusters of half B minus the
    # baseline's on half A. Recomputed here from the documented derivation: split k uses
    # the k-th generator spawned from default_rng(seed), whose first n_clusters uniforms
    # put cluster g in half A when below 1/2.
    right, codes = clustered_dataset(np.random.default_rng(2))
    twin = right.copy()
    twin[::9] = ~twin[::9]
    check = aa_check(right, twin, codes, splits=5, n_resamples=200, rng=11)
    for k, split_rng in enumerate(np.random.default_rng(11).spawn(5)):
        in_a = (split_rng.random(400) < 0.5)[codes]
        expected = twin[~in_a].mean() - right[in_a].mean()
        assert check.split_estimates[k] == pytest.approx(expected, abs=1e-12)


def test_reproducible_per_seed():
    right, codes = clustered_dataset(np.random.default_rng(3))
    twin = right.copy()
    twin[::10] = ~twin[::10]
    first = aa_check(right, twin, codes, rng=5)
    assert aa_check(right, twin, codes, rng=5) == first
    assert aa_check(right, twin, codes, rng=np.random.default_rng(5)) == first
    assert aa_check(right, twin, codes, rng=6).split_estimates != first.split_estimates


def test_a_twin_that_differs_fails_the_check():
    # Not an A/A at all: the "twin" loses 200 of the baseline's ~720 right records, a true
    # difference of -0.2 that every split detects. The check fails and says so.
    right, codes = clustered_dataset(np.random.default_rng(4))
    twin = right.copy()
    twin[np.flatnonzero(right)[:200]] = False
    check = aa_check(right, twin, codes, rng=0)
    assert check.flips == 200 and check.flip_rate == 0.2
    assert check.false_positives == 20 and check.false_positive_rate == 1.0
    assert not check.passed
    assert check.to_json()["passed"] is False


def test_below_minimum_sample_splits_read_insufficient_and_count_as_no_detection():
    # 30 records: every half has fewer than 20, so every split is insufficient, counted as
    # no detection; the check passes vacuously and says so through insufficientSplits.
    right = np.arange(30) % 3 != 0
    check = aa_check(right, right, None, rng=0)
    assert check.split_estimates == (None,) * 20
    assert (check.false_positives, check.insufficient_splits) == (0, 20)
    assert check.passed and not check.sufficient
    assert (check.flips, check.flip_rate) == (0, 0.0)
    # Below 20 records the flip rate itself is a derived statistic: insufficient.
    few = aa_check(right[:19], right[:19], None, rng=0)
    assert few.flips == 0 and few.flip_rate is None
    # 46 records: the halves straddle 20, so some splits are sufficient and some not.
    mixed = aa_check(np.arange(46) % 4 != 0, np.arange(46) % 4 != 0, None, rng=1)
    insufficient = sum(e is None for e in mixed.split_estimates)
    assert mixed.insufficient_splits == insufficient
    assert 0 < insufficient < 20


def test_to_json_is_camel_case():
    right, codes = clustered_dataset(np.random.default_rng(5))
    check = aa_check(right, right, codes, splits=3, n_resamples=100, rng=0)
    payload = check.to_json()
    assert payload == {
        "splits": 3,
        "falsePositives": check.false_positives,
        "falsePositiveRate": check.false_positive_rate,
        "maxFalsePositiveRate": 0.1,
        "passed": check.passed,
        "insufficientSplits": 0,
        "flips": 0,
        "flipRate": 0.0,
        "n": 1_000,
        "nClusters": 400,
        "splitEstimates": list(check.split_estimates),
        "nResamples": 100,
        "confidenceLevel": 0.95,
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        check.passed = False  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"twin_right": [True] * 4}, "pair up"),
        ({"clusters": [1, 2]}, "clusters: must hold one id per record"),
        ({"splits": 0}, "splits"),
        ({"splits": 2.0}, "splits"),
        ({"max_false_positive_rate": 1.5}, "max_false_positive_rate"),
        ({"rng": None}, "rng"),
        ({"n_resamples": 0}, "n_resamples"),
        ({"min_n": 0}, "min_n"),
    ],
)
def test_aa_check_rejects_bad_input(kwargs, message):
    arguments = {
        "baseline_right": [True, False, True],
        "twin_right": [True, True, False],
        "clusters": None,
        "rng": 0,
    }
    arguments.update(kwargs)
    baseline, twin, clusters = (
        arguments.pop("baseline_right"),
        arguments.pop("twin_right"),
        arguments.pop("clusters"),
    )
    with pytest.raises(ValueError, match=message):
        aa_check(baseline, twin, clusters, **arguments)


@pytest.mark.slow
@pytest.mark.parametrize("twin_noise", [0.0, 0.1], ids=["deterministic", "noisy-twin"])
def test_false_positive_rate_simulation(twin_noise):
    # Over 200 seeded clustered datasets (1,000 records in 400 clusters) the mean
    # false-positive rate of the 20 splits is the interval's nominal 5%: within
    # [0.02, 0.08]. The 4,000 splits are not independent (20 per dataset share records);
    # even inflating the binomial SE sqrt(0.05 * 0.95 / 4000) = 0.0034 by 2 for that, the
    # band is over 4 SEs each side. The noisy twin re-draws 10% of records at the base
    # rate: run-to-run noise with no true difference. Seen: 0.046 and 0.050.
    seeds = np.random.SeedSequence(77).spawn(200)
    rates = []
    failed = 0
    start = time.perf_counter()
    for seed in seeds:
        rng = np.random.default_rng(seed)
        right, codes = clustered_dataset(rng)
        redraw = rng.random(right.size) < twin_noise
        twin = np.where(redraw, rng.random(right.size) < right.mean(), right)
        check = aa_check(right, twin, codes, rng=rng)
        rates.append(check.false_positive_rate)
        failed += not check.passed
    mean_rate = float(np.mean(rates))
    elapsed = time.perf_counter() - start
    # ``failed``: how often a well-calibrated instrument fails the 10% rule by chance; about
    # P(Binomial(20, 0.05) >= 3) = 7.5%.
    print(f"mean false-positive rate {mean_rate:.4f}, {failed}/200 checks failed, {elapsed:.1f} s")
    assert 0.02 <= mean_rate <= 0.08


def latent_dataset(rng, sizes, cluster_sd):
    """Records in clusters of the given sizes; record i of cluster g is right when
    ``0.8 + u_g + e_i > 0``, ``u_g ~ N(0, cluster_sd^2)`` shared by the cluster (not drawn
    when ``cluster_sd`` is 0) and ``e_i ~ N(0, 1)``: a latent intra-cluster correlation of
    ``cluster_sd^2 / (cluster_sd^2 + 1)``, a share ``Phi(0.8 / sqrt(cluster_sd^2 + 1))`` right.
    The sizes are drawn before the outcomes when they are random."""
    codes = np.repeat(np.arange(sizes.size), sizes)
    shared = rng.normal(0.0, cluster_sd, sizes.size)[codes] if cluster_sd > 0 else 0.0
    right = 0.8 + shared + rng.normal(0.0, 1.0, codes.size) > 0
    return right, codes


#: The designs docs/figures.md ("A/A noise floor") measures, by the dataset's generator:
#: clusters and their sizes, and the cluster effect's standard deviation (latent intra-cluster
#: correlation 0.8 with 2, 0.95 with sqrt(19)). About 100 clusters a half except 100 x 10.
AA_DESIGNS = {
    "200x5-icc0.8": lambda rng: latent_dataset(rng, np.full(200, 5), 2.0),
    "200x1to9-icc0.8": lambda rng: latent_dataset(rng, rng.integers(1, 10, 200), 2.0),
    "200xgeometric-icc0.8": lambda rng: latent_dataset(rng, rng.geometric(0.2, 200), 2.0),
    "200x5-icc0.95": lambda rng: latent_dataset(rng, np.full(200, 5), math.sqrt(19.0)),
    "100x10-icc0.8": lambda rng: latent_dataset(rng, np.full(100, 10), 2.0),
    "200-unclustered": lambda rng: latent_dataset(rng, np.ones(200, dtype=int), 0.0),
}


#: Seeded A/A checks per design, and the seed they are spawned from.
AA_DESIGN_CHECKS, AA_DESIGN_SEED = 2_000, 1


def aa_design_false_positives(design, checks):
    """Per check, the splits reading a difference, for the first ``checks`` datasets of a
    design (an identical twin: no difference and no run-to-run noise)."""
    counts = []
    for seed in np.random.SeedSequence(AA_DESIGN_SEED).spawn(checks):
        rng = np.random.default_rng(seed)
        right, codes = AA_DESIGNS[design](rng)
        check = aa_check(right, right, codes, rng=rng)
        assert check.sufficient
        counts.append(check.false_positives)
    return np.asarray(counts)


def test_the_aa_designs_are_the_documented_ones():
    # Fast companion of the simulation below: over 100 datasets of each design, the clusters,
    # the mean records per cluster (5, or 10, or 1; tolerance 0.3, over 5 SEs of the
    # geometric sizes' mean) and the share right are the ones docs/figures.md states; the
    # share right is the latent model's Phi(0.8 / sqrt(cluster_sd^2 + 1)) (scipy): 0.640 at
    # ICC 0.8, 0.571 at 0.95, 0.788 unclustered. Tolerance 0.02: 5 SEs of a 100-dataset mean
    # (SE at most 0.004, the design effect of 10 records at ICC 0.8 included). The by-design
    # failure rate is the binomial one, and the measured range around it, below the upper figure.
    rng = np.random.default_rng(0)
    expected = {
        "200x5-icc0.8": (200, 5, 2.0),
        "200x1to9-icc0.8": (200, 5, 2.0),
        "200xgeometric-icc0.8": (200, 5, 2.0),
        "200x5-icc0.95": (200, 5, math.sqrt(19.0)),
        "100x10-icc0.8": (100, 10, 2.0),
        "200-unclustered": (200, 1, 0.0),
    }
    assert set(expected) == set(AA_DESIGNS)
    for design, (clusters, mean_size, cluster_sd) in expected.items():
        shares, sizes = [], []
        for _ in range(100):
            right, codes = AA_DESIGNS[design](rng)
            assert np.bincount(codes).size == clusters, design
            shares.append(right.mean())
            sizes.append(codes.size / clusters)
        assert np.mean(sizes) == pytest.approx(mean_size, abs=0.3), design
        share = stats.norm.cdf(0.8 / math.sqrt(cluster_sd**2 + 1))
        assert np.mean(shares) == pytest.approx(share, abs=0.02), design
    by_design, upper = CALIBRATED_FAILURE_RATES
    assert by_design == pytest.approx(stats.binom.sf(2, SPLITS, 0.05), abs=5e-5)
    lowest, highest = MEASURED_FAILURE_RATES
    assert lowest <= by_design <= highest <= upper


@pytest.mark.slow
@pytest.mark.parametrize("design", list(AA_DESIGNS))
def test_a_calibrated_instrument_fails_the_aa_rule_as_often_as_documented(design):
    # Issue 28 item 6: with no true difference the A/A rule (3 or more of 20 splits) fails
    # 7.5% of checks by design, P(Binomial(20, 0.05) >= 3); the expanded interval reads a
    # difference in a little more than 5% of splits on binary outcomes, clustered or not
    # (discreteness), which the rule amplifies. Each design's share of its 2,000 seeded
    # checks must lie in the documented measured range (MEASURED_FAILURE_RATES, 7.1% to
    # 8.5%) and its Wilson 95% interval (statsmodels) below the documented upper figure
    # (CALIBRATED_FAILURE_RATES, 10%). The splits of one dataset are independent given its
    # records (dispersion of the per-check counts against the binomial: seen 0.98-1.03,
    # asserted below 1.3), so the rule's binomial amplification is the whole story. Seen,
    # per design: docs/figures.md, "A/A noise floor".
    # Reproduce: pytest -m slow -k calibrated_instrument -s
    per_check = aa_design_false_positives(design, AA_DESIGN_CHECKS)
    splits = SPLITS * per_check.size
    split_rate = per_check.sum() / splits
    failed = int(np.count_nonzero(per_check >= 3))
    split_low, split_high = proportion_confint(int(per_check.sum()), splits, method="wilson")
    low, high = proportion_confint(failed, per_check.size, method="wilson")
    dispersion = per_check.var() / (SPLITS * split_rate * (1 - split_rate))
    print(
        f"{design}: splits reading a difference {split_rate:.4f} [{split_low:.4f}, "
        f"{split_high:.4f}] of {splits}, checks failed {failed / per_check.size:.4f} "
        f"[{low:.4f}, {high:.4f}] of {per_check.size}, dispersion {dispersion:.2f}"
    )
    lowest, highest = MEASURED_FAILURE_RATES
    assert dispersion < 1.3
    assert lowest <= round(failed / per_check.size, 3) <= highest
    assert high <= CALIBRATED_FAILURE_RATES[1]
