"""The outcome audit check of a live experiment's logs, before its lift is read.

A bias in how one arm's outcomes are logged (a treated failure logged as a success)
leaves arms, keys and counts intact: only outcomes established outside the logging path
can see it (:mod:`eval_pipelines.core.lift.audit`). Per arm, the audited requests (one
per cluster, so they are independent) whose logged outcome disagrees with the audited
one; Fisher's exact test [1]_ (:func:`scipy.stats.fisher_exact`, two-sided) of the 2 x 2
table arm x (disagrees, agrees). p below :data:`AUDIT_ALPHA` = 0.001 fails, the sample
ratio's threshold: the test is conditional and conservative, so a healthy experiment,
whose logging errs alike in both arms (however often), fails it at most one time in a
thousand. Fisher's rather than Boschloo's (uniformly more powerful): Boschloo's is far
slower, for each scope of each report (docs/benchmarks.md, "Figures behind code
choices"). Below
``MIN_N`` audited rows in either arm the check reads ``insufficient``; with none it
reads ``unaudited``: neither parks, and the report says that a bias in one arm's outcome
logging cannot be seen.

References
----------
.. [1] R. A. Fisher, "On the interpretation of chi-square from contingency tables, and the
       calculation of P", Journal of the Royal Statistical Society 85 (1922), 87-94.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from eval_pipelines.core.lift.audit import ranked
from eval_pipelines.core.lift.check_states import (
    CONTROL,
    FAILED,
    INSUFFICIENT_AUDIT,
    PASSED,
    TREATED,
    UNAUDITED,
)
from eval_pipelines.core.stats.policy import MIN_N

__all__ = [
    "AUDIT_ALPHA",
    "NO_AUDIT",
    "AuditArm",
    "AuditCheck",
    "audit_p_value",
    "outcome_audit",
]

#: An outcome audit whose Fisher exact p-value is below this fails.
AUDIT_ALPHA = 0.001


@dataclass(frozen=True)
class AuditArm:
    """One arm's audited requests: how many, how many disagree with their logged outcome, and
    how many of those were logged a success the audit found a failure (``over``)."""

    audited: int
    disagreements: int
    over: int

    @property
    def departure(self) -> float | None:
        """Mean of logged minus audited outcome (1 = success): the bias in the arm's rate."""
        under = self.disagreements - self.over
        return (self.over - under) / self.audited if self.audited else None

    def to_json(self) -> dict[str, Any]:
        departure = self.departure
        return {
            "audited": self.audited,
            "disagreements": self.disagreements,
            "loggedSuccessAuditedFailure": self.over,
            "loggedFailureAuditedSuccess": self.disagreements - self.over,
            "departure": None if departure is None else round(departure, 6),
        }


@dataclass(frozen=True)
class AuditCheck:
    """The outcome audit of one scope and epoch: per arm, audited requests and disagreements
    with the logged outcome, and the Fisher exact p-value (None: not run)."""

    treated: AuditArm
    control: AuditArm
    p_value: float | None
    left_out: int = 0

    @property
    def state(self) -> str:
        """:data:`UNAUDITED`, :data:`INSUFFICIENT_AUDIT`, :data:`PASSED` or :data:`FAILED`."""
        if self.treated.audited == 0 and self.control.audited == 0:
            return UNAUDITED
        if self.p_value is None:
            return INSUFFICIENT_AUDIT
        return PASSED if self.p_value >= AUDIT_ALPHA else FAILED

    @property
    def passed(self) -> bool:
        return self.state != FAILED

    @property
    def lift_bias(self) -> float | None:
        """Treated minus control departure: what the logging adds to the lift, as audited."""
        t, c = self.treated.departure, self.control.departure
        return None if t is None or c is None else t - c

    def words(self) -> str:
        """The audit in words: per arm n audited and disagreements, and what it means."""
        arms = (
            f"{TREATED} {self.treated.disagreements} of {self.treated.audited} audited "
            f"outcomes disagree with the logged one ({self.treated.over} logged a success), "
            f"{CONTROL} {self.control.disagreements} of {self.control.audited} "
            f"({self.control.over} logged a success)"
        )
        state = self.state
        if state == UNAUDITED:
            return (
                "unaudited: no audited outcome in this scope, so a bias in one arm's outcome "
                "logging (a treated failure logged as a success) cannot be seen: it reads as "
                "a lift (`lift audit-sample`, then `lift audit FILE`)"
            )
        if state == INSUFFICIENT_AUDIT:
            return (
                f"insufficient: {arms}; each arm needs at least {MIN_N} audited outcomes "
                "before the audit is read, so a bias in one arm's outcome logging is not "
                "checked yet"
            )
        bias = self.lift_bias
        estimate = "" if bias is None else f", the logging adds {bias:+.3f} to the lift"
        verdict = "passed" if state == PASSED else "failed"
        return (
            f"{verdict}: {arms}{estimate} (Fisher exact p = {self.p_value:.2g}, parks below "
            f"{AUDIT_ALPHA})"
        )

    def to_json(self) -> dict[str, Any]:
        bias = self.lift_bias
        return {
            "state": self.state,
            "treated": self.treated.to_json(),
            "control": self.control.to_json(),
            "liftBias": None if bias is None else round(bias, 6),
            "pValue": None if self.p_value is None else float(f"{self.p_value:.6g}"),
            "alpha": AUDIT_ALPHA,
            "minPerArm": MIN_N,
            "leftOutSameCluster": self.left_out,
            "passed": self.passed,
        }


#: The audit of a scope with no audited outcome.
NO_AUDIT = AuditCheck(AuditArm(0, 0, 0), AuditArm(0, 0, 0), None)


def audit_p_value(
    treated_audited: int,
    treated_disagreements: int,
    control_audited: int,
    control_disagreements: int,
) -> float:
    """Two-sided Fisher exact p-value of the arms' disagreement counts.

    The 2 x 2 table ``[[treated disagreements, control disagreements], [treated agreements,
    control agreements]]``; :func:`scipy.stats.fisher_exact` sums the hypergeometric
    probabilities of every table with these margins no more likely than the observed one.
    No disagreement in either arm gives 1.0.
    """
    counts = (treated_audited, treated_disagreements, control_audited, control_disagreements)
    if any(isinstance(c, bool) or not isinstance(c, int | np.integer) or c < 0 for c in counts):
        raise ValueError(f"counts {counts}: must be whole numbers >= 0")
    if treated_disagreements > treated_audited or control_disagreements > control_audited:
        raise ValueError(f"counts {counts}: disagreements cannot exceed the audited rows")
    from scipy import stats

    table = [
        [treated_disagreements, control_disagreements],
        [treated_audited - treated_disagreements, control_audited - control_disagreements],
    ]
    return float(min(1.0, stats.fisher_exact(table, alternative="two-sided").pvalue))


def outcome_audit(frame: pl.DataFrame, *, workspace_id: str, epoch: str) -> AuditCheck:
    """The outcome audit of one scope's rows of one epoch.

    Parameters
    ----------
    frame
        Rows with ``exposure_arm``, ``cluster``, ``outcome`` (logged) and ``audited_outcome``
        (null where not audited), and ``request_id`` when several requests of one cluster
        may be audited. Without an ``audited_outcome`` column the scope is unaudited.
    workspace_id, epoch
        The experiment (they seed :func:`~eval_pipelines.core.lift.audit.audit_rank`).

    Notes
    -----
    Only resolved rows of ``treated`` and ``lever_holdout`` with an audited outcome count. Of
    the audited requests of one cluster only the one of the smallest audit rank is read (the
    one the sample lists), so the counted rows are independent; the others are counted in
    :attr:`AuditCheck.left_out`.
    """
    if "audited_outcome" not in frame.columns:
        return NO_AUDIT
    audited = frame.filter(
        pl.col("exposure_arm").is_in([TREATED, CONTROL])
        & pl.col("audited_outcome").is_not_null()
        & pl.col("outcome").is_not_null()
    )
    if audited.height == 0:
        return NO_AUDIT
    if "request_id" in audited.columns:
        audited = ranked(audited, workspace_id=workspace_id, epoch=epoch).sort(
            "audit_rank", "request_id"
        )
    kept = audited.unique(subset=["cluster"], keep="first", maintain_order=True)
    arms = {}
    for arm in (TREATED, CONTROL):
        rows = kept.filter(pl.col("exposure_arm") == arm)
        disagree = rows.filter(pl.col("outcome") != pl.col("audited_outcome"))
        arms[arm] = AuditArm(
            audited=rows.height,
            disagreements=disagree.height,
            over=int(disagree.get_column("outcome").sum() or 0),
        )
    treated, control = arms[TREATED], arms[CONTROL]
    p_value = None
    if treated.audited >= MIN_N and control.audited >= MIN_N:
        p_value = audit_p_value(
            treated.audited, treated.disagreements, control.audited, control.disagreements
        )
    return AuditCheck(treated, control, p_value, left_out=audited.height - kept.height)
