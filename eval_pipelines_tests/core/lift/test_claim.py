"""The claim rule, without a warehouse: each state a live lift can give its claim
(confirmed, open, parked, invalidated), with its reason, and a settled claim kept as it was."""

import dataclasses
from datetime import datetime

import polars as pl
import pytest

from eval_pipelines.core.lift.assignment_check import AssignmentCheck
from eval_pipelines.core.lift.audit_check import AuditArm, AuditCheck
from eval_pipelines.core.lift.checks import InstrumentChecks
from eval_pipelines.core.lift.claim import (
    ClaimState,
    Scope,
    bound_baseline,
    claim_candidate,
    claim_id,
    claim_state,
    current_baseline,
    decide_claim,
    with_later_audit,
)
from eval_pipelines.core.lift.cluster_size_check import ClusterSizeCheck
from eval_pipelines.core.lift.evidence import Baseline
from eval_pipelines.core.lift.ledger import Claim
from eval_pipelines.core.lift.lift import (
    INFERIOR,
    INSUFFICIENT,
    NOT_ESTABLISHED,
    PARKED,
    LiftResult,
)
from eval_pipelines.core.lift.sample_ratio_check import SampleRatioCheck

BOUND = Baseline(head="h1", app_config="c1", epoch="e1")
CLAIM_ID = "w1/fact/e1/memo-v2"
SCOPE = Scope("w1", "fact", "e1")
NOW = datetime(2026, 12, 6, 9, 0, 0)
# The checks before reading, all run and passed (a split of the epoch was configured).
CHECKED = InstrumentChecks(
    SampleRatioCheck(300, 300, 0.5, 0.9),
    AssignmentCheck(checked_rows=600, mismatched_rows=0, skipped_rows=0, ran=True),
    ClusterSizeCheck(),
)
# Without the workspace's split of the epoch: ratio and assignment did not run.
UNCHECKED = InstrumentChecks(
    SampleRatioCheck(300, 300, None, None),
    AssignmentCheck(checked_rows=0, mismatched_rows=0, skipped_rows=600, ran=False),
    ClusterSizeCheck(),
)


def _rows(
    heads: list[str | None], *, configs: list[str | None] | None = None, arm: str = "treated"
) -> pl.DataFrame:
    """Contrasted rows in time order, each with the head (and config) it was served under."""
    configs = configs if configs is not None else ["c1"] * len(heads)
    return pl.DataFrame(
        {
            "exposure_arm": [arm] * len(heads),
            "ts": [datetime(2026, 12, 1, 0, i) for i in range(len(heads))],
            "baseline_head": heads,
            "app_config": configs,
            "candidate": ["memo-v2"] * len(heads),
        }
    )


@pytest.fixture(scope="module")
def superior(superior_lift: LiftResult) -> LiftResult:
    """A superior lift whose checks before reading all ran and passed."""
    return dataclasses.replace(superior_lift, checks=CHECKED)


def _decide(
    result: LiftResult,
    heads: list[str | None],
    *,
    existing: Claim | None = None,
    current_epoch: str = "e1",
    now: datetime = NOW,
) -> Claim:
    """The claim of SCOPE after a reading of ``result`` over rows served under ``heads``."""
    return decide_claim(
        SCOPE,
        result,
        _rows(heads),
        existing=existing,
        current_epoch=current_epoch,
        screenings=[],
        case_id=None,
        now=now,
    )


def test_a_checked_superior_lift_under_its_bound_baseline_is_confirmed(
    superior: LiftResult,
) -> None:
    assert claim_state(superior, BOUND, BOUND, claim_id=CLAIM_ID) == ClaimState("confirmed")


@pytest.mark.parametrize("verdict", [NOT_ESTABLISHED, INFERIOR, INSUFFICIENT])
def test_any_other_checked_verdict_stays_open_without_a_reason(
    superior: LiftResult, verdict: str
) -> None:
    result = dataclasses.replace(superior, verdict=verdict)
    assert claim_state(result, BOUND, BOUND, claim_id=CLAIM_ID) == ClaimState("open")


def test_an_unchecked_superior_lift_stays_open_and_says_why(superior: LiftResult) -> None:
    result = dataclasses.replace(superior, checks=UNCHECKED)
    assert claim_state(result, BOUND, BOUND, claim_id=CLAIM_ID) == ClaimState(
        "open",
        "unchecked: the sample-ratio and assignment checks need the workspace's split of "
        "epoch e1 and its lever (`lift settings`)",
    )


def test_a_failed_aa_check_parks_the_claim(superior: LiftResult) -> None:
    result = dataclasses.replace(superior, verdict=PARKED)
    assert claim_state(result, BOUND, BOUND, claim_id=CLAIM_ID) == ClaimState(
        "parked", "the A/A check failed: the instrument is parked"
    )
    without_checks = dataclasses.replace(result, checks=None)
    assert claim_state(without_checks, BOUND, BOUND, claim_id=CLAIM_ID).reason == (
        "the A/A check failed: the instrument is parked"
    )


def test_failed_checks_before_reading_park_the_claim_naming_each(superior: LiftResult) -> None:
    broken = dataclasses.replace(
        CHECKED,
        sample_ratio=SampleRatioCheck(400, 200, 0.5, 1e-12),
        assignment=AssignmentCheck(checked_rows=600, mismatched_rows=7, skipped_rows=0, ran=True),
    )
    result = dataclasses.replace(superior, verdict=PARKED, checks=broken)
    state = claim_state(result, BOUND, BOUND, claim_id=CLAIM_ID)
    assert state.status == "parked"
    assert state.reason == "checks before reading failed: " + "; ".join(broken.failures())
    assert "sample ratio mismatch: 200 lever_holdout against 400 treated" in state.reason
    assert "assignment mismatch: 7 of 600 rows" in state.reason


@pytest.mark.parametrize(
    ("current", "reason"),
    [
        (Baseline("h1", "c1", "e2"), "epoch_changed"),
        (Baseline("h2", "c2", "e2"), "epoch_changed"),  # the epoch is named first
        (Baseline("h2", "c1", "e1"), "stale_head"),
        (Baseline("h2", "c2", "e1"), "stale_head"),
        (Baseline("h1", "c2", "e1"), "app_config_changed"),
    ],
)
def test_a_changed_baseline_invalidates_by_name_whatever_the_lift_reads(
    superior: LiftResult, current: Baseline, reason: str
) -> None:
    for result in (superior, dataclasses.replace(superior, verdict=PARKED)):
        state = claim_state(result, BOUND, current, claim_id=CLAIM_ID)
        assert state == ClaimState("invalidated", reason)


def test_the_bound_baseline_is_the_first_contrasted_row_that_names_one() -> None:
    rows = pl.concat([_rows([None, "h1", "h2"]), _rows(["h0"], arm="holdout")])
    assert bound_baseline(rows, "e1") == Baseline("h1", "c1", "e1")
    assert bound_baseline(_rows([None], configs=[None]), "e1") == Baseline("", "", "e1")


def test_a_deploy_and_rollback_under_a_claim_still_shows_the_deploy() -> None:
    rows = _rows(["h1", "h2", "h1"])
    assert current_baseline(rows, BOUND, "e1") == Baseline("h2", "c1", "e1")
    assert current_baseline(_rows(["h1", "h1"]), BOUND, "e1") == BOUND
    moved = _rows(["h1", "h1"], configs=["c1", "c9"])
    assert current_baseline(moved, BOUND, "e1") == Baseline("h1", "c9", "e1")


def test_the_candidate_is_the_treated_arms_most_served_first_by_name() -> None:
    rows = pl.DataFrame(
        {
            "exposure_arm": ["treated", "treated", "treated", "lever_holdout", "lever_holdout"],
            "candidate": ["b", "a", None, "c", "c"],
        }
    )
    assert claim_candidate(rows) == "a"
    assert claim_id(SCOPE, "a") == "w1/fact/e1/a"
    assert claim_id(SCOPE, None) == "w1/fact/e1/lever"
    assert claim_candidate(rows.filter(pl.col("exposure_arm") == "lever_holdout")) is None


def test_a_new_claim_is_opened_now_under_its_first_rows_baseline(superior: LiftResult) -> None:
    claim = _decide(superior, ["h1", "h1"])
    assert (claim.claim_id, claim.status, claim.reason) == (CLAIM_ID, "confirmed", None)
    assert (claim.baseline_head, claim.app_config) == ("h1", "c1")
    assert claim.opened_at == claim.updated_at == NOW
    assert claim.low is not None and claim.low > 0
    assert claim.lift["evidence"] == "live_confirmation"
    assert claim.offline is None and claim.lift["offlineNote"].startswith("the workspace names")


def test_an_open_claim_keeps_its_bound_baseline_and_opening_time(superior: LiftResult) -> None:
    opened = _decide(dataclasses.replace(superior, verdict=NOT_ESTABLISHED), ["h1"])
    later = datetime(2026, 12, 7)
    # The rows now name another head than the one the claim opened under: a deploy.
    again = _decide(superior, ["h2"], existing=opened, now=later)
    assert (again.status, again.reason) == ("invalidated", "stale_head")
    assert (again.baseline_head, again.opened_at, again.updated_at) == ("h1", NOW, later)


def test_a_settled_claim_is_history(superior: LiftResult) -> None:
    settled = _decide(superior, ["h1"])
    parked = dataclasses.replace(superior, verdict=PARKED)
    for status in ("confirmed", "invalidated"):
        existing = dataclasses.replace(settled, status=status)
        kept = _decide(
            parked, ["h9"], existing=existing, current_epoch="e7", now=datetime(2026, 12, 8)
        )
        assert kept == existing


def test_an_audit_read_since_an_unaudited_settlement_is_set_beside_it(
    superior: LiftResult,
) -> None:
    settled = _decide(superior, ["h1"])
    failed = AuditCheck(AuditArm(40, 20, 20), AuditArm(40, 0, 0), 1e-9)
    audited = dataclasses.replace(superior, checks=dataclasses.replace(CHECKED, audit=failed))
    later = with_later_audit(settled, audited)
    assert later.status == "confirmed"
    assert later.lift["auditSinceSettled"] == failed.to_json()
    assert later.lift["auditSinceSettled"]["state"] == "failed"
    # Read again: the newest audit since, the same one.
    assert with_later_audit(later, audited) == later
    # Nothing audited since, or settled audited already: unchanged.
    assert with_later_audit(settled, superior) is settled
    assert with_later_audit(settled, dataclasses.replace(superior, checks=None)) is settled
    again = with_later_audit(dataclasses.replace(settled, lift=audited.to_json()), audited)
    assert "auditSinceSettled" not in again.lift
