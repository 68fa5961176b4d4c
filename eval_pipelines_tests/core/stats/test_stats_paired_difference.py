"""The paired difference and its cluster-bootstrap interval, against independent oracles.

Oracles: scipy.stats.bootstrap (the same resampling done by a general implementation), the
Wald and Newcombe paired-difference intervals (closed forms, themselves checked against the
published values of Fagerland, Lydersen & Laake 2017), the design effect of duplicated
records, and a coverage simulation.
"""

import math
import time

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from eval_pipelines.core.stats import (
    BETTER,
    INSUFFICIENT,
    NO_DETECTABLE_DIFFERENCE,
    WORSE,
    Interval,
    PairedDifference,
    paired_difference,
    verdict,
)
from eval_pipelines_tests.helpers.draws import CountingGenerator


def records(both_right: int, newly_right: int, newly_wrong: int, both_wrong: int):
    """Per-record (baseline_right, candidate_right) arrays for a paired 2x2 table."""
    baseline = np.repeat(
        [True, False, True, False], [both_right, newly_right, newly_wrong, both_wrong]
    )
    candidate = np.repeat(
        [True, True, False, False], [both_right, newly_right, newly_wrong, both_wrong]
    )
    return baseline, candidate


def wald_paired(newly_right: int, newly_wrong: int, n: int, level: float = 0.95):
    """Wald interval for a difference of paired proportions (Agresti 2013, section 11.1.2)."""
    z = stats.norm.ppf(0.5 + level / 2)
    estimate = (newly_right - newly_wrong) / n
    se = math.sqrt((newly_right + newly_wrong) / n - estimate**2) / math.sqrt(n)
    return estimate - z * se, estimate + z * se


def newcombe_paired(both_right, newly_right, newly_wrong, both_wrong, level: float = 0.95):
    """Newcombe's square-and-add interval (Newcombe 1998, Stat Med 17:2635, method 10).

    Rows are the candidate, columns the baseline; Wilson limits from statsmodels, and the
    correlation corrected as in Newcombe's paper (``AD - BC`` reduced by ``N / 2`` when
    positive).
    """
    n = both_right + newly_right + newly_wrong + both_wrong
    candidate_right = both_right + newly_right
    baseline_right = both_right + newly_wrong
    p1, p2 = candidate_right / n, baseline_right / n
    l1, u1 = proportion_confint(candidate_right, n, alpha=1 - level, method="wilson")
    l2, u2 = proportion_confint(baseline_right, n, alpha=1 - level, method="wilson")
    margins = candidate_right * (n - candidate_right) * baseline_right * (n - baseline_right)
    cross = both_right * both_wrong - newly_right * newly_wrong
    if margins == 0 or 0 <= cross <= n / 2:
        phi = 0.0
    elif cross > n / 2:
        phi = (cross - n / 2) / math.sqrt(margins)
    else:
        phi = cross / math.sqrt(margins)
    estimate = p1 - p2
    low = estimate - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2))
    high = estimate + math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1))
    return low, high


def test_oracle_formulas_match_published_values():
    # Cavo et al. (2012) table, as analysed in Fagerland, Lydersen & Laake, "Statistical
    # Analysis of Contingency Tables" (2017), chapter 8: rows 59, 6 / 16, 80. Published 95%
    # intervals (4 d.p., reproduced by the R package contingencytables, test-ch8.R):
    # Wald -0.1184 to -0.0058, Newcombe square-and-add -0.1186 to -0.0046.
    # Tolerance 5e-5: half a unit in the fourth decimal.
    low, high = wald_paired(newly_right=6, newly_wrong=16, n=161)
    assert (low, high) == pytest.approx((-0.1184, -0.0058), abs=5e-5)
    low, high = newcombe_paired(59, 6, 16, 80)
    assert (low, high) == pytest.approx((-0.1186, -0.0046), abs=5e-5)


def test_counts_and_estimate():
    baseline, candidate = records(both_right=50, newly_right=12, newly_wrong=5, both_wrong=33)
    result = paired_difference(baseline, candidate, rng=1)
    assert isinstance(result, PairedDifference)
    assert (result.n, result.n_clusters) == (100, 100)
    assert (result.baseline_right, result.candidate_right) == (55, 62)
    assert (result.newly_right, result.newly_wrong, result.discordant) == (12, 5, 17)
    assert result.estimate == pytest.approx(0.07, abs=1e-15)
    assert result.n_resamples == 2000
    assert result.confidence_level == 0.95
    assert result.method == "cluster bootstrap, percentile"
    assert result.interval is not None
    assert result.interval.low <= result.estimate <= result.interval.high


def test_integer_outcomes_are_accepted():
    baseline, candidate = records(40, 6, 2, 12)
    as_bool = paired_difference(baseline, candidate, rng=3)
    as_int = paired_difference(baseline.astype(int).tolist(), candidate.astype(int), rng=3)
    assert as_bool == as_int


def test_below_minimum_sample_reads_insufficient_with_counts():
    # Pinned policy (issue 7): below n = 20 no estimate or interval, raw counts always.
    baseline, candidate = records(10, 5, 1, 3)
    result = paired_difference(baseline, candidate, rng=0)
    assert result.n == 19
    assert (result.newly_right, result.newly_wrong) == (5, 1)
    assert result.estimate is None and result.interval is None
    assert not result.sufficient
    assert verdict(result) == INSUFFICIENT == "insufficient_evidence"
    assert paired_difference(*records(10, 5, 1, 4), rng=0).sufficient


def test_no_records():
    result = paired_difference([], [], rng=0)
    assert (result.n, result.n_clusters, result.discordant) == (0, 0, 0)
    assert result.estimate is None and result.interval is None
    assert verdict(result) == INSUFFICIENT


def test_minimum_sample_counts_clusters():
    # 40 records in 10 clusters: the clusters are the independent units, fewer than 20.
    baseline, candidate = records(20, 12, 2, 6)
    clusters = np.arange(40) // 4
    result = paired_difference(baseline, candidate, clusters=clusters, rng=0)
    assert (result.n, result.n_clusters) == (40, 10)
    assert result.estimate is None and result.interval is None
    assert result.newly_right == 12


def test_no_disagreement_gives_a_point_interval_and_no_difference():
    # Pinned policy: every replicate equals 0, so the interval is [0, 0].
    baseline, candidate = records(30, 0, 0, 10)
    result = paired_difference(baseline, candidate, rng=0)
    assert result.estimate == 0.0
    assert (result.interval.low, result.interval.high) == (0.0, 0.0)
    assert verdict(result) == NO_DETECTABLE_DIFFERENCE


def test_same_seed_same_interval():
    baseline, candidate = records(120, 25, 11, 44)
    first = paired_difference(baseline, candidate, rng=7)
    assert paired_difference(baseline, candidate, rng=7) == first
    assert paired_difference(baseline, candidate, rng=np.random.default_rng(7)) == first
    assert paired_difference(baseline, candidate, rng=8).interval != first.interval


def test_singleton_clusters_equal_no_clusters_and_ids_are_any_hashable():
    baseline, candidate = records(120, 25, 11, 44)
    n = baseline.size
    plain = paired_difference(baseline, candidate, rng=11)
    assert paired_difference(baseline, candidate, clusters=np.arange(n), rng=11) == plain
    # The same grouping spelled with integers, strings and tuples resamples identically.
    groups = np.arange(n) // 3
    by_int = paired_difference(baseline, candidate, clusters=groups, rng=5)
    by_str = paired_difference(baseline, candidate, clusters=[f"g{g}" for g in groups], rng=5)
    by_tuple = paired_difference(
        baseline, candidate, clusters=[("k", int(g)) for g in groups], rng=5
    )
    assert by_int == by_str
    assert by_int.interval == by_tuple.interval
    assert by_int.n_clusters == 67


@pytest.mark.parametrize("clustered", [False, True])
def test_matches_scipy_bootstrap_resampling(clustered):
    # expected from scipy.stats.bootstrap(method="percentile", paired=True), the general
    # implementation resampling the same units with the same generator: scipy draws
    # rng.integers(0, G, (n_resamples, G)) in one batch, as this module does while
    # n_resamples * G stays under its block size (2,000 x 600 here). Tolerance 1e-12: the same
    # sums in a different order.
    data_rng = np.random.default_rng(2024)
    n = 900
    baseline = data_rng.random(n) < 0.7
    candidate = np.where(data_rng.random(n) < 0.8, baseline, ~baseline)
    clusters = np.sort(data_rng.integers(0, 600, n)) if clustered else None
    result = paired_difference(baseline, candidate, clusters=clusters, rng=99)

    codes = np.unique(clusters, return_inverse=True)[1] if clustered else np.arange(n)
    diffs = candidate.astype(int) - baseline.astype(int)
    sums = np.bincount(codes, weights=diffs)
    sizes = np.bincount(codes).astype(float)

    def ratio(s, m, axis=-1):
        return s.sum(axis=axis) / m.sum(axis=axis)

    expected = stats.bootstrap(
        (sums, sizes),
        ratio,
        paired=True,
        vectorized=True,
        method="percentile",
        n_resamples=2000,
        confidence_level=0.95,
        rng=np.random.default_rng(99),
    ).confidence_interval
    assert result.n_clusters == sums.size
    assert result.interval.low == pytest.approx(expected.low, abs=1e-12)
    assert result.interval.high == pytest.approx(expected.high, abs=1e-12)


def test_large_sample_agrees_with_wald_and_newcombe():
    # With each record its own cluster and n = 4,000 (332 discordant), the bootstrap
    # percentile interval, the Wald interval and Newcombe's method 10 agree to O(1/n).
    # Tolerance 0.1 standard errors: the Monte Carlo error of a 2.5% quantile from 10,000
    # resamples is sqrt(0.025 * 0.975 / 10000) / phi(1.96) = 0.027 SE, so 0.1 SE is
    # nearly 4 Monte Carlo SEs.
    table = (3_000, 200, 132, 668)
    baseline, candidate = records(*table)
    result = paired_difference(baseline, candidate, n_resamples=10_000, rng=4)
    n = sum(table)
    se = math.sqrt((332 / n - (68 / n) ** 2) / n)
    wald = wald_paired(200, 132, n)
    newcombe = newcombe_paired(*table)
    assert result.estimate == pytest.approx(68 / n, abs=1e-15)
    for low, high in (wald, newcombe):
        assert result.interval.low == pytest.approx(low, abs=0.1 * se)
        assert result.interval.high == pytest.approx(high, abs=0.1 * se)


def test_published_example_is_close_to_wald():
    # The Cavo et al. table (n = 161, 22 discordant): bootstrap and Wald differ by the
    # skewness of 22 discordant pairs plus Monte Carlo error; 0.25 standard errors bounds
    # both here (the Wald and Newcombe limits themselves differ by 0.17 SE at the top).
    # Rows are the candidate, columns the baseline: 6 newly right, 16 newly wrong.
    baseline, candidate = records(59, 6, 16, 80)
    result = paired_difference(baseline, candidate, n_resamples=10_000, rng=12)
    se = math.sqrt((22 / 161 - (10 / 161) ** 2) / 161)
    assert result.estimate == pytest.approx(-10 / 161, abs=1e-15)
    assert result.interval.low == pytest.approx(-0.1184, abs=0.25 * se)
    assert result.interval.high == pytest.approx(-0.0058, abs=0.25 * se)


def test_duplicated_records_widen_the_interval_by_the_design_effect():
    # Each of 400 pairs copied 4 times. Resampled as clusters, the copies add nothing: the
    # interval is exactly that of the 400 originals (same seed, same draws). Treated as
    # 1,600 independent records, it is half as wide: design effect 1 + (m - 1) rho = 4 for
    # m = 4 identical copies (rho = 1; Kish 1965), so the standard error ratio is 2.
    # Tolerance 10% on the ratio: Monte Carlo error of two 2,000-resample widths.
    baseline, candidate = records(250, 60, 30, 60)
    originals = paired_difference(baseline, candidate, rng=21)
    copies = np.repeat(np.arange(400), 4)
    clustered = paired_difference(baseline[copies], candidate[copies], clusters=copies, rng=21)
    naive = paired_difference(baseline[copies], candidate[copies], rng=21)
    assert clustered.estimate == originals.estimate == naive.estimate
    assert clustered.interval.low == pytest.approx(originals.interval.low, abs=1e-15)
    assert clustered.interval.high == pytest.approx(originals.interval.high, abs=1e-15)
    width = clustered.interval.high - clustered.interval.low
    naive_width = naive.interval.high - naive.interval.low
    assert width / naive_width == pytest.approx(2.0, rel=0.10)


def test_positively_correlated_clusters_widen_the_interval_as_the_linearised_variance():
    # Near-duplicate clusters: each record copies its cluster's outcome pair with
    # probability 0.8. The cluster interval must be wider than the one that treats records
    # as independent, by the ratio of standard errors of the ratio estimator sum D / sum m:
    # linearised variance sum (D_g - est m_g)^2 / M^2 against sum (d_i - est)^2 / n^2
    # (Cochran, "Sampling Techniques", 3rd ed. 1977, section 6.4). Tolerance 8% on the
    # width ratio: Monte Carlo error of two 4,000-resample widths (about 2% each) plus the
    # O(1/G) gap between bootstrap and linearised variance.
    data_rng = np.random.default_rng(0)
    sizes = data_rng.integers(1, 5, size=600)
    codes = np.repeat(np.arange(sizes.size), sizes)
    shares = [0.70, 0.12, 0.06, 0.12]  # both right, newly right, newly wrong, both wrong
    cluster_kind = data_rng.choice(4, size=sizes.size, p=shares)[codes]
    own_kind = data_rng.choice(4, size=codes.size, p=shares)
    kind = np.where(data_rng.random(codes.size) < 0.8, cluster_kind, own_kind)
    baseline, candidate = np.isin(kind, (0, 2)), np.isin(kind, (0, 1))

    clustered = paired_difference(baseline, candidate, clusters=codes, n_resamples=4000, rng=1)
    naive = paired_difference(baseline, candidate, n_resamples=4000, rng=1)
    ratio = (clustered.interval.high - clustered.interval.low) / (
        naive.interval.high - naive.interval.low
    )
    d = candidate.astype(int) - baseline.astype(int)
    estimate = d.mean()
    cluster_sums, cluster_sizes = np.bincount(codes, weights=d), np.bincount(codes)
    var_clustered = np.sum((cluster_sums - estimate * cluster_sizes) ** 2)
    var_independent = np.sum((d - estimate) ** 2)
    expected = math.sqrt(var_clustered / var_independent)
    assert expected > 1.4  # the design really is clustered
    assert ratio == pytest.approx(expected, rel=0.08)


def test_verdict_words():
    # Pinned: the interval alone decides; a bound exactly at 0 is no detectable difference.
    assert verdict(paired_difference(*records(150, 40, 5, 5), rng=0)) == BETTER == "better"
    assert verdict(paired_difference(*records(150, 5, 40, 5), rng=0)) == WORSE == "worse"
    assert verdict(paired_difference(*records(150, 10, 10, 30), rng=0)) == NO_DETECTABLE_DIFFERENCE
    assert NO_DETECTABLE_DIFFERENCE == "no detectable difference"


def test_5000_records_in_3000_clusters_are_drawn_in_three_vectorised_blocks():
    # Issue 7 scale: 2,000 resamples of 3,000 clusters over 5,000 records. What keeps it fast
    # is that the resamples are drawn as whole blocks of cluster indices, never one resample
    # per Python call: 2,000 x 3,000 indices in 3 draws (blocks of 2^21 // 3,000 = 699
    # resamples). The wall time (about 0.1 s) is measured by benchmarks/suite_timings.py.
    data_rng = np.random.default_rng(0)
    codes = np.concatenate([np.arange(3_000), data_rng.integers(0, 3_000, 2_000)])
    baseline = data_rng.random(5_000) < 0.8
    candidate = data_rng.random(5_000) < 0.82
    counting = CountingGenerator(0)
    result = paired_difference(baseline, candidate, clusters=codes, rng=counting)
    assert counting.draws == [(699, 3_000), (699, 3_000), (602, 3_000)]
    assert result.n_clusters == 3_000
    # Counting does not change the stream: the same interval as the plain seed.
    assert result == paired_difference(baseline, candidate, clusters=codes, rng=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"baseline_right": [True] * 3, "candidate_right": [True] * 4}, "pair up"),
        ({"baseline_right": [[True]], "candidate_right": [[True]]}, "1-d"),
        ({"baseline_right": [0, 2], "candidate_right": [0, 1]}, "booleans"),
        ({"baseline_right": ["a"], "candidate_right": ["b"]}, "booleans"),
        ({"clusters": [1, 2]}, "clusters"),
        ({"n_resamples": 0}, "n_resamples"),
        ({"n_resamples": 2.5}, "n_resamples"),
        ({"confidence_level": 1.0}, "confidence_level"),
        ({"confidence_level": 0.0}, "confidence_level"),
        ({"min_n": 0}, "min_n"),
    ],
)
def test_rejects_bad_input(kwargs, message):
    arguments = {"baseline_right": [True, False, True], "candidate_right": [True, True, False]}
    arguments.update(kwargs)
    baseline = arguments.pop("baseline_right")
    candidate = arguments.pop("candidate_right")
    with pytest.raises(ValueError, match=message):
        paired_difference(baseline, candidate, **arguments)


def _probit_pairs(rng, n_clusters, max_size, cluster_sd):
    """Clustered paired outcomes with a known true difference.

    Record i of cluster g is right under a side when ``a + u_g + e_i > 0`` with a shared
    cluster effect ``u_g ~ N(0, cluster_sd^2)`` and within-record errors correlated 0.5,
    so P(right) = Phi(a / sqrt(1 + cluster_sd^2)) exactly.
    """
    sizes = rng.integers(1, max_size + 1, size=n_clusters)
    codes = np.repeat(np.arange(n_clusters), sizes)
    shared = rng.normal(0.0, cluster_sd, n_clusters)[codes] if cluster_sd else 0.0
    e1 = rng.standard_normal(codes.size)
    e2 = 0.5 * e1 + math.sqrt(0.75) * rng.standard_normal(codes.size)
    baseline = 1.0 + shared + e1 > 0
    candidate = 1.2 + shared + e2 > 0
    return baseline, candidate, codes


@pytest.mark.slow
@pytest.mark.parametrize(
    ("max_size", "cluster_sd"),
    [(1, 0.0), (4, 1.0)],
    ids=["records", "clusters-of-1-to-4"],
)
def test_coverage_simulation(max_size, cluster_sd):
    # Issue 7: the 95% interval covers the true difference in at least 93% of 1,000 seeded
    # simulations. 400 clusters (400 records, or about 1,000 in clusters of 1-4 sharing a
    # cluster effect), the default 2,000 resamples each. True difference
    # Phi(1.2 / s) - Phi(1.0 / s), s = sqrt(1 + cluster_sd^2). Monte Carlo SE of the
    # coverage at 95%: sqrt(0.95 * 0.05 / 1000) = 0.0069, so 93% is 2.9 SE below nominal.
    scale = math.sqrt(1 + cluster_sd**2)
    truth = stats.norm.cdf(1.2 / scale) - stats.norm.cdf(1.0 / scale)
    seeds = np.random.SeedSequence(20_260_707 + max_size).spawn(1_000)
    covered = 0
    start = time.perf_counter()
    for seed in seeds:
        rng = np.random.default_rng(seed)
        baseline, candidate, codes = _probit_pairs(rng, 400, max_size, cluster_sd)
        result = paired_difference(baseline, candidate, clusters=codes, rng=rng)
        covered += result.interval.low <= truth <= result.interval.high
    coverage = covered / len(seeds)
    elapsed = time.perf_counter() - start
    print(f"coverage {coverage:.3f} (MC SE 0.007) in {elapsed:.1f} s")
    assert coverage >= 0.93


@pytest.mark.slow
def test_false_positive_rate_without_a_difference():
    # With no true difference and few discordant pairs (n = 200, 4% discordant, about 8
    # pairs) the interval excludes 0 in at most its nominal 5% of 1,000 seeded simulations;
    # 0.065 allows 2.2 Monte Carlo SEs (sqrt(0.05 * 0.95 / 1000) = 0.0069).
    seeds = np.random.SeedSequence(404).spawn(1_000)
    false_positives = 0
    for seed in seeds:
        rng = np.random.default_rng(seed)
        cells = rng.multinomial(200, [0.80, 0.02, 0.02, 0.16])
        result = paired_difference(*records(*cells), rng=rng)
        false_positives += verdict(result) != NO_DETECTABLE_DIFFERENCE
    rate = false_positives / len(seeds)
    print(f"false-positive rate {rate:.3f} (MC SE 0.007)")
    assert rate <= 0.065


@pytest.mark.parametrize(
    ("low", "high", "word"),
    [
        (0.001, 0.05, BETTER),
        (0.0, 0.05, NO_DETECTABLE_DIFFERENCE),  # touching zero is not above it
        (-0.05, 0.0, NO_DETECTABLE_DIFFERENCE),
        (-0.05, -0.001, WORSE),
        (-0.02, 0.03, NO_DETECTABLE_DIFFERENCE),
    ],
)
def test_verdict_reads_only_the_bounds(low, high, word):
    result = PairedDifference(
        n=100,
        n_clusters=100,
        baseline_right=70,
        candidate_right=72,
        newly_right=5,
        newly_wrong=3,
        estimate=0.02,
        interval=Interval(low=low, high=high, confidence_level=0.95),
        n_resamples=2000,
        confidence_level=0.95,
        method="cluster bootstrap, percentile",
    )
    assert verdict(result) == word
