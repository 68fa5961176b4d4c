"""Live lift on simulated traffic with a known truth, and the power diagnostic beside it.

Oracles: the simulation's true rates (a probit model with a cluster random effect, whose
marginal per-request rate is known in closed form), counting for the estimate and the arm
counts, the linearised standard error of two ratio estimators (Cochran 1977) for the MDE,
statsmodels' normal power for the MDE formula, and the A/A rule of core.stats.
"""

import dataclasses
import json
import math

import numpy as np
import polars as pl
import pytest
from scipy import special
from statsmodels.stats.power import normal_power_het

from eval_pipelines.core.lift.lift import (
    INFERIOR,
    INSUFFICIENT,
    NOT_ESTABLISHED,
    PARKED,
    SUPERIOR,
    ArmSummary,
    LiftResult,
    live_lift,
)
from eval_pipelines.core.stats import Interval
from eval_pipelines.core.stats.lift_power import (
    interval_standard_error,
    minimum_detectable_effect_from_se,
)
from eval_pipelines_tests.helpers.clustered_lift_traffic import COLUMNS, simulate_traffic


def plain_events(treated_right, treated_n, control_right, control_n, *, treated_clusters=None):
    """Unclustered events (one cluster per request) with exact counts."""
    rows = []
    for arm, right, n in (
        ("treated", treated_right, treated_n),
        ("lever_holdout", control_right, control_n),
    ):
        for i in range(n):
            cluster = f"{arm}{i}"
            if arm == "treated" and treated_clusters is not None:
                cluster = f"{arm}{i % treated_clusters}"
            rows.append(("w1", "fact", "routine", arm, "e1", "declared", cluster, i < right))
    return pl.DataFrame(
        [list(row) for row in rows],
        schema={name: pl.Boolean if name == "outcome" else pl.String for name in COLUMNS},
        orient="row",
    )


@pytest.fixture(scope="module")
def lifted_traffic():
    return simulate_traffic(np.random.default_rng(2024))


@pytest.fixture(scope="module")
def null_traffic():
    return simulate_traffic(np.random.default_rng(2025), treated_rate=0.60)


def resolved_rate(frame, arm):
    outcomes = frame.filter((pl.col("exposure_arm") == arm) & pl.col("outcome").is_not_null())
    return outcomes.get_column("outcome").mean()


# --- the verdict ---------------------------------------------------------------------------


@pytest.mark.exhaustive
def test_known_lift_is_superior(lifted_traffic):
    # 4,000 clusters, control 0.60, treated 0.66 (true lift 0.06). The standard error of the
    # difference is about 0.012 here (design effect included), so the lower bound sits near
    # 0.06 - 2 x 0.012 > 0: superiority is found at any seed short of a 4-SE accident.
    result = live_lift(lifted_traffic, workspace_id="w1", epoch="e1", rng=0)
    assert isinstance(result, LiftResult)
    assert result.verdict == SUPERIOR
    assert result.aa.passed and result.aa.sufficient and result.aa.splits == 20
    difference = result.difference
    assert difference.interval.low > 0.0
    assert difference.interval.low <= 0.06 <= difference.interval.high
    # Counting oracle: treated resolved mean minus lever_holdout resolved mean.
    expected = resolved_rate(lifted_traffic, "treated") - resolved_rate(
        lifted_traffic, "lever_holdout"
    )
    assert difference.estimate == pytest.approx(expected, abs=1e-12)
    assert "superior" in result.message and "interval" in result.message
    assert f"n = {difference.n_b} treated" in result.message


@pytest.mark.exhaustive
def test_no_true_lift_is_not_superior_and_the_aa_passes(null_traffic):
    # Both arms 0.60. The A/A on the control arm's clusters: 1 of 20 splits detects a
    # difference at this seed (rule: at most 2). The lift's interval contains zero.
    result = live_lift(null_traffic, workspace_id="w1", epoch="e1", rng=0)
    assert result.aa.passed and result.aa.sufficient
    assert result.aa.false_positive_rate <= 0.10
    assert result.verdict == NOT_ESTABLISHED != SUPERIOR
    assert result.difference.interval.low <= 0.0 <= result.difference.interval.high
    assert "no lift established" in result.message


@pytest.mark.exhaustive
def test_a_true_loss_is_inferior():
    traffic = simulate_traffic(np.random.default_rng(7), treated_rate=0.54)
    result = live_lift(traffic, workspace_id="w1", epoch="e1", rng=1)
    assert result.verdict == INFERIOR
    assert result.difference.interval.high < 0.0


def test_a_failed_aa_parks_the_instrument(lifted_traffic):
    # A construction that violates the A/A rule by mechanism, not by luck: a bootstrap of 4
    # resamples. Its percentile "95%" interval spans roughly the range of 4 replicates, and
    # a fresh draw falls outside the range of 4 with probability 2/5, so about 40% of the 20
    # A/A splits declare a difference (8 of 20 at this seed); below 10% would need 2 or
    # fewer, probability P(Bin(20, 0.4) <= 2) = 0.004. The instrument is parked even though
    # the traffic carries a true lift of 0.06 (which the default 2,000 resamples confirm):
    # no lift is read, and no difference is computed.
    #
    # Data alone does not make a reliable failing case: the A/A splits on the same cluster
    # tokens the bootstrap resamples, so tokens that are too fine (e.g. one per request
    # while outcomes are correlated within a trace) make random halves that the bootstrap
    # describes correctly. Rare outcomes and very uneven cluster sizes were tried: mean
    # false-positive rates 0.07-0.09, failing only 10-25% of seeds.
    result = live_lift(lifted_traffic, workspace_id="w1", epoch="e1", rng=0, n_resamples=4)
    assert not result.aa.passed and result.aa.false_positive_rate > 0.10
    assert result.verdict == PARKED
    assert result.difference is None and result.mde is None
    assert "parked" in result.message and "no lift is read" in result.message
    assert result.to_json()["difference"] is None
    # The counts are still reported.
    assert result.treated.resolved > 0 and result.control.resolved > 0


def test_insufficient_below_twenty():
    # Pinned policy: 19 resolved treated outcomes (and 5 censored ones, which do not count
    # towards n) read insufficient_evidence, never a computed-looking number; the counts
    # are reported.
    frame = plain_events(12, 19, 120, 200)
    censored = frame.head(5).with_columns(
        pl.lit(None, pl.Boolean).alias("outcome"),
        pl.lit("treated").alias("exposure_arm"),
        (pl.lit("c") + pl.col("cluster")).alias("cluster"),
    )
    result = live_lift(pl.concat([frame, censored]), workspace_id="w1", epoch="e1", rng=0)
    assert result.verdict == INSUFFICIENT == "insufficient_evidence"
    assert result.difference.estimate is None and result.difference.interval is None
    assert result.mde is None
    assert (result.treated.total, result.treated.resolved, result.treated.censored) == (24, 19, 5)
    assert result.treated.censored_share == 5 / 24
    assert "insufficient_evidence" in result.message
    assert "does not imply a lift" in result.message
    assert "0.632" not in result.message  # 12 / 19 is not shown as a rate
    assert result.to_json()["difference"]["estimate"] == INSUFFICIENT
    # 40 treated outcomes in 10 clusters: enough records, too few independent units.
    few_clusters = live_lift(
        plain_events(25, 40, 120, 200, treated_clusters=10), workspace_id="w1", epoch="e1", rng=0
    )
    assert few_clusters.verdict == INSUFFICIENT and few_clusters.treated.clusters == 10


def test_an_unchecked_instrument_reads_insufficient():
    # 30 control clusters: the lift itself has enough (>= 20 per arm), but A/A halves of 30
    # clusters fall below 20 clusters, so the check passes only vacuously. A vacuous pass is
    # no pass: the verdict is insufficient_evidence, whatever the interval says.
    result = live_lift(plain_events(500, 600, 10, 30), workspace_id="w1", epoch="e1", rng=0)
    assert result.difference.interval is not None and result.difference.interval.low > 0.0
    assert result.aa.passed and not result.aa.sufficient
    assert result.verdict == INSUFFICIENT
    assert "A/A check could not run" in result.message
    assert "does not imply a lift" in result.message


# --- scope, epochs, arms -------------------------------------------------------------------


@pytest.mark.exhaustive
def test_other_arms_epochs_and_workspaces_are_not_read(lifted_traffic):
    # The standing holdout (all right), pre_lever and imported rows, another epoch whose
    # treated arm is all wrong and another workspace: none of them may move the result.
    # Oracle: the result on the lift's own rows alone, same seed, equal to the bit.
    rng = np.random.default_rng(5)
    noise = [
        simulate_traffic(rng, clusters=600, arms=("holdout", "pre_lever"), prefix="h"),
        simulate_traffic(rng, clusters=300, arms=("imported", "holdout"), prefix="i"),
        simulate_traffic(rng, clusters=600, epoch="e0", treated_rate=0.01, prefix="old"),
        simulate_traffic(rng, clusters=600, workspace_id="w2", prefix="w2-"),
    ]
    noisy = pl.concat([lifted_traffic, *noise])
    alone = live_lift(lifted_traffic, workspace_id="w1", epoch="e1", rng=3)
    assert live_lift(noisy, workspace_id="w1", epoch="e1", rng=3) == alone


def test_an_absent_epoch_is_refused_and_names_the_epochs_held(lifted_traffic):
    old = simulate_traffic(np.random.default_rng(1), clusters=200, epoch="e0")
    with pytest.raises(ValueError, match=r"no events of this epoch .*epochs held: e0, e1"):
        live_lift(pl.concat([old, lifted_traffic]), workspace_id="w1", epoch="e2", rng=0)
    with pytest.raises(ValueError, match="epochs held: none"):
        live_lift(lifted_traffic, workspace_id="w9", epoch="e1", rng=0)


@pytest.mark.exhaustive
def test_scope_filters(lifted_traffic):
    inferred = lifted_traffic.head(3_000).with_columns(
        pl.lit("inferred").alias("source"), pl.lit("preference").alias("claim_type")
    )
    declared = lifted_traffic.tail(lifted_traffic.height - 3_000)
    both = pl.concat([inferred, declared])
    scoped = live_lift(both, workspace_id="w1", epoch="e1", source="declared", rng=4)
    assert scoped == live_lift(declared, workspace_id="w1", epoch="e1", source="declared", rng=4)
    assert scoped.source == "declared" and scoped.claim_type is None
    by_claim = live_lift(both, workspace_id="w1", epoch="e1", claim_type="preference", rng=4)
    assert by_claim.treated.total + by_claim.control.total == 3_000
    assert "claim type preference" in by_claim.message and "every source" in by_claim.message


def test_mixed_clusters_are_left_out_of_both_arms():
    # A cluster token seen in two arms is a mixed artifact: ineligible, counted, not scored.
    frame = plain_events(70, 100, 60, 100)
    mixed = frame.filter(pl.col("cluster").is_in(["treated0", "treated1"])).with_columns(
        pl.lit("lever_holdout").alias("exposure_arm")
    )
    holdout_mix = frame.filter(pl.col("cluster") == "treated2").with_columns(
        pl.lit("holdout").alias("exposure_arm")
    )
    result = live_lift(pl.concat([frame, mixed, holdout_mix]), workspace_id="w1", epoch="e1", rng=0)
    assert result.mixed_clusters == 3
    assert (result.treated.total, result.control.total) == (97, 100)
    assert "3 mixed clusters" in result.message


@pytest.mark.exhaustive
def test_censored_outcomes_are_counted_not_scored(lifted_traffic):
    result = live_lift(lifted_traffic, workspace_id="w1", epoch="e1", rng=0)
    treated = lifted_traffic.filter(pl.col("exposure_arm") == "treated")
    censored = treated.get_column("outcome").null_count()
    assert isinstance(result.treated, ArmSummary)
    assert (result.treated.total, result.treated.censored) == (treated.height, censored)
    assert result.treated.resolved == treated.height - censored == result.difference.n_b
    assert result.treated.censored_share == pytest.approx(censored / treated.height, abs=1e-15)
    assert result.treated.clusters == treated.get_column("cluster").n_unique()
    assert result.control.arm == "lever_holdout" and result.treated.arm == "treated"


def test_same_seed_same_result():
    traffic = simulate_traffic(np.random.default_rng(3), clusters=600)
    first = live_lift(traffic, workspace_id="w1", epoch="e1", rng=9, n_resamples=500)
    again = live_lift(traffic, workspace_id="w1", epoch="e1", rng=9, n_resamples=500)
    generator = np.random.default_rng(9)
    assert again == first
    assert live_lift(traffic, workspace_id="w1", epoch="e1", rng=generator, n_resamples=500) == (
        first
    )
    other = live_lift(traffic, workspace_id="w1", epoch="e1", rng=10, n_resamples=500)
    assert other.difference.interval != first.difference.interval
    with pytest.raises(ValueError, match="rng"):
        live_lift(traffic, workspace_id="w1", epoch="e1", rng=None)


# --- the minimum detectable effect ---------------------------------------------------------


@pytest.mark.exhaustive
def test_mde_is_the_power_diagnostic_of_the_bootstrap_standard_error(lifted_traffic):
    # Oracle: the linearised standard error of the difference of two ratio estimators,
    # sqrt(sum over arms of sum_g (R_g - p m_g)^2 / M^2) (Cochran, "Sampling Techniques",
    # 3rd ed. 1977, section 6.4), times z_0.975 + z_0.8 = 2.8016. Tolerance 8%: Monte Carlo
    # error of a 2,000-resample interval width (about 2%) plus the O(1/G) gap between the
    # bootstrap and linearised variances.
    result = live_lift(lifted_traffic, workspace_id="w1", epoch="e1", rng=0)

    def variance(arm):
        rows = lifted_traffic.filter(
            (pl.col("exposure_arm") == arm) & pl.col("outcome").is_not_null()
        )
        per_cluster = rows.group_by("cluster").agg(
            pl.col("outcome").sum().alias("right"), pl.len().alias("size")
        )
        right = per_cluster.get_column("right").to_numpy().astype(float)
        size = per_cluster.get_column("size").to_numpy().astype(float)
        p = right.sum() / size.sum()
        return np.sum((right - p * size) ** 2) / size.sum() ** 2

    se = math.sqrt(variance("treated") + variance("lever_holdout"))
    assert result.mde == pytest.approx(2.8016 * se, rel=0.08)
    assert result.mde == minimum_detectable_effect_from_se(
        interval_standard_error(result.difference.interval)
    )
    assert "power diagnostic, not the verdict" in result.message


@pytest.mark.exhaustive
def test_the_mde_never_decides_the_verdict():
    # Unclustered, 2,000 a side: 0.600 against 0.645 (a lift of 0.045). The standard error
    # is sqrt(0.24 / 2000 + 0.228975 / 2000) = 0.01531, so the MDE is 2.8 x 0.01531 = 0.0429,
    # below the estimate; but the always-valid interval at 4,000 units is 3.061 standard
    # errors wide on each side (core.stats.sequential), 0.045 - 0.0469 < 0: not established.
    # The verdict reads the interval, never the MDE.
    result = live_lift(
        plain_events(1_290, 2_000, 1_200, 2_000), workspace_id="w1", epoch="e1", rng=0
    )
    assert result.verdict == NOT_ESTABLISHED
    assert result.difference.estimate > result.mde
    assert result.mde == pytest.approx(2.8016 * 0.01531, rel=0.06)
    assert result.difference.interval.low > 0  # the one-look interval alone would say superior
    # And with no lift the MDE is still reported, while the verdict says not established.
    flat = live_lift(plain_events(1_200, 2_000, 1_200, 2_000), workspace_id="w1", epoch="e1", rng=0)
    assert flat.verdict == NOT_ESTABLISHED and flat.mde == pytest.approx(result.mde, rel=0.06)


@pytest.mark.exhaustive
def test_to_json_renders_the_lift_as_an_interval_with_its_n(lifted_traffic):
    result = live_lift(lifted_traffic, workspace_id="w1", epoch="e1", rng=0)
    payload = json.loads(json.dumps(result.to_json()))
    assert payload["verdict"] == SUPERIOR and payload["epoch"] == "e1"
    assert payload["mde"] == round(result.mde, 6)
    difference = payload["difference"]
    assert difference["interval"] == [
        round(result.difference.interval.low, 6),
        round(result.difference.interval.high, 6),
    ]
    assert difference["treated"]["n"] == result.treated.resolved
    assert difference["control"]["n"] == result.control.resolved
    assert payload["aa"]["passed"] is True and payload["aa"]["splits"] == 20
    assert payload["treated"]["arm"] == "treated" and payload["control"]["arm"] == "lever_holdout"
    assert payload["claimType"] is None and payload["mixedClusters"] == 0


def test_verdict_words_are_distinct():
    assert len({SUPERIOR, NOT_ESTABLISHED, INFERIOR, PARKED, INSUFFICIENT}) == 5


# --- core.stats.lift_power -----------------------------------------------------------------


@pytest.mark.parametrize(("alpha", "power"), [(0.05, 0.8), (0.01, 0.9), (0.10, 0.5)])
@pytest.mark.parametrize("se", [0.004, 0.0153, 0.1])
def test_mde_formula_matches_statsmodels_normal_power(alpha, power, se):
    # expected from statsmodels normal_power_het(diff, nobs=1, alpha / 2, std_null=se,
    # alternative="larger"): the near-tail power of a z-test with this standard error at the
    # MDE equals the requested power. Tolerance 1e-9: one closed form inverted by another.
    mde = minimum_detectable_effect_from_se(se, alpha=alpha, power=power)
    achieved = normal_power_het(mde, 1, alpha / 2, std_null=se, alternative="larger")
    assert achieved == pytest.approx(power, abs=1e-9)


def test_mde_hand_values():
    # Bloom (1995): 2.80 standard errors for a two-sided 5% test at 80% power
    # (z_0.975 = 1.959964, z_0.8 = 0.841621, sum 2.801585).
    assert minimum_detectable_effect_from_se(1.0) == pytest.approx(2.801585, abs=1e-6)
    assert minimum_detectable_effect_from_se(0.0) == 0.0
    assert minimum_detectable_effect_from_se(1.0, power=0.01) == 0.0  # below alpha / 2


def test_interval_standard_error_inverts_a_normal_interval():
    # A normal interval estimate +- z se has standard error se back: (high - low) / (2 z).
    z = special.ndtri(0.95)
    interval = Interval(low=0.03 - z * 0.01, high=0.03 + z * 0.01, confidence_level=0.90)
    assert interval_standard_error(interval) == pytest.approx(0.01, abs=1e-15)
    assert interval_standard_error(Interval(0.2, 0.2, 0.95)) == 0.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: minimum_detectable_effect_from_se(-0.1), "standard_error"),
        (lambda: minimum_detectable_effect_from_se(math.inf), "standard_error"),
        (lambda: minimum_detectable_effect_from_se(0.1, alpha=1.0), "alpha"),
        (lambda: minimum_detectable_effect_from_se(0.1, power=0.0), "power"),
        (lambda: interval_standard_error(Interval(0.3, 0.2, 0.95)), "low"),
        (lambda: interval_standard_error(Interval(0.1, 0.2, 1.0)), "confidence_level"),
    ],
)
def test_power_helpers_reject_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_result_is_frozen(lifted_traffic):
    result = live_lift(lifted_traffic.head(500), workspace_id="w1", epoch="e1", rng=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.verdict = SUPERIOR
