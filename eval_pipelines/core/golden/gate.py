"""The activation gate's score check and the schema-drift flag.

Whether the gating run was run against the revision being activated, or mixed revisions, is
decided by the caller, which knows the runs; this module only judges the scores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.golden.summary import RunScore, format_share
from eval_pipelines.core.workflows.schema import Schema


@dataclass(frozen=True)
class GateDecision:
    """Whether a run clears the gate, and why (the text the Activate action shows)."""

    passed: bool
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "reason": self.reason}


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
        Passed when something was scored and ``correct / scored >= threshold``.

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
    # below 1.0"; with the counts beside it.
    shown = f"{format_share(accuracy)} ({run.field_correct}/{run.field_scored})"
    if accuracy >= limit:
        return GateDecision(True, f"scored {shown} at or above threshold {limit}")
    return GateDecision(False, f"scored {shown} below threshold {limit}")


def schema_drift(authored_fingerprint: str, current_schema: Schema) -> bool:
    """True when the scored node's structure changed since the case was authored.

    The fingerprint covers ids, types and columns but not names, so renames never drift. A
    warning for the author, never a block.
    """
    return authored_fingerprint != current_schema.fingerprint()
