"""Live lift: the treated arm against the lever holdout, read only through an A/A-checked
interval.

A live confirmation serves the candidate to the ``treated`` arm and the frozen baseline to the
``lever_holdout`` slice. :func:`live_lift` compares the two arms' resolved outcomes with the
two-sample cluster bootstrap of :mod:`eval_pipelines.core.stats.aa`, after checking that the
same instrument, run on random halves of the control arm, does not find differences where
there are none (the A/A check). The verdict follows the quality bar of specification 004:
``superior`` only when the interval's lower bound is above zero; ``parked`` when the A/A
check failed (no lift is read at all); ``insufficient_evidence`` below the minimum sample.
The minimum detectable effect is reported beside it as a power diagnostic and never decides.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines.core.lift.check_states import NOT_RUN
from eval_pipelines.core.lift.checks import InstrumentChecks, instrument_checks
from eval_pipelines.core.lift.rollup import _validated
from eval_pipelines.core.lift.scope import CONTROL_ARM, TREATED_ARM, contrast_rows, scope_words
from eval_pipelines.core.stats.aa import AACheck, UnpairedDifference, aa_check, unpaired_difference
from eval_pipelines.core.stats.intervals import Interval
from eval_pipelines.core.stats.lift_power import (
    interval_standard_error,
    minimum_detectable_effect_from_se,
)
from eval_pipelines.core.stats.policy import INSUFFICIENT, MIN_N
from eval_pipelines.core.stats.sequential import DEFAULT_N_STAR, sequence_half_width
from eval_pipelines.core.stats.verdict import BETTER, NO_DETECTABLE_DIFFERENCE, WORSE, verdict

__all__ = [
    "CONTROL_ARM",
    "INFERIOR",
    "INSUFFICIENT",
    "MDE_ALPHA",
    "MDE_POWER",
    "SEQUENCE_N_STAR",
    "NOT_ESTABLISHED",
    "PARKED",
    "SUPERIOR",
    "TREATED_ARM",
    "ArmSummary",
    "always_valid",
    "arm_summary",
    "LiftResult",
    "live_lift",
]

SUPERIOR = "superior"
NOT_ESTABLISHED = "not_established"
INFERIOR = "inferior"
PARKED = "parked"

#: Clusters (both arms) at which the always-valid interval is tuned to be narrowest.
SEQUENCE_N_STAR = DEFAULT_N_STAR

#: The minimum detectable effect is reported at this two-sided level and power.
MDE_ALPHA = 0.05
MDE_POWER = 0.80

# Optional columns the checks before reading use (:mod:`eval_pipelines.core.lift.checks`).
_CHECKED_COLUMNS = {
    "key_source": pl.String,
    "request_id": pl.String,
    "turn": pl.Int64,
    "child_span": pl.Boolean,
    "audited_outcome": pl.Boolean,
}

# The one verdict rule of core.stats, renamed in the words of a lift.
_LIFT_WORDS = {
    BETTER: SUPERIOR,
    WORSE: INFERIOR,
    NO_DETECTABLE_DIFFERENCE: NOT_ESTABLISHED,
    INSUFFICIENT: INSUFFICIENT,
}


@dataclass(frozen=True)
class ArmSummary:
    """Raw counts of one arm in the lift's scope and epoch.

    Attributes
    ----------
    arm
        ``treated`` or ``lever_holdout``.
    total
        Rows (claim outcomes), resolved or not.
    resolved
        Rows with an outcome: the rows the lift scores.
    successes
        Resolved rows whose outcome is true.
    censored
        Unresolved rows: counted, never scored.
    censored_share
        ``censored / total``, or None when the arm has no rows.
    clusters
        Distinct cluster tokens among the arm's rows, censored ones included (the bootstrap
        resamples the clusters of the resolved rows: :attr:`UnpairedDifference.clusters_a`).
    """

    arm: str
    total: int
    resolved: int
    successes: int
    censored: int
    censored_share: float | None
    clusters: int

    def to_json(self) -> dict[str, Any]:
        share = None if self.censored_share is None else round(self.censored_share, 6)
        return {
            "arm": self.arm,
            "total": self.total,
            "resolved": self.resolved,
            "successes": self.successes,
            "censored": self.censored,
            "censoredShare": share,
            "clusters": self.clusters,
        }


@dataclass(frozen=True)
class LiftResult:
    """The live lift of one scope in one epoch: treated minus lever holdout.

    Attributes
    ----------
    workspace_id, claim_type, situation_class, source
        The scope; None means every value in the workspace.
    epoch
        The one exposure epoch compared.
    treated, control
        Counts of the ``treated`` and ``lever_holdout`` arms.
    aa
        The A/A check: the control arm's resolved outcomes on random halves of its clusters,
        through the same bootstrap as the lift. It must pass before any lift is read.
    difference
        Treated success rate minus control success rate with its two-sample cluster-bootstrap
        interval (side A is the control, side B the treated arm): a fixed-sample interval,
        valid for one look only. None when parked.
    verdict
        :data:`PARKED` when the A/A check or a check before reading failed;
        :data:`INSUFFICIENT` when either arm has fewer than ``MIN_N`` resolved rows or
        clusters, or the A/A check could not run on every split; otherwise
        :data:`SUPERIOR` only when the lower bound of :attr:`sequence` is above zero,
        :data:`INFERIOR` when its upper bound is below zero, else :data:`NOT_ESTABLISHED`.
    mde
        Minimum detectable effect at 80% power and 5% two-sided, from the bootstrap standard
        error: a power diagnostic, never the verdict. None without an interval, or when the
        interval is a single point.
    message
        The result in plain words: scope, interval, n, and what the verdict does not mean.
    mixed_clusters
        Cluster tokens seen in more than one arm in the scope and epoch: mixed artifacts,
        ineligible to anchor a contrast, left out of both arms.
    sequence
        The always-valid 95% interval of the difference (a confidence sequence,
        :mod:`eval_pipelines.core.stats.sequential`): centred on the estimate, with the
        bootstrap's standard error and the clusters of both arms as units. It is the interval
        the verdict reads, so a report read every day confirms a null lift no more than 2.5%
        of the time. None without a bootstrap interval.
    checks
        The checks run on the logs before the lift is read
        (:func:`~eval_pipelines.core.lift.checks.instrument_checks`: sample ratio,
        re-derived assignment, cluster size); any failing parks the instrument.
    """

    workspace_id: str
    claim_type: str | None
    situation_class: str | None
    source: str | None
    epoch: str
    treated: ArmSummary
    control: ArmSummary
    aa: AACheck
    difference: UnpairedDifference | None
    verdict: str
    mde: float | None
    message: str
    mixed_clusters: int = 0
    checks: InstrumentChecks | None = None
    sequence: Interval | None = None

    def to_json(self) -> dict[str, Any]:
        """camelCase, figures rounded to 6 decimals; the lift always as an interval with its n
        (``insufficient_evidence`` in place of a number below the minimum sample)."""
        return {
            "workspaceId": self.workspace_id,
            "claimType": self.claim_type,
            "situationClass": self.situation_class,
            "source": self.source,
            "epoch": self.epoch,
            "treated": self.treated.to_json(),
            "control": self.control.to_json(),
            "aa": self.aa.to_json(),
            "difference": _difference_json(self.difference),
            "sequence": _sequence_json(self.sequence),
            "verdict": self.verdict,
            "mde": None if self.mde is None else round(self.mde, 6),
            "message": self.message,
            "mixedClusters": self.mixed_clusters,
            "checks": None if self.checks is None else self.checks.to_json(),
        }


def always_valid(estimate: float, interval: Interval, units: int) -> Interval:
    """The always-valid interval about ``estimate`` of a one-look bootstrap ``interval`` from
    ``units`` clusters: its standard error read off the interval's width
    (:func:`~eval_pipelines.core.stats.lift_power.interval_standard_error`) times the
    confidence sequence's multiplier at ``units``. The quality lift and the cost bar both read
    their verdicts off it."""
    se = interval_standard_error(interval)
    half = sequence_half_width(
        se, units, alpha=1.0 - interval.confidence_level, n_star=SEQUENCE_N_STAR
    )
    return Interval(estimate - half, estimate + half, interval.confidence_level)


def live_lift(
    events: pl.DataFrame,
    *,
    workspace_id: str,
    epoch: str,
    claim_type: str | None = None,
    situation_class: str | None = None,
    source: str | None = None,
    rng: int | np.random.Generator,
    n_resamples: int = 2000,
    aa_splits: int = 20,
    config: LiftConfig | None = None,
) -> LiftResult:
    """The lift of the treated arm over the lever holdout in one scope and epoch.

    Parameters
    ----------
    events
        One row per claim outcome (the columns of
        :data:`~eval_pipelines.core.lift.rollup.EVENT_COLUMNS`); any arms, epochs and
        workspaces.
    workspace_id
        The workspace compared.
    epoch
        The exposure epoch compared. Only its rows are read: observations of another epoch
        come from another experiment and are never pooled with these.
    claim_type, situation_class, source
        Narrow the scope to one value each; None takes every value.
    rng
        An int seed or a :class:`numpy.random.Generator` (required: the result must be
        reproducible). The A/A check uses the first generator spawned from
        ``numpy.random.default_rng(rng)``, the lift's bootstrap the second.
    n_resamples
        Bootstrap resamples per side, for the lift and every A/A split alike.
    aa_splits
        Seeded random halves of the A/A check (specification 004: 20).
    config
        The split the epoch's rows were assigned under (the workspace's settings of this
        epoch). With it the sample-ratio and assignment checks run; without it they do not,
        and :attr:`InstrumentChecks.complete` says so (a ledger does not confirm on it).

    Returns
    -------
    LiftResult

    Raises
    ------
    InputError
        (a ``ValueError``) when the scope holds no events of ``epoch`` (the message lists the
        epochs it does hold), or the events are malformed (see
        :func:`~eval_pipelines.core.lift.rollup.rollup`).

    Notes
    -----
    Only ``treated`` and ``lever_holdout`` rows are compared; the standing holdout,
    ``pre_lever`` and ``imported`` rows of the scope are not read. Censored (unresolved) rows
    are counted in each arm's summary and not scored. A cluster token found in more than one
    arm is a mixed artifact: its rows are left out of both arms and counted in
    :attr:`LiftResult.mixed_clusters`.

    The A/A check (:func:`~eval_pipelines.core.stats.aa.aa_check`) splits the control arm's
    clusters into random halves ``aa_splits`` times and compares them with the same
    bootstrap; more than 10% of splits declaring a difference means the interval is too
    narrow for these data, and the instrument is parked: no difference is computed. A check
    with a split whose half had fewer than ``MIN_N`` resolved rows or clusters passes only
    vacuously, so the verdict then reads ``insufficient_evidence``.

    Before the A/A check, :func:`~eval_pipelines.core.lift.checks.instrument_checks` looks at
    the logs themselves (the A/A splits the control arm only, so it cannot see arms or
    clusters that are not the ones the assignment used): a sample-ratio mismatch of the
    arms' clusters against the configured share, a logged cluster key that does not
    re-assign to its stamped arm, or requests logged as a later turn or child span (the
    ``turn`` and ``child_span`` columns) that nearly all sit alone in their cluster, park the
    instrument as a failed A/A does. So does a failed outcome audit: when
    ``events`` has an ``audited_outcome`` column (and ``request_id``), the arms'
    disagreements between logged and audited outcomes are compared
    (:func:`~eval_pipelines.core.lift.audit_check.outcome_audit`); without audited rows the
    result reads ``unaudited`` (:attr:`LiftResult.message` says what that leaves unseen).

    The lift is the difference of the arms' ratio estimators (resolved successes over
    resolved rows) with the percentile interval of the two-sample cluster bootstrap
    (:func:`~eval_pipelines.core.stats.aa.unpaired_difference`), and the verdict the one
    rule of :func:`~eval_pipelines.core.stats.verdict.verdict`. The minimum detectable
    effect is ``2.8`` standard errors, the standard error read off the interval's width
    (:func:`~eval_pipelines.core.stats.lift_power.interval_standard_error`).

    References
    ----------
    .. [1] Specification 004, "The quality bar: superiority" and "How a lift is proven".
    .. [2] R. Kohavi, D. Tang and Y. Xu, "Trustworthy Online Controlled Experiments",
           Cambridge University Press (2020), chapter 19 (the A/A test).
    """
    if rng is None or isinstance(rng, bool):
        raise ValueError(f"rng={rng!r}: must be an int seed or a numpy Generator (seeded)")
    frame = _validated(events)
    # The columns of the checks before reading, when given: the key source, each request's
    # id, turn and child span (cluster size), the audited outcome beside the logged one.
    for column, dtype in _CHECKED_COLUMNS.items():
        if column in events.columns:
            frame = frame.with_columns(events.get_column(column).cast(dtype))
    scope = {
        "workspace_id": workspace_id,
        "claim_type": claim_type,
        "situation_class": situation_class,
        "source": source,
    }
    contrast = contrast_rows(frame, scope, epoch=epoch)
    checks = instrument_checks(contrast.epoch_rows, workspace_id=workspace_id, config=config)
    mixed = contrast.mixed
    treated_rows, control_rows = contrast.treated, contrast.control
    treated, control = (
        arm_summary(TREATED_ARM, treated_rows),
        arm_summary(CONTROL_ARM, control_rows),
    )
    control_right, control_clusters = _scored(control_rows)
    treated_right, treated_clusters = _scored(treated_rows)

    aa_rng, lift_rng = np.random.default_rng(rng).spawn(2)
    aa = aa_check(
        control_right,
        control_right,
        control_clusters,
        splits=aa_splits,
        n_resamples=n_resamples,
        rng=aa_rng,
    )
    difference: UnpairedDifference | None = None
    sequence: Interval | None = None
    mde: float | None = None
    if not aa.passed or not checks.passed:
        word = PARKED
    else:
        difference = unpaired_difference(
            control_right,
            treated_right,
            a_clusters=control_clusters,
            b_clusters=treated_clusters,
            n_resamples=n_resamples,
            rng=lift_rng,
        )
        if difference.interval is not None and difference.estimate is not None:
            sequence = always_valid(
                difference.estimate,
                difference.interval,
                difference.clusters_a + difference.clusters_b,
            )
            se = interval_standard_error(difference.interval)
            if se > 0.0:
                mde = minimum_detectable_effect_from_se(se, alpha=MDE_ALPHA, power=MDE_POWER)
        # The one verdict rule, read off the always-valid interval.
        word = _LIFT_WORDS[verdict(dataclasses.replace(difference, interval=sequence))]
        if not aa.sufficient:
            word = INSUFFICIENT
    result = LiftResult(
        workspace_id=workspace_id,
        claim_type=claim_type,
        situation_class=situation_class,
        source=source,
        epoch=epoch,
        treated=treated,
        control=control,
        aa=aa,
        difference=difference,
        verdict=word,
        mde=mde,
        message="",
        mixed_clusters=len(mixed),
        checks=checks,
        sequence=sequence,
    )
    return dataclasses.replace(result, message=_message(result))


def arm_summary(arm: str, rows: pl.DataFrame) -> ArmSummary:
    """The raw counts of one arm's rows, resolved or not: the lift's and the cost bar's."""
    total = rows.height
    resolved = total - rows.get_column("outcome").null_count()
    return ArmSummary(
        arm=arm,
        total=total,
        resolved=resolved,
        successes=int(rows.get_column("outcome").sum() or 0),
        censored=total - resolved,
        censored_share=(total - resolved) / total if total else None,
        clusters=rows.get_column("cluster").n_unique(),
    )


def _scored(rows: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Resolved outcomes and their cluster tokens: censored rows are not scored."""
    resolved = rows.filter(pl.col("outcome").is_not_null())
    return (
        resolved.get_column("outcome").to_numpy().astype(np.bool_),
        resolved.get_column("cluster").to_numpy(),
    )


def _difference_json(difference: UnpairedDifference | None) -> dict[str, Any] | None:
    if difference is None:
        return None
    interval = difference.interval
    return {
        "estimate": INSUFFICIENT if difference.estimate is None else round(difference.estimate, 6),
        "interval": None if interval is None else [round(interval.low, 6), round(interval.high, 6)],
        "confidenceLevel": difference.confidence_level,
        "treated": {
            "n": difference.n_b,
            "clusters": difference.clusters_b,
            "successes": difference.right_b,
        },
        "control": {
            "n": difference.n_a,
            "clusters": difference.clusters_a,
            "successes": difference.right_a,
        },
        "nResamples": difference.n_resamples,
        "method": difference.method,
    }


def _sequence_json(sequence: Interval | None) -> dict[str, Any] | None:
    if sequence is None:
        return None
    return {
        "interval": [round(sequence.low, 6), round(sequence.high, 6)],
        "confidenceLevel": sequence.confidence_level,
        "nStar": SEQUENCE_N_STAR,
        "method": "asymptotic confidence sequence, normal-mixture boundary (always valid)",
    }


def _arm_words(summary: ArmSummary) -> str:
    # Below the minimum sample a rate is not a number: the words say so, the counts stay.
    enough = summary.resolved >= MIN_N
    rate = f"{summary.successes / summary.resolved:.3f}" if enough else INSUFFICIENT
    share = "" if summary.censored_share is None else f", {summary.censored_share:.0%} censored"
    return (
        f"{summary.arm} {rate} ({summary.successes} of {summary.resolved} resolved, "
        f"{summary.clusters} clusters{share})"
    )


def _message(result: LiftResult) -> str:
    scope = scope_words(
        {
            "workspace_id": result.workspace_id,
            "claim_type": result.claim_type,
            "situation_class": result.situation_class,
            "source": result.source,
        }
    )
    head = f"Live lift, {scope}, epoch {result.epoch}: "
    arms = f"{_arm_words(result.treated)}; {_arm_words(result.control)}."
    aa = result.aa
    mixed = (
        f" {result.mixed_clusters} mixed clusters (rows in more than one arm) were left out."
        if result.mixed_clusters
        else ""
    )
    failures = [] if result.checks is None else result.checks.failures()
    if result.verdict == PARKED and failures:
        return (
            f"{head}parked. The checks run before a lift is read failed: "
            f"{'; '.join(failures)}. The instrument is parked and no lift is read. "
            f"{arms}{mixed}"
        )
    unchecked = (
        " The sample-ratio and assignment checks did not run (no split configuration of "
        "this epoch was given): this reading is unchecked."
        if result.checks is not None and not result.checks.complete
        else ""
    )
    audit = f" Outcome audit {result.checks.audit.words()}." if result.checks is not None else ""
    size = result.checks.cluster_size if result.checks is not None else None
    unrun = f" Cluster-size check {size.words()}." if size and size.state == NOT_RUN else ""
    if result.verdict == PARKED:
        return (
            f"{head}parked. The A/A check failed: {aa.false_positives} of {aa.splits} random "
            f"halves of the {CONTROL_ARM} arm declared a difference "
            f"({aa.false_positive_rate:.0%}, above {aa.max_false_positive_rate:.0%}): the "
            "instrument's interval is too narrow for these data, so the instrument is parked "
            f"and no lift is read. {arms}{mixed}"
        )
    difference = result.difference
    interval = result.sequence
    if interval is None or difference is None or difference.estimate is None:
        return (
            f"{head}{INSUFFICIENT}: each arm needs at least {MIN_N} resolved outcomes in at "
            f"least {MIN_N} clusters. {arms} No lift has been established yet; this does not "
            f"imply a lift.{mixed}"
        )
    fixed = difference.interval
    one_look = (
        f"; the one-look bootstrap interval is [{fixed.low:+.3f}, {fixed.high:+.3f}]"
        if fixed is not None
        else ""
    )
    lift = (
        f"lift {difference.estimate:+.3f}, always-valid {interval.confidence_level:.0%} "
        f"interval [{interval.low:+.3f}, {interval.high:+.3f}] (a confidence sequence: valid "
        f"however often it is read{one_look}), n = {difference.n_b} treated and "
        f"{difference.n_a} {CONTROL_ARM} resolved outcomes"
    )
    mde = (
        f" Minimum detectable effect {result.mde:.3f} at {MDE_POWER:.0%} power (a power "
        "diagnostic, not the verdict)."
        if result.mde is not None
        else ""
    )
    if result.verdict == INSUFFICIENT:
        return (
            f"{head}{INSUFFICIENT}: the A/A check could not run on every split "
            f"({aa.insufficient_splits} of {aa.splits} splits of the {CONTROL_ARM} arm had a "
            f"half with fewer than {MIN_N} resolved outcomes or clusters), so the instrument "
            f"is unchecked and no lift is read; collect more {CONTROL_ARM} traffic. {arms} "
            f"This does not imply a lift.{mixed}"
        )
    meaning = {
        SUPERIOR: "superior: the interval's lower bound is above zero",
        INFERIOR: "inferior: the interval's upper bound is below zero, the treated arm is worse",
        NOT_ESTABLISHED: "no lift established: the interval contains zero",
    }[result.verdict]
    return (
        f"{head}{meaning}; {lift}. {arms}{mde} A/A check passed ({aa.false_positives} of "
        f"{aa.splits} halves declared a difference).{unchecked}{audit}{unrun}{mixed}"
    )
