"""Coverage of the live lift's interval, by simulation with a known true lift (slow).

Oracle: the simulation's truth. simulate_traffic (helpers/clustered_lift_traffic.py) draws
clustered traffic whose per-request rates are exactly 0.60 (lever_holdout) and 0.66
(treated), so the true lift the interval should cover is 0.06, and with no lift the
superiority rule should fire in about 2.5% of experiments (one tail of a 95% interval).
"""

import time

import numpy as np
import pytest

from eval_pipelines.core.lift.lift import PARKED, SUPERIOR, live_lift
from eval_pipelines_tests.helpers.clustered_lift_traffic import simulate_traffic

TRUE_LIFT = 0.06


def simulate(seed, *, treated_rate):
    # 800 clusters of 1-5 requests (about 1,080 resolved outcomes an arm), cluster random
    # effect sd 0.8 (latent intra-cluster correlation 0.39), 10% censored at random.
    traffic = simulate_traffic(
        np.random.default_rng([7, seed]), clusters=800, treated_rate=treated_rate
    )
    return live_lift(traffic, workspace_id="w1", epoch="e1", rng=seed)


@pytest.mark.slow
def test_interval_covers_the_true_lift_at_its_nominal_rate():
    # 400 seeded experiments through live_lift (A/A of 20 splits, 2,000 resamples each).
    # Expected coverage 0.95; the percentile interval undercovers slightly at this size
    # (about 0.5 points, from the plug-in variance of 400 clusters an arm). The band
    # [0.92, 0.98] is 0.95 +- 2.6 binomial standard errors of 370-odd experiments (about
    # 99%). Experiments whose A/A parks (expected P(Bin(20, 0.05) >= 3) = 7.5% with a
    # calibrated interval) have no interval and are left out; their share is checked too.
    start = time.perf_counter()
    results = [simulate(seed, treated_rate=0.60 + TRUE_LIFT) for seed in range(400)]
    read = [r for r in results if r.verdict != PARKED]
    parked = len(results) - len(read)
    covered = sum(
        r.difference.interval.low <= TRUE_LIFT <= r.difference.interval.high for r in read
    )
    coverage = covered / len(read)
    elapsed = time.perf_counter() - start
    # Seen: coverage 0.949 of 370 read experiments, 30 parked (7.5%), 27 s.
    print(f"coverage {coverage:.3f} of {len(read)} read, {parked} parked, {elapsed:.1f} s")
    assert 0.92 <= coverage <= 0.98, f"coverage {coverage:.3f} of {len(read)}"
    assert parked / len(results) <= 0.15, f"{parked} parked of {len(results)}"


@pytest.mark.slow
def test_no_true_lift_is_rarely_called_superior():
    # 200 experiments with both arms at 0.60: superior needs the lower bound above zero, one
    # tail of a 95% interval, about 2.5% of experiments (5 of 200). At most 12 (6%) allowed:
    # the 0.999 quantile of Bin(200, 0.025) is 13, and the slight undercoverage of the
    # interval adds about half a point. Seen: 4 of 200 when the verdict read the one-look
    # interval; 0 of 200 since it reads the always-valid one (issue 19), which is wider.
    results = [simulate(1_000 + seed, treated_rate=0.60) for seed in range(200)]
    superior = sum(r.verdict == SUPERIOR for r in results)
    print(f"{superior} of 200 null experiments read superior")
    assert superior <= 12, f"{superior} of 200 null experiments read superior"
