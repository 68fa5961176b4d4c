"""Staged evidence for a lift: three distinct types, so a weaker one never reads as a stronger.

A candidate becomes a confirmed improvement only through a live confirmation (specification
004, "How a lift is proven"). Offline screening (our replay on a disjoint split) and
application CI (the customer's own harness) are evidence of other things: a screening pass
is not a live result, and a passed CI check is not a live confirmation. Each stage is its own
frozen class with a fixed :class:`EvidenceKind`; the kind of a value is decided by its class
(a subclass keeps its parent's kind whatever it declares), :func:`require_kind` refuses any
other stage, and :func:`confirmed_improvement` is true for one thing only: a live
confirmation whose lift verdict is superior.

A confirmation in progress is bound to a :class:`Baseline` (application head, application
config, exposure epoch). A deploy, rollback or epoch change under it does not become the
result: :func:`check_baseline` invalidates the open confirmation with a named reason.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import datetime
from enum import IntEnum
from typing import Any, ClassVar

from eval_pipelines.core.errors import EvalPipelinesError, InputError
from eval_pipelines.core.lift.lift import SUPERIOR, LiftResult

__all__ = [
    "CONFIRMED",
    "CONFIRMATION_STATUSES",
    "INVALIDATED",
    "INVALIDATION_REASONS",
    "OPEN",
    "BINDS_APPLICATION",
    "MODEL_CALLS_REFUSAL",
    "ApplicationCI",
    "Baseline",
    "Confirmation",
    "Evidence",
    "EvidenceKind",
    "LiveConfirmation",
    "OfflineScreening",
    "WeakerEvidenceError",
    "check_baseline",
    "confirmed_improvement",
    "evidence_kind",
    "evidence_name",
    "require_kind",
]


class EvidenceKind(IntEnum):
    """The stages of evidence, weakest first."""

    OFFLINE_SCREENING = 1
    APPLICATION_CI = 2
    LIVE_CONFIRMATION = 3


# What each stage is not, in the words of specification 004.
_NOT = {
    EvidenceKind.OFFLINE_SCREENING: "a screening pass is not a live result",
    EvidenceKind.APPLICATION_CI: "a passed CI check is not a live confirmation",
    EvidenceKind.LIVE_CONFIRMATION: "a live confirmation is its own stage",
}


class WeakerEvidenceError(EvalPipelinesError, ValueError):
    """Evidence of one stage was presented where another stage is required."""

    def __init__(self, given: EvidenceKind, required: EvidenceKind) -> None:
        self.given = given
        self.required = required
        relation = "weaker than" if given < required else "not"
        super().__init__(
            f"{given.name.lower()} evidence is {relation} {required.name.lower()} evidence: "
            f"{_NOT[given]}"
        )


@dataclass(frozen=True)
class OfflineScreening:
    """Stage 1: our replay of the candidate against the baseline on a disjoint split.

    Attributes
    ----------
    eval_id
        The offline evaluation.
    candidate, baseline
        What was compared.
    level
        The verdict word the offline comparison read (e.g. ``better``), or None when it read
        none.
    difference
        Candidate minus baseline, or None below the minimum sample.
    interval
        ``(low, high)`` of the difference, or None with it.
    n
        Records compared.
    case_id
        The case the evaluation ran on: what, with the candidate's name and configuration,
        identifies the candidate screened (a variant name alone does not).
    depth
        The target level of the case the difference was read at.
    cost
        The evaluation's paired difference in cost per record of the same pair (the holdout
        report's comparison ``cost``: status, currency, ``difference`` and ``relative`` with
        their intervals, ``n``; or why it was not compared), None when the report has none
        (no variant calls a model, or it was made before cost per record).
    """

    kind: ClassVar[EvidenceKind] = EvidenceKind.OFFLINE_SCREENING

    eval_id: str
    candidate: str
    baseline: str
    level: str | None
    difference: float | None
    interval: tuple[float, float] | None
    n: int
    case_id: str | None = None
    depth: str | None = None
    cost: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError(f"n={self.n}: must be at least 0")
        if self.interval is not None:
            low, high = self.interval
            if math.isnan(low) or math.isnan(high) or low > high:
                raise ValueError(f"interval={self.interval}: need low <= high")
            object.__setattr__(self, "interval", (float(low), float(high)))

    def to_json(self) -> dict[str, Any]:
        """camelCase, with its stage named by :func:`evidence_name` (never a stronger one)."""
        return {
            "kind": evidence_name(self),
            "evalId": self.eval_id,
            "caseId": self.case_id,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "level": self.depth,
            "difference": self.difference,
            "interval": list(self.interval) if self.interval is not None else None,
            "n": self.n,
            "verdict": self.level,
            "cost": self.cost,
        }


#: What an application-CI check must have exercised: real application code (specification 004).
BINDS_APPLICATION = "application"

#: Why a check that exercised raw model calls only is refused as application CI.
MODEL_CALLS_REFUSAL = (
    "a raw model-call comparison cannot claim application coverage (spec 004): application CI "
    "binds real application code"
)


@dataclass(frozen=True, kw_only=True)
class ApplicationCI:
    """Stage 2: the customer's own test or replay harness, in their CI, on real app code.

    Evidence the application still works with the candidate, never that the model improved: a
    passed CI check is not a live confirmation. Built and validated by
    :func:`eval_pipelines.core.lift.application_ci.application_ci_result`.

    Attributes
    ----------
    workspace_id, candidate
        The workspace and the candidate (its lever) the check bound.
    source
        ``golden_gate`` (the activation gate's runs of the workflow revision the lever
        changes) or ``harness`` (the team's own harness, recorded through the CLI or API).
    commit
        The application revision the check ran on (for ``golden_gate``, the workflow revision).
    suite
        What ran (for ``golden_gate``, the workflow whose gating sets ran).
    passed_count, failed_count, skipped_count
        Tests (for ``golden_gate``, gating sets) that passed, failed and were skipped.
    golden_run_ids
        The golden runs the check replayed (``golden_gate`` only).
    recorded_at
        When the result was recorded (UTC).
    binds
        What the check exercised: always ``application`` (a raw model-call comparison is
        refused, see :data:`MODEL_CALLS_REFUSAL`).
    detail
        The gate's reason for ``golden_gate``; None for a harness.
    """

    kind: ClassVar[EvidenceKind] = EvidenceKind.APPLICATION_CI

    workspace_id: str
    candidate: str
    source: str
    commit: str
    suite: str
    passed_count: int
    failed_count: int
    skipped_count: int = 0
    golden_run_ids: tuple[str, ...] = ()
    recorded_at: datetime
    binds: str = BINDS_APPLICATION
    detail: str | None = None

    def __post_init__(self) -> None:
        # What the type means, whichever way it is built: it never holds model-call coverage.
        if self.binds != BINDS_APPLICATION:
            raise InputError("binds", self.binds, MODEL_CALLS_REFUSAL)
        object.__setattr__(self, "golden_run_ids", tuple(self.golden_run_ids))

    @property
    def passed(self) -> bool:
        """Whether the check passed: something ran and nothing failed (skips aside). Evidence
        the app still works, not that the model improved."""
        return self.failed_count == 0 and self.passed_count > 0

    def to_json(self) -> dict[str, Any]:
        """camelCase, with its stage named by :func:`evidence_name` (never a stronger one)."""
        return {
            "kind": evidence_name(self),
            "workspaceId": self.workspace_id,
            "candidate": self.candidate,
            "source": self.source,
            "commit": self.commit,
            "suite": self.suite,
            "check": "passed" if self.passed else "failed",
            "passed": self.passed_count,
            "failed": self.failed_count,
            "skipped": self.skipped_count,
            "goldenRunIds": list(self.golden_run_ids),
            "binds": self.binds,
            "detail": self.detail,
            "recordedAt": self.recorded_at.isoformat(timespec="seconds"),
            "note": _NOT[EvidenceKind.APPLICATION_CI],
        }


@dataclass(frozen=True)
class LiveConfirmation:
    """Stage 3: a randomized live contrast of the treated arm against the lever holdout.

    Attributes
    ----------
    claim_id
        The improvement claim under confirmation.
    lift
        The :func:`~eval_pipelines.core.lift.lift.live_lift` result that decides it.
    """

    kind: ClassVar[EvidenceKind] = EvidenceKind.LIVE_CONFIRMATION

    claim_id: str
    lift: LiftResult

    def __post_init__(self) -> None:
        if not isinstance(self.lift, LiftResult):
            raise TypeError(
                f"lift: a live confirmation holds a LiftResult, got {type(self.lift).__name__} "
                "(weaker evidence cannot be wrapped as a live result)"
            )


Evidence = OfflineScreening | ApplicationCI | LiveConfirmation

# Checked in this order: the class decides the kind, not the attribute.
_KINDS: tuple[tuple[type, EvidenceKind], ...] = (
    (OfflineScreening, EvidenceKind.OFFLINE_SCREENING),
    (ApplicationCI, EvidenceKind.APPLICATION_CI),
    (LiveConfirmation, EvidenceKind.LIVE_CONFIRMATION),
)


def evidence_kind(evidence: object) -> EvidenceKind:
    """The stage of ``evidence``, decided by its class.

    Raises
    ------
    TypeError
        When ``evidence`` is none of the three stages.
    """
    for cls, kind in _KINDS:
        if isinstance(evidence, cls):
            return kind
    raise TypeError(
        f"{type(evidence).__name__} is not staged evidence "
        "(OfflineScreening, ApplicationCI or LiveConfirmation)"
    )


def evidence_name(evidence: object) -> str:
    """The stage of ``evidence`` (an instance or one of the three classes) as the ledger and
    the API write it: ``offline_screening``, ``application_ci`` or ``live_confirmation``.

    Raises
    ------
    TypeError
        When ``evidence`` is none of the three stages.
    """
    if isinstance(evidence, type):
        for cls, kind in _KINDS:
            if issubclass(evidence, cls):
                return kind.name.lower()
        raise TypeError(f"{evidence.__name__} is not a staged evidence class")
    return evidence_kind(evidence).name.lower()


def require_kind(evidence: object, kind: EvidenceKind) -> None:
    """Refuse ``evidence`` unless it is of stage ``kind``.

    Raises
    ------
    WeakerEvidenceError
        When the evidence is of another stage (the message names both; a weaker stage is
        never accepted for a stronger, nor a stronger relabelled as a weaker).
    TypeError
        When ``evidence`` is not staged evidence at all.
    """
    given = evidence_kind(evidence)
    required = EvidenceKind(kind)
    if given != required:
        raise WeakerEvidenceError(given, required)


def confirmed_improvement(evidence: object) -> bool:
    """True only for a :class:`LiveConfirmation` whose lift verdict is superior.

    A screening pass, a passed CI check, a merged pull request or a deploy is never a measured
    improvement; nor is a live lift that is parked, insufficient, not established or inferior.
    """
    return isinstance(evidence, LiveConfirmation) and evidence.lift.verdict == SUPERIOR


OPEN = "open"
CONFIRMED = "confirmed"
INVALIDATED = "invalidated"
CONFIRMATION_STATUSES = (OPEN, CONFIRMED, INVALIDATED)

#: Why an open confirmation was invalidated (:func:`check_baseline` tests the epoch first).
INVALIDATION_REASONS = ("stale_head", "app_config_changed", "epoch_changed")


@dataclass(frozen=True)
class Baseline:
    """What a confirmation is bound to: the application head and config, and the epoch."""

    head: str
    app_config: str
    epoch: str


@dataclass(frozen=True)
class Confirmation:
    """A live confirmation's state.

    Attributes
    ----------
    claim_id
        The claim under confirmation.
    baseline
        The baseline it was opened against.
    status
        ``open``, ``confirmed`` or ``invalidated``.
    reason
        For ``invalidated``, one of :data:`INVALIDATION_REASONS`; otherwise None.
    """

    claim_id: str
    baseline: Baseline
    status: str = OPEN
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.status not in CONFIRMATION_STATUSES:
            raise ValueError(
                f"status={self.status!r}: must be one of {', '.join(CONFIRMATION_STATUSES)}"
            )
        if self.status == INVALIDATED:
            if self.reason not in INVALIDATION_REASONS:
                raise ValueError(
                    f"reason={self.reason!r}: an invalidated confirmation names one of "
                    f"{', '.join(INVALIDATION_REASONS)}"
                )
        elif self.reason is not None:
            raise ValueError(f"reason={self.reason!r}: only an invalidated confirmation has one")


def check_baseline(confirmation: Confirmation, current: Baseline) -> Confirmation:
    """The confirmation after comparing its bound baseline with the current one.

    Parameters
    ----------
    confirmation
        The confirmation to check.
    current
        The application head, config and exposure epoch now in force.

    Returns
    -------
    Confirmation
        An open confirmation whose baseline changed is invalidated with a named reason:
        ``epoch_changed`` when the epoch moved (whatever else did: arm membership may have
        moved with it), else ``stale_head`` when the application head moved, else
        ``app_config_changed``. An unchanged baseline keeps it open; a confirmed or
        invalidated confirmation is returned unchanged (a later deploy does not undo a
        result, nor revive an invalidated one).
    """
    if confirmation.status != OPEN:
        return confirmation
    bound = confirmation.baseline
    if current.epoch != bound.epoch:
        reason = "epoch_changed"
    elif current.head != bound.head:
        reason = "stale_head"
    elif current.app_config != bound.app_config:
        reason = "app_config_changed"
    else:
        return confirmation
    return dataclasses.replace(confirmation, status=INVALIDATED, reason=reason)
