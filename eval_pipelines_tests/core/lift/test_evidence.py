"""Staged evidence: three distinct types; a weaker stage never passes for a stronger one."""

import dataclasses
from datetime import datetime

import pytest

from eval_pipelines.core.lift.evidence import (
    INVALIDATION_REASONS,
    ApplicationCI,
    Baseline,
    Confirmation,
    EvidenceKind,
    LiveConfirmation,
    OfflineScreening,
    WeakerEvidenceError,
    check_baseline,
    confirmed_improvement,
    evidence_kind,
    require_kind,
)
from eval_pipelines.core.lift.lift import (
    INFERIOR,
    INSUFFICIENT,
    NOT_ESTABLISHED,
    PARKED,
)


@pytest.fixture
def screening():
    return OfflineScreening(
        eval_id="ev1",
        candidate="memo-v2",
        baseline="memo-v1",
        level="better",
        difference=0.04,
        interval=(0.01, 0.07),
        n=800,
    )


@pytest.fixture
def ci():
    return ApplicationCI(
        workspace_id="acme",
        candidate="memo-v2",
        source="golden_gate",
        commit="abc123",
        suite="supplier_invoices",
        passed_count=2,
        failed_count=0,
        golden_run_ids=("g1", "g2"),
        recorded_at=datetime(2026, 12, 6, 21, 0),
    )


def test_kinds_are_distinct_types_with_fixed_kinds(screening, ci, superior_lift):
    live = LiveConfirmation(claim_id="claim-1", lift=superior_lift)
    kinds = [screening.kind, ci.kind, live.kind]
    assert kinds == [
        EvidenceKind.OFFLINE_SCREENING,
        EvidenceKind.APPLICATION_CI,
        EvidenceKind.LIVE_CONFIRMATION,
    ]
    assert EvidenceKind.OFFLINE_SCREENING < EvidenceKind.APPLICATION_CI
    assert EvidenceKind.APPLICATION_CI < EvidenceKind.LIVE_CONFIRMATION
    assert len({type(screening), type(ci), type(live)}) == 3
    assert not isinstance(screening, LiveConfirmation | ApplicationCI)
    assert not isinstance(ci, LiveConfirmation)
    # The kind is a class constant, not a field: it cannot be passed in or overwritten.
    assert "kind" not in {field.name for field in dataclasses.fields(OfflineScreening)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        screening.kind = EvidenceKind.LIVE_CONFIRMATION
    with pytest.raises(TypeError):
        OfflineScreening("ev1", "a", "b", None, None, None, 10, kind=3)


def test_the_class_decides_the_kind_not_the_attribute(screening):
    class Dressed(OfflineScreening):
        kind = EvidenceKind.LIVE_CONFIRMATION

    dressed = Dressed(**dataclasses.asdict(screening))
    assert evidence_kind(dressed) == EvidenceKind.OFFLINE_SCREENING
    with pytest.raises(WeakerEvidenceError):
        require_kind(dressed, EvidenceKind.LIVE_CONFIRMATION)
    assert not confirmed_improvement(dressed)


def test_require_kind_refuses_weaker_evidence_as_stronger(screening, ci, superior_lift):
    with pytest.raises(WeakerEvidenceError, match="a screening pass is not a live result") as error:
        require_kind(screening, EvidenceKind.LIVE_CONFIRMATION)
    assert "offline_screening" in str(error.value) and "live_confirmation" in str(error.value)
    assert (error.value.given, error.value.required) == (
        EvidenceKind.OFFLINE_SCREENING,
        EvidenceKind.LIVE_CONFIRMATION,
    )
    with pytest.raises(WeakerEvidenceError, match="a passed CI check is not a live confirmation"):
        require_kind(ci, EvidenceKind.LIVE_CONFIRMATION)
    with pytest.raises(WeakerEvidenceError, match="application_ci"):
        require_kind(screening, EvidenceKind.APPLICATION_CI)
    # Nor is a stronger stage relabelled as a weaker one: the stages are distinct.
    live = LiveConfirmation(claim_id="claim-1", lift=superior_lift)
    with pytest.raises(WeakerEvidenceError, match="is not application_ci"):
        require_kind(live, EvidenceKind.APPLICATION_CI)
    assert isinstance(WeakerEvidenceError(EvidenceKind(1), EvidenceKind(3)), ValueError)
    # The matching stage passes.
    require_kind(screening, EvidenceKind.OFFLINE_SCREENING)
    require_kind(ci, EvidenceKind.APPLICATION_CI)
    require_kind(live, EvidenceKind.LIVE_CONFIRMATION)
    with pytest.raises(TypeError, match="not staged evidence"):
        require_kind({"kind": 3}, EvidenceKind.LIVE_CONFIRMATION)


def test_only_a_superior_live_confirmation_confirms_an_improvement(screening, ci, superior_lift):
    assert confirmed_improvement(LiveConfirmation(claim_id="c", lift=superior_lift))
    for word in (NOT_ESTABLISHED, INFERIOR, PARKED, INSUFFICIENT):
        lift = dataclasses.replace(superior_lift, verdict=word)
        assert not confirmed_improvement(LiveConfirmation(claim_id="c", lift=lift))
    # A screening pass with a positive interval and a passed CI check are not improvements.
    assert not confirmed_improvement(screening)
    assert ci.passed and not confirmed_improvement(ci)
    assert not confirmed_improvement(None)


def test_a_live_confirmation_holds_a_live_lift(screening):
    with pytest.raises(TypeError, match="LiftResult"):
        LiveConfirmation(claim_id="c", lift=screening)


def test_evidence_fields_are_checked():
    with pytest.raises(ValueError, match="low <= high"):
        OfflineScreening("ev1", "a", "b", None, 0.1, (0.2, 0.1), 50)
    with pytest.raises(ValueError, match="n=-1"):
        OfflineScreening("ev1", "a", "b", None, None, None, -1)
    ci = ApplicationCI(
        workspace_id="acme",
        candidate="memo-v2",
        source="golden_gate",
        commit="r",
        suite="s",
        passed_count=0,
        failed_count=1,
        golden_run_ids=["g1"],
        recorded_at=datetime(2026, 12, 6, 21, 0),
    )
    assert ci.golden_run_ids == ("g1",)
    assert not ci.passed


BOUND = Baseline(head="h1", app_config="cfg1", epoch="e1")


@pytest.mark.parametrize(
    ("current", "reason"),
    [
        (Baseline("h1", "cfg1", "e2"), "epoch_changed"),
        (Baseline("h2", "cfg1", "e1"), "stale_head"),
        (Baseline("h1", "cfg2", "e1"), "app_config_changed"),
        # Precedence: the epoch first (arm membership may have moved), then the head.
        (Baseline("h2", "cfg2", "e2"), "epoch_changed"),
        (Baseline("h2", "cfg2", "e1"), "stale_head"),
    ],
)
def test_a_changed_baseline_invalidates_an_open_confirmation(current, reason):
    opened = Confirmation(claim_id="c1", baseline=BOUND, status="open", reason=None)
    checked = check_baseline(opened, current)
    assert (checked.status, checked.reason) == ("invalidated", reason)
    assert checked.reason in INVALIDATION_REASONS
    assert checked.baseline == BOUND and checked.claim_id == "c1"


def test_an_unchanged_baseline_keeps_it_open_and_settled_ones_are_kept():
    opened = Confirmation(claim_id="c1", baseline=BOUND)
    assert check_baseline(opened, Baseline("h1", "cfg1", "e1")) == opened
    moved = Baseline("h9", "cfg9", "e9")
    confirmed = Confirmation(claim_id="c1", baseline=BOUND, status="confirmed")
    assert check_baseline(confirmed, moved) is confirmed
    invalidated = Confirmation("c1", BOUND, "invalidated", "stale_head")
    assert check_baseline(invalidated, moved) is invalidated


@pytest.mark.parametrize(
    ("status", "reason", "message"),
    [
        ("closed", None, "status"),
        ("invalidated", None, "reason"),
        ("invalidated", "deployed", "reason"),
        ("open", "stale_head", "only an invalidated"),
    ],
)
def test_confirmation_states_are_checked(status, reason, message):
    with pytest.raises(ValueError, match=message):
        Confirmation("c1", BOUND, status, reason)


def test_invalidation_reasons_are_the_named_three():
    assert INVALIDATION_REASONS == ("stale_head", "app_config_changed", "epoch_changed")


def test_evidence_names_come_from_the_classes(screening, ci, superior_lift):
    from eval_pipelines.core.lift.evidence import evidence_name

    live = LiveConfirmation(claim_id="claim-1", lift=superior_lift)
    assert [evidence_name(e) for e in (screening, ci, live)] == [
        "offline_screening",
        "application_ci",
        "live_confirmation",
    ]
    assert evidence_name(LiveConfirmation) == "live_confirmation"
    assert screening.to_json()["kind"] == "offline_screening"
    assert ci.to_json()["kind"] == "application_ci"
    assert ci.to_json()["note"] == "a passed CI check is not a live confirmation"
    with pytest.raises(TypeError, match="not staged evidence"):
        evidence_name({"kind": "live_confirmation"})
