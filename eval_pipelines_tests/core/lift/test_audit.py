"""The outcome audit (issue 19 item 7): the blinded, balanced, deterministic sample; the audit
file read whole; the check that compares the arms' disagreements between logged and audited
outcomes; and by simulation, that a pure bias in the treated arm's outcome logging (+0.05,
arms, keys and counts intact, so every other check passes) is parked when audited, while
healthy experiments audited by an imperfect reviewer rarely are.

Oracles: Fisher's exact p-value summed by hand from scipy.stats.hypergeom.pmf (every table
with the observed margins no more likely than the observed one), the simulation's known
outcomes before the logging bias, and the real assignment library for the arms.
"""

import math
from datetime import datetime

import numpy as np
import polars as pl
import pytest
from scipy import stats

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.audit import SAMPLE_COLUMNS, audit_sample, read_audit_file
from eval_pipelines.core.lift.audit_check import AUDIT_ALPHA, audit_p_value, outcome_audit
from eval_pipelines.core.lift.check_states import FAILED, INSUFFICIENT_AUDIT, PASSED, UNAUDITED
from eval_pipelines.core.lift.checks import instrument_checks
from eval_pipelines.core.lift.lift import PARKED, live_lift
from eval_pipelines_tests.helpers.broken_traffic import CONFIG, experiment

PER_ARM = 400  # the audit the simulation and the README's figures use, per arm


def _wilson(k, n, z=1.959964):
    centre = (k + z * z / 2) / (n + z * z)
    half = z * math.sqrt(k * (n - k) / n + z * z / 4) / (n + z * z)
    return centre - half, centre + half


def _fisher_by_hand(n_t, d_t, n_c, d_c):
    # Oracle: hypergeometric law of the treated disagreements given both margins; sum the
    # probabilities of every table no more likely than the observed one.
    total, disagree = n_t + n_c, d_t + d_c
    support = np.arange(max(0, disagree - n_c), min(disagree, n_t) + 1)
    pmf = stats.hypergeom.pmf(support, total, disagree, n_t)
    observed = stats.hypergeom.pmf(d_t, total, disagree, n_t)
    return min(1.0, pmf[pmf <= observed * (1 + 1e-7)].sum())


def _audited(frame, *, per_arm=PER_ARM, reviewer_error=0.0, seed=0):
    """The frame with ``audited_outcome`` on the requests the sample lists: their outcome
    before any logging bias, flipped with ``reviewer_error`` (alike in both arms)."""
    frame = frame.with_columns(ts=pl.lit(datetime(2026, 11, 23)))
    sample = audit_sample(frame, workspace_id="w1", epoch="e1", per_arm=per_arm)
    ids = sample.get_column("request_id").implode()
    flip = np.random.default_rng([7, seed]).random(frame.height) < reviewer_error
    truth = frame.get_column("true_outcome")
    known = truth.fill_null(False).to_numpy()
    reviewed = pl.Series(np.where(flip, ~known, known))
    return frame.with_columns(
        audited_outcome=pl.when(pl.col("request_id").is_in(ids) & truth.is_not_null())
        .then(reviewed.cast(pl.Boolean))
        .otherwise(None)
    )


@pytest.mark.parametrize(
    ("counts", "reference"),
    [
        # (treated audited, disagreements, control audited, disagreements), reference p from
        # the hypergeometric sum above (printed to 4 significant digits, checked to 1e-3).
        ((400, 19, 400, 0), 3.065e-06),
        ((400, 12, 400, 9), 0.6593),
        ((25, 3, 40, 0), 0.05266),
    ],
)
def test_the_audit_p_value_is_fishers_exact(counts, reference):
    p = audit_p_value(*counts)
    assert p == pytest.approx(_fisher_by_hand(*counts), rel=1e-9)  # same sum, other code
    assert p == pytest.approx(reference, rel=1e-3)
    table = [[counts[1], counts[3]], [counts[0] - counts[1], counts[2] - counts[3]]]
    assert p == pytest.approx(stats.fisher_exact(table).pvalue, rel=1e-12)


def test_no_disagreement_in_either_arm_gives_one_and_bad_counts_are_refused():
    assert audit_p_value(50, 0, 50, 0) == 1.0
    assert audit_p_value(50, 50, 50, 50) == 1.0
    with pytest.raises(ValueError, match="cannot exceed"):
        audit_p_value(10, 11, 10, 0)
    with pytest.raises(ValueError, match="whole numbers"):
        audit_p_value(10, -1, 10, 0)


def _rows(arm_counts):
    """Hand-made rows: per arm (audited, disagreements), one request per cluster, all logged
    successes."""
    rows = []
    for arm, (audited, disagree) in arm_counts.items():
        for i in range(audited):
            rows.append(
                {
                    "exposure_arm": arm,
                    "cluster": f"{arm}-{i}",
                    "request_id": f"r-{arm}-{i}",
                    "outcome": True,
                    "audited_outcome": i >= disagree,
                }
            )
    return pl.DataFrame(rows)


def test_the_audit_states_and_what_they_say():
    unaudited = outcome_audit(_rows({}).clear(), workspace_id="w1", epoch="e1")
    assert unaudited.state == UNAUDITED and unaudited.passed and unaudited.p_value is None
    assert "cannot be seen" in unaudited.words()
    few = outcome_audit(
        _rows({"treated": (19, 5), "lever_holdout": (30, 0)}), workspace_id="w1", epoch="e1"
    )
    assert few.state == INSUFFICIENT_AUDIT and few.passed
    assert "5 of 19" in few.words() and "at least 20" in few.words()
    failed = outcome_audit(
        _rows({"treated": (400, 19), "lever_holdout": (400, 0)}), workspace_id="w1", epoch="e1"
    )
    assert failed.state == FAILED and not failed.passed and failed.p_value < AUDIT_ALPHA
    assert failed.lift_bias == pytest.approx(19 / 400, abs=1e-12)  # all logged a success
    assert "treated 19 of 400" in failed.words() and "lever_holdout 0 of 400" in failed.words()
    fine = outcome_audit(
        _rows({"treated": (400, 12), "lever_holdout": (400, 9)}), workspace_id="w1", epoch="e1"
    )
    assert fine.state == PASSED and fine.passed


def test_one_audited_request_per_cluster_is_read():
    frame = _rows({"treated": (30, 0), "lever_holdout": (30, 0)})
    second = frame.with_columns(
        request_id=pl.col("request_id") + "-b", audited_outcome=pl.lit(False)
    )
    audit = outcome_audit(pl.concat([frame, second]), workspace_id="w1", epoch="e1")
    assert audit.treated.audited == 30 and audit.control.audited == 30
    assert audit.left_out == 60


def test_without_audited_rows_the_checks_read_unaudited_and_pass():
    checks = instrument_checks(experiment(1), workspace_id="w1", config=CONFIG)
    assert checks.audit.state == UNAUDITED and checks.passed
    assert checks.to_json()["audit"]["state"] == UNAUDITED


def test_the_sample_is_deterministic_balanced_one_per_cluster_and_blinded():
    frame = experiment(5, with_truth=True).with_columns(ts=pl.lit(datetime(2026, 11, 23)))
    sample = audit_sample(frame, workspace_id="w1", epoch="e1", per_arm=100)
    assert tuple(sample.columns) == SAMPLE_COLUMNS  # no arm, candidate or logged outcome
    again = audit_sample(frame.reverse(), workspace_id="w1", epoch="e1", per_arm=100)
    assert sample.get_column("request_id").to_list() == again.get_column("request_id").to_list()
    picked = frame.filter(pl.col("request_id").is_in(sample.get_column("request_id").implode()))
    assert dict(picked.group_by("exposure_arm").len().iter_rows()) == {
        "treated": 100,
        "lever_holdout": 100,
    }
    assert picked.get_column("cluster").n_unique() == 200  # one request per cluster
    assert picked.get_column("outcome").null_count() == 0  # resolved only
    with pytest.raises(InputError, match="per_arm"):
        audit_sample(frame, workspace_id="w1", epoch="e1", per_arm=0)
    with pytest.raises(InputError, match="nothing to audit"):
        audit_sample(frame, workspace_id="w1", epoch="e9", per_arm=10)


def test_an_audit_file_is_read_whole_or_refused_naming_line_field_value_and_rule(tmp_path):
    good = tmp_path / "audit.jsonl"
    good.write_text(
        '{"request_id": "r1", "audited_outcome": true}\n'
        '{"request_id": "r2", "audited_outcome": null}\n'
        '{"request_id": "r1", "audited_outcome": true}\n'
        '{"request_id": "r3", "audited_outcome": false, "exposure_epoch": "e1"}\n'
        '{"request_id": "r3", "audited_outcome": false, "exposure_epoch": "e1"}\n'
    )
    read = read_audit_file(good)
    assert read.rows.get_column("request_id").to_list() == ["r1", "r3"] and read.unfilled == 1
    csv = tmp_path / "audit.csv"
    csv.write_text("request_id,audited_outcome,note\nr1,false,seen\nr2,,\n")
    read = read_audit_file(csv)
    assert read.rows.row(0, named=True)["audited_outcome"] is False and read.unfilled == 1
    cases = [
        ('{"request_id": "r1", "audited_outcome": "yes"}\n', r"line 1: audited_outcome='yes'"),
        ('{"request_id": "r1", "audited_outcome": 1}\n', r"line 1: audited_outcome=1: must be"),
        (
            '{"request_id": "r1", "audited_outcome": true}\n'
            '{"request_id": "r1", "audited_outcome": false}\n',
            r"line 2: audited_outcome=False: request_id 'r1' is audited twice",
        ),
        (
            '{"request_id": "r1", "audited_outcome": true, "exposure_epoch": "e1"}\n'
            '{"request_id": "r1", "audited_outcome": true, "exposure_epoch": "e2"}\n',
            r"line 2: exposure_epoch='e2': request_id 'r1' is repeated with another "
            r"exposure_epoch \(line 1 has 'e1'\)",
        ),
        ('{"audited_outcome": true}\n', r"line 1: request_id=None: must be a non-empty"),
        ('{"request_id": "r1", "outcome": true}\n', r"line 1: outcome=True: unknown column"),
        ("not json\n", r"line 1: not valid JSON"),
    ]
    for text, message in cases:
        bad = tmp_path / "bad.jsonl"
        bad.write_text(text)
        with pytest.raises(InputError, match=message):
            read_audit_file(bad)
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("request_id,audited_outcome\nr1,True\n")
    with pytest.raises(InputError, match=r"row 2: audited_outcome='True'"):
        read_audit_file(bad_csv)


def test_a_biased_treated_logging_parks_when_audited_and_is_unseen_when_not():
    frame = experiment(11, outcome_bias=0.125, with_truth=True)
    unaudited = live_lift(frame, workspace_id="w1", epoch="e1", rng=1, config=CONFIG)
    assert unaudited.verdict != PARKED and unaudited.checks.passed  # every log check passes
    assert "Outcome audit unaudited" in unaudited.message
    assert "cannot be seen" in unaudited.message
    audited = live_lift(_audited(frame), workspace_id="w1", epoch="e1", rng=1, config=CONFIG)
    assert audited.verdict == PARKED and audited.checks.audit.state == FAILED
    assert "outcome audit failed: treated" in audited.message
    assert f"of {PER_ARM} audited" in audited.message


def _audit_states(kwargs, seeds, *, reviewer_error=0.0):
    states = []
    for seed in seeds:
        frame = _audited(
            experiment(seed, with_truth=True, **kwargs), reviewer_error=reviewer_error, seed=seed
        )
        states.append(outcome_audit(frame, workspace_id="w1", epoch="e1").state)
    return states


@pytest.mark.slow
def test_a_biased_outcome_logging_is_parked_and_healthy_audits_rarely_are():
    # No true lift, ICC 0.3, 1,500 traces of 1-4 requests (~680 clusters per arm), treated
    # failures logged as successes with probability 0.125 (+0.05 to the treated arm), the
    # audit PER_ARM = 400 requests per arm, one per cluster, by a reviewer who is the ground
    # truth. Required: parked in at least 90 of 100 through live_lift (exact power of
    # Fisher at alpha 0.001 for 0.05 vs 0 disagreements at 400 per arm: 0.99).
    parked = by_audit = 0
    for seed in range(100):
        frame = _audited(experiment(seed, outcome_bias=0.125, with_truth=True), seed=seed)
        result = live_lift(
            frame, workspace_id="w1", epoch="e1", rng=seed, config=CONFIG, n_resamples=200
        )
        parked += result.verdict == PARKED
        by_audit += result.checks.audit.state == FAILED
    low, high = _wilson(parked, 100)
    print(
        f"\n+0.05 treated outcome bias, audit {PER_ARM} per arm (ground truth): parked {parked}"
        f" of 100 [{low:.3f}, {high:.3f}], {by_audit} of them by the outcome audit"
    )
    assert parked >= 90 and by_audit >= 90, (parked, by_audit)
    # A reviewer who errs on 2% of requests (alike in both arms) sees the same bias less often.
    noisy = _audit_states({"outcome_bias": 0.125}, range(100), reviewer_error=0.02)
    k = noisy.count(FAILED)
    low, high = _wilson(k, 100)
    print(f"same, reviewer errs on 2%: audit failed {k} of 100 [{low:.3f}, {high:.3f}]")
    # Healthy logging, the same audit by a reviewer who errs on 5% of requests in both arms
    # (so there are disagreements to compare): failing is a false park, at most AUDIT_ALPHA
    # by the test's size (Fisher's is conservative). 1,000 experiments: at most 5 (P(Bin(1000,
    # 0.001) >= 6) = 0.0006).
    healthy = _audit_states({}, range(1_000, 2_000), reviewer_error=0.05)
    k = healthy.count(FAILED)
    low, high = _wilson(k, 1_000)
    print(
        f"healthy, reviewer errs on 5%: audit failed {k} of 1000 [{low:.4f}, {high:.4f}] "
        f"(threshold {AUDIT_ALPHA})"
    )
    assert k <= 5, k
    # With a true lift of +0.05 and healthy logging the audit must not read the lift as bias.
    lifted = _audit_states({"true_lift": 0.05}, range(2_000, 2_200), reviewer_error=0.05)
    k = lifted.count(FAILED)
    print(f"true lift +0.05, healthy logging, reviewer errs on 5%: audit failed {k} of 200")
    assert k <= 3, k


def test_a_cluster_seen_in_both_arms_is_not_sampled():
    frame = experiment(5).with_columns(ts=pl.lit(datetime(2026, 11, 23)))
    first = audit_sample(frame, workspace_id="w1", epoch="e1", per_arm=5)
    picked = frame.filter(pl.col("request_id") == first.get_column("request_id")[0])
    cluster, arm = picked.row(0, named=True)["cluster"], picked.row(0, named=True)["exposure_arm"]
    other = "treated" if arm == "lever_holdout" else "lever_holdout"
    mixed = pl.concat(
        [frame, picked.with_columns(request_id=pl.lit("x"), exposure_arm=pl.lit(other))]
    )
    again = audit_sample(mixed, workspace_id="w1", epoch="e1", per_arm=5)
    chosen = mixed.filter(pl.col("request_id").is_in(again.get_column("request_id").implode()))
    assert cluster not in chosen.get_column("cluster").to_list()


def test_a_csv_row_with_more_cells_than_the_header_is_refused(tmp_path):
    bad = tmp_path / "audit.csv"
    bad.write_text("request_id,audited_outcome\nr1,true,extra\n")
    with pytest.raises(InputError, match=r"row 2=\['extra'\]: has more cells"):
        read_audit_file(bad)
