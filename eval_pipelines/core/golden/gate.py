"""The activation gate: the whole rule, and the schema-drift flag.

A revision may be activated when every golden set marked as a gate has a completed run against
exactly that revision that covers every case enabled now, did not mix revisions, produced an
output for every case and reached the set's threshold. :func:`decide_gate` applies that rule to
the evidence the caller read (:class:`GatingEvidence`, one per gating set); it reads nothing
itself, so the asset check, ``workflow activate`` and ``golden run`` judge with the same code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.golden.shares import format_share, json_share
from eval_pipelines.core.golden.summary import RunScore
from eval_pipelines.core.results import JsonResult, json_field
from eval_pipelines.core.stats.policy import is_sufficient
from eval_pipelines.core.workflows.schema import Schema


@dataclass(frozen=True)
class GateDecision(JsonResult):
    """Whether a run clears the gate, and why (the text the Activate action shows)."""

    passed: bool
    reason: str


def validate_threshold(threshold: Any) -> float:
    """The threshold as a float in (0, 1], or :class:`InputError` naming ``threshold``."""
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not 0 < threshold <= 1  # also rejects NaN
    ):
        raise InputError("threshold", threshold, "must be a number in (0, 1], e.g. 1.0 or 0.95")
    return float(threshold)


def passes_gate(run: RunScore, *, threshold: float) -> GateDecision:
    """Judge a run's field accuracy against the gate's threshold.

    Parameters
    ----------
    run
        The gating run's figures.
    threshold
        Field accuracy the run must reach, in (0, 1]; 1.0 means every scored item matched.

    Returns
    -------
    GateDecision
        Passed when something was scored and ``correct / scored >= threshold``; the reason
        gives the share and its counts (``scored 0.909 (30/33) below threshold 1.0``), the
        counts alone from fewer than 20 values (``scored 3/4 below threshold 1.0``).

    Raises
    ------
    InputError
        ``threshold`` is not a number in (0, 1].
    """
    limit = validate_threshold(threshold)
    if run.field_scored == 0:
        return GateDecision(
            False, f"scored nothing: no scored field in any case (threshold {limit})"
        )
    # Compare the correctly rounded ratio with the threshold, never ``correct >= limit * n``:
    # 0.28 * 25 is 7.000000000000001 in floating point, which would fail 7 of 25.
    accuracy = run.field_correct / run.field_scored
    # Truncated like every report (format_share), so 0.9996 below 1.0 never reads "1.000
    # below 1.0"; with the counts beside it. From fewer than 20 values the counts alone: the
    # rule compares them with the threshold at any n, but such a share is no estimate to print.
    counts = f"{run.field_correct}/{run.field_scored}"
    shown = f"{format_share(accuracy)} ({counts})" if is_sufficient(run.field_scored) else counts
    if accuracy >= limit:
        return GateDecision(True, f"scored {shown} at or above threshold {limit}")
    return GateDecision(False, f"scored {shown} below threshold {limit}")


def schema_drift(authored_fingerprint: str, current_schema: Schema) -> bool:
    """True when the scored node's structure changed since the case was authored.

    The fingerprint covers ids, types and columns but not names, so renames never drift. A
    warning for the author, never a block.
    """
    return authored_fingerprint != current_schema.fingerprint()


MISSED_FIELDS_SHOWN = 3
CASES_SHOWN = 5


@dataclass(frozen=True)
class GatingEvidence:
    """What the gate judges one gating set on, as the caller read it from the warehouse.

    ``golden_run_id`` is the set's newest completed run against the revision (``None``: none
    yet, and ``unfinished`` then describes its newest run of any status, if any). ``score``
    is that run scored on the cases enabled now; ``covered`` the cases it has results for;
    ``without_output`` the ``(case id, why)`` of cases the revision produced no output for.
    """

    set_name: str
    threshold: float
    golden_run_id: str | None
    enabled: tuple[str, ...] = ()
    covered: frozenset[str] = frozenset()
    score: RunScore | None = None
    mixed_revisions: tuple[str, ...] = ()
    without_output: tuple[tuple[str, str], ...] = ()
    unfinished: str | None = None


@dataclass(frozen=True, kw_only=True)
class SetGate(JsonResult):
    """One gating set's verdict. ``field_correct`` / ``field_scored`` are the values its run
    got right out of those scored (None when it has no run, or in a decision the activation
    ledger recorded before they were written). The JSON writes them beside ``fieldAccuracy``,
    which reads ``insufficient_evidence`` from fewer than 20 values (the exact share comes
    back from the counts); without counts ``fieldAccuracy`` is read as it was written."""

    set_name: str = json_field("set")
    passed: bool
    reason: str
    golden_run_id: str | None
    field_accuracy: float | None
    threshold: float
    field_correct: int | None = None
    field_scored: int | None = None

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        if self.field_scored is None:
            del document["fieldCorrect"], document["fieldScored"]
        else:
            document["fieldAccuracy"] = json_share(self.field_accuracy, self.field_scored)
        return document

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> SetGate:
        correct, scored = document.get("fieldCorrect"), document.get("fieldScored")
        if scored is None:
            accuracy = document["fieldAccuracy"]
        else:
            accuracy = correct / scored if scored else None
        return cls(
            set_name=document["set"],
            passed=document["passed"],
            reason=document["reason"],
            golden_run_id=document["goldenRunId"],
            field_accuracy=accuracy,
            threshold=document["threshold"],
            field_correct=correct,
            field_scored=scored,
        )


@dataclass(frozen=True)
class Gate(JsonResult):
    """Whether a revision may be activated, and why (one line per gating set)."""

    workflow: str
    revision: str
    passed: bool
    reason: str
    sets: tuple[SetGate, ...]

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> Gate:
        """The decision from its document, as :meth:`to_json` wrote it."""
        return cls(
            workflow=document["workflow"],
            revision=document["revision"],
            passed=document["passed"],
            reason=document["reason"],
            sets=tuple(SetGate.from_json(s) for s in document["sets"]),
        )


def gate_summary(gate: Gate) -> str:
    """The decision in one line, as the Dagster check and the run's log show it: ``gate
    blocked: inv 30/33`` (each failing set with the values its run got right out of those
    scored; ``not run`` when it has no completed run against the revision), ``gate passed:
    inv 33/33`` (every set) or ``gate passed: no golden set gates this workflow``."""
    verdict = "passed" if gate.passed else "blocked"
    if not gate.sets:
        return f"gate {verdict}: {gate.reason}"
    shown = [s for s in gate.sets if not s.passed] or list(gate.sets)
    parts = [
        f"{s.set_name} {s.field_correct}/{s.field_scored}"
        if s.field_scored is not None
        else f"{s.set_name} not run"
        for s in shown
    ]
    return f"gate {verdict}: {', '.join(parts)}"


def decide_gate(workflow: str, revision: str, evidence: Sequence[GatingEvidence]) -> Gate:
    """The activation gate for exactly ``revision`` of ``workflow``.

    Parameters
    ----------
    workflow, revision
        What is to be activated.
    evidence
        One :class:`GatingEvidence` per golden set marked as a gate; empty when none is.

    Returns
    -------
    Gate
        Passed when no set gates the workflow or every gating set passed; the reason lists
        the failing sets' reasons (all sets' when every one passed).
    """
    if not evidence:
        return Gate(workflow, revision, True, "no golden set gates this workflow", ())
    verdicts = tuple(judge_set(e, revision=revision) for e in evidence)
    failed = [v for v in verdicts if not v.passed]
    reason = "; ".join(v.reason for v in (failed or verdicts))
    return Gate(workflow, revision, not failed, reason, verdicts)


def judge_set(evidence: GatingEvidence, *, revision: str) -> SetGate:
    """One gating set's verdict, in the order the rule is checked: a completed run exists,
    it covers every enabled case, it did not mix revisions, every case has an output, and
    its field accuracy reaches the threshold."""
    name = evidence.set_name
    run_id = evidence.golden_run_id
    if run_id is None or evidence.score is None:
        note = f" (its newest run there is {evidence.unfinished})" if evidence.unfinished else ""
        reason = f"set {name} has not been run against revision {revision}{note}"
        return SetGate(
            set_name=name,
            passed=False,
            reason=reason,
            golden_run_id=None,
            field_accuracy=None,
            threshold=evidence.threshold,
        )
    # The gate judges the set as it is now: every enabled case must have a result in the run
    # (a case added or enabled since was never required by it), and a case disabled since is
    # left out, as a re-run would leave it.
    missing = [c for c in evidence.enabled if c not in evidence.covered]
    left_out = sorted(evidence.covered - set(evidence.enabled))
    if missing:
        passed, reason = (
            False,
            f"set {name}: run {run_id} does not cover {len(missing)} of its "
            f"{len(evidence.enabled)} enabled case(s) ({listed(missing)}: added or enabled "
            f"since it ran); re-run the set against this revision (eval-pipelines golden run "
            f"{name} --revision {revision})",
        )
    elif evidence.mixed_revisions:
        passed, reason = (
            False,
            f"set {name}'s run {run_id} mixed revisions (cases "
            f"{', '.join(evidence.mixed_revisions)} scored another revision)",
        )
    elif evidence.without_output:
        # 001 leaves errored cases out of the scores; a gate must not let a revision that
        # extracts nothing from a golden document through on the strength of the others.
        first, why = evidence.without_output[0]
        passed, reason = (
            False,
            f"set {name}: {len(evidence.without_output)} case(s) produced no output "
            f"({first}: {why})",
        )
    else:
        decision = passes_gate(evidence.score, threshold=evidence.threshold)
        passed = decision.passed
        reason = f"set {name}: {decision.reason}"
        if not passed:
            reason += missed_fields(evidence.score)
        if left_out:
            reason += f" ({listed(left_out)} disabled since the run, left out)"
    return SetGate(
        set_name=name,
        passed=passed,
        reason=reason,
        golden_run_id=run_id,
        field_accuracy=evidence.score.field_accuracy,
        threshold=evidence.threshold,
        field_correct=evidence.score.field_correct,
        field_scored=evidence.score.field_scored,
    )


def listed(case_ids: Sequence[str]) -> str:
    """``case-0004, case-0005`` (the first few, then how many more)."""
    shown = ", ".join(case_ids[:CASES_SHOWN])
    more = len(case_ids) - CASES_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def missed_fields(score: RunScore) -> str:
    """`` (misses: customer 3 of 3 wrong, line_items.qty 2 of 6 wrong)``: the fields with the
    lowest share right first (each with its values wrong of those scored), so a refusal says
    where to look."""
    missed = sorted(
        (f for f in score.fields if not f.stale and f.scored and f.correct < f.scored),
        key=lambda f: (f.correct / f.scored, f.key),
    )
    if not missed:
        return ""
    shown = ", ".join(
        f"{f.key} {f.scored - f.correct} of {f.scored} wrong" for f in missed[:MISSED_FIELDS_SHOWN]
    )
    more = (
        f" and {len(missed) - MISSED_FIELDS_SHOWN} more"
        if len(missed) > MISSED_FIELDS_SHOWN
        else ""
    )
    return f" (misses: {shown}{more})"
