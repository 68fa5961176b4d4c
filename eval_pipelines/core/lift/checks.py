"""The checks run on a live experiment's logs before its lift is read, run together.

The A/A check of :mod:`eval_pipelines.core.lift.lift` splits the control arm only: it sees an
interval too narrow for the control arm's data, but not logs whose arms or clusters are not
the ones the assignment used. Three checks look at exactly that, as trusted experimentation
platforms do before reading a result [1]_, and a fourth, the outcome audit, at what no
log can show; any one failing parks the instrument. Each check is its own module:

- sample ratio (SRM): :mod:`~eval_pipelines.core.lift.sample_ratio_check`;
- assignment: :mod:`~eval_pipelines.core.lift.assignment_check`;
- cluster size: :mod:`~eval_pipelines.core.lift.cluster_size_check`;
- outcome audit: :mod:`~eval_pipelines.core.lift.audit_check`.

This module runs them over one scope's rows (:func:`instrument_checks`) and holds their
result (:class:`InstrumentChecks`).

References
----------
.. [1] R. Kohavi, D. Tang and Y. Xu, "Trustworthy Online Controlled Experiments", Cambridge
       University Press (2020), chapter 21 (sample ratio mismatch and other guardrails).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import polars as pl

from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines.core.lift.assignment_check import AssignmentCheck, assignment_check
from eval_pipelines.core.lift.audit_check import NO_AUDIT, AuditCheck, outcome_audit
from eval_pipelines.core.lift.check_states import CONTROL, TREATED
from eval_pipelines.core.lift.cluster_size_check import ClusterSizeCheck, cluster_size_check
from eval_pipelines.core.lift.sample_ratio_check import (
    SRM_ALPHA,
    SampleRatioCheck,
    sample_ratio_check,
)

__all__ = ["InstrumentChecks", "instrument_checks"]

_CONVERSATION_TOKEN = re.compile(r"^conv-[0-9a-f]{8}$")


@dataclass(frozen=True)
class InstrumentChecks:
    """The checks of one scope and epoch (the outcome audit: unaudited when not given)."""

    sample_ratio: SampleRatioCheck
    assignment: AssignmentCheck
    cluster_size: ClusterSizeCheck
    audit: AuditCheck = NO_AUDIT

    @property
    def passed(self) -> bool:
        return (
            self.sample_ratio.passed
            and self.assignment.passed
            and self.cluster_size.passed
            and self.audit.passed
        )

    @property
    def complete(self) -> bool:
        """True when the checks that need the split (ratio and assignment) ran."""
        return self.sample_ratio.ran and self.assignment.ran

    def failures(self) -> list[str]:
        """Each failed check in words, for the report."""
        out = []
        ratio = self.sample_ratio
        if not ratio.passed:
            out.append(
                f"sample ratio mismatch: {ratio.control_clusters} {CONTROL} against "
                f"{ratio.treated_clusters} {TREATED} clusters where the split gives "
                f"{ratio.expected_control_share:.0%} {CONTROL} (binomial p = "
                f"{ratio.p_value:.2g}, below {SRM_ALPHA})"
            )
        assignment = self.assignment
        if not assignment.passed:
            out.append(
                f"assignment mismatch: {assignment.mismatched_rows} of "
                f"{assignment.checked_rows} rows re-assigned from their logged cluster key "
                "land in another arm than the one stamped (the logged keys or arms are not "
                "the ones the assignment used)"
            )
        if not self.cluster_size.passed:
            out.append(f"cluster size: {self.cluster_size.words()}")
        if not self.audit.passed:
            out.append(
                f"outcome audit {self.audit.words()}: the logged outcomes of one arm depart "
                "from the audited ones more than the other's"
            )
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "sampleRatio": self.sample_ratio.to_json(),
            "assignment": self.assignment.to_json(),
            "clusterSize": self.cluster_size.to_json(),
            "audit": self.audit.to_json(),
            "complete": self.complete,
            "passed": self.passed,
        }


def instrument_checks(
    frame: pl.DataFrame, *, workspace_id: str, config: LiftConfig | None
) -> InstrumentChecks:
    """The checks of one scope's rows of one epoch (any arms; mixed clusters included).

    Parameters
    ----------
    frame
        Rows with ``exposure_arm`` and ``cluster``, and optionally ``key_source``,
        ``request_id``, ``turn`` and ``child_span`` (the cluster-size check).
    workspace_id
        The workspace the rows belong to.
    config
        The split the rows were assigned under (the workspace's settings of this epoch), or
        None when it is not known: the ratio and assignment checks then do not run (and
        :attr:`InstrumentChecks.complete` is False).

    The rows' ``audited_outcome`` column, when there is one, is the outcome audit
    (:func:`~eval_pipelines.core.lift.audit_check.outcome_audit`); without it the scope reads
    unaudited.
    """
    contrast = frame.filter(pl.col("exposure_arm").is_in([TREATED, CONTROL]))
    ratio = sample_ratio_check(contrast, config=config)

    sources = (
        contrast.get_column("key_source")
        if "key_source" in contrast.columns
        else pl.Series([None] * contrast.height, dtype=pl.String)
    )
    tokens = contrast.get_column("cluster")
    conversation = (sources == "conversation").fill_null(False) | (
        sources.is_null() & tokens.str.contains(_CONVERSATION_TOKEN.pattern)
    )
    assignment = assignment_check(
        contrast, conversation=conversation, workspace_id=workspace_id, config=config
    )

    size = cluster_size_check(
        contrast.filter((sources == "trace").fill_null(False)), contrast.filter(conversation)
    )
    epochs = frame.get_column("exposure_epoch").unique().to_list() if frame.height else []
    audit = (
        outcome_audit(frame, workspace_id=workspace_id, epoch=str(epochs[0]))
        if len(epochs) == 1
        else NO_AUDIT
    )
    return InstrumentChecks(ratio, assignment, size, audit)
