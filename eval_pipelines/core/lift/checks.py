"""The checks run on a live experiment's logs before its lift is read.

The A/A check of :mod:`eval_pipelines.core.lift.lift` splits the control arm only: it sees an
interval too narrow for the control arm's data, but not logs whose arms or clusters are not
the ones the assignment used. Three checks look at exactly that, as trusted experimentation
platforms do before reading a result [1]_ [2]_, and a fourth, the outcome audit, at what no
log can show; any one failing parks the instrument:

Sample ratio (SRM)
    The clusters of the ``treated`` and ``lever_holdout`` arms against the configured
    ``lever_holdout_share`` (clusters, not requests: the cluster is what is randomised). An
    exact two-sided binomial test (:func:`scipy.stats.binomtest`); p below
    :data:`SRM_ALPHA` = 0.001 fails, the strict threshold Microsoft ExP and Optimizely use,
    so a healthy experiment fails it one time in a thousand.
Assignment
    Assignment is a pure function of the workspace, the cluster key and the split: every
    logged row whose cluster is the hashed key itself (an artifact key, trace id or request
    id; a conversation's ``conv-`` token is one-way and is skipped) is re-assigned with
    :func:`~eval_pipelines.core.lift.assignment.assign_many` and compared with its stamped
    arm. A single disagreement fails: the logged keys or arms are not the ones the
    assignment used (keys logged per request while arms were assigned per trace, an arm
    stamped from the outcome path, another split or lever).
Cluster size
    A key logged per request while every turn of a conversation (or every request of a
    trace) was meant to share it makes the cluster bootstrap treat correlated requests as
    independent. Over the clusters keyed on a trace, and on their own those keyed on a
    conversation (``key_source`` conversation, or an unlabelled ``conv-`` token), the
    evidence is a request the log marks as a later request of its unit (``turn`` of 2 or
    more, or ``child_span`` true: the optional log columns of
    :mod:`eval_pipelines.core.lift.logs`) that sits alone in its cluster: its unit's other
    requests were logged under other keys. At least :data:`SINGLETON_SHARE` of at least
    ``MIN_N`` such requests alone fail the check. One request per cluster alone is no
    evidence (a one-call service has single-request traces): with fewer than ``MIN_N``
    marked later requests and at least :data:`SINGLETON_SHARE` of at least ``MIN_N``
    clusters holding one request, the check reads :data:`NOT_RUN` (the logs cannot tell a
    key logged per request from single-request traces or conversations), which the report
    says and which does not park. A scope that logs only later turns (its claim type is
    asked after the first turn, and no other turn of the conversation is logged in it) has
    them alone too: the check cannot tell that from a key logged per request, and parks.
Outcome audit
    A bias in how one arm's outcomes are logged (a treated failure logged as a success)
    leaves arms, keys and counts intact: only outcomes established outside the logging path
    can see it (:mod:`eval_pipelines.core.lift.audit`). Per arm, the audited requests (one
    per cluster, so they are independent) whose logged outcome disagrees with the audited
    one; Fisher's exact test [3]_ (:func:`scipy.stats.fisher_exact`, two-sided) of the 2 x 2
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
.. [1] R. Kohavi, D. Tang and Y. Xu, "Trustworthy Online Controlled Experiments", Cambridge
       University Press (2020), chapter 21 (sample ratio mismatch and other guardrails).
.. [2] A. Fabijan et al., "Diagnosing Sample Ratio Mismatch in Online Controlled
       Experiments", KDD 2019 (p < 0.0005 used at Microsoft; 0.001 here).
.. [3] R. A. Fisher, "On the interpretation of chi-square from contingency tables, and the
       calculation of P", Journal of the Royal Statistical Society 85 (1922), 87-94.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from eval_pipelines.core.lift.assignment import ARMS, LiftConfig, assign_many
from eval_pipelines.core.lift.audit import ranked
from eval_pipelines.core.stats.policy import MIN_N

__all__ = [
    "AUDIT_ALPHA",
    "FAILED",
    "INSUFFICIENT_AUDIT",
    "NOT_RUN",
    "PASSED",
    "SINGLETON_SHARE",
    "SRM_ALPHA",
    "AssignmentCheck",
    "AuditCheck",
    "ClusterSizeCheck",
    "InstrumentChecks",
    "KeyedClusters",
    "SampleRatioCheck",
    "UNAUDITED",
    "audit_p_value",
    "cluster_size_check",
    "instrument_checks",
    "outcome_audit",
]

#: A sample-ratio p-value below this fails the check.
SRM_ALPHA = 0.001
#: Marked later requests this share of which sit alone in their cluster fail the cluster-size
#: check; without enough of them, clusters this share of which hold one request leave it
#: unable to run.
SINGLETON_SHARE = 0.95
#: An outcome audit whose Fisher exact p-value is below this fails.
AUDIT_ALPHA = 0.001
#: The outcome audit's states.
UNAUDITED, INSUFFICIENT_AUDIT, PASSED, FAILED = "unaudited", "insufficient", "passed", "failed"
#: The cluster-size check's state when the logs cannot tell a key logged per request from
#: single-request units.
NOT_RUN = "not_run"

_CONVERSATION_TOKEN = re.compile(r"^conv-[0-9a-f]{8}$")
_TREATED, _CONTROL = "treated", "lever_holdout"


@dataclass(frozen=True)
class SampleRatioCheck:
    """Clusters per arm against the configured share (None fields: not run)."""

    treated_clusters: int
    control_clusters: int
    expected_control_share: float | None
    p_value: float | None

    @property
    def ran(self) -> bool:
        return self.p_value is not None

    @property
    def passed(self) -> bool:
        return self.p_value is None or self.p_value >= SRM_ALPHA

    def to_json(self) -> dict[str, Any]:
        return {
            "treatedClusters": self.treated_clusters,
            "controlClusters": self.control_clusters,
            "expectedControlShare": self.expected_control_share,
            "pValue": None if self.p_value is None else float(f"{self.p_value:.6g}"),
            "alpha": SRM_ALPHA,
            "ran": self.ran,
            "passed": self.passed,
        }


@dataclass(frozen=True)
class AssignmentCheck:
    """Rows re-assigned from their logged cluster key, and how many disagree with their arm."""

    checked_rows: int
    mismatched_rows: int
    skipped_rows: int
    ran: bool

    @property
    def passed(self) -> bool:
        return self.mismatched_rows == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "checkedRows": self.checked_rows,
            "mismatchedRows": self.mismatched_rows,
            "skippedRows": self.skipped_rows,
            "ran": self.ran,
            "passed": self.passed,
        }


@dataclass(frozen=True)
class KeyedClusters:
    """The clusters of one key source (``trace`` or ``conversation``): how many, how many hold
    one request, and the requests the log marks as a later turn or child span: how many, and
    how many sit alone in their cluster (``marked_requests``: requests with a ``turn`` or
    ``child_span`` at all)."""

    key_source: str
    clusters: int
    single_request_clusters: int
    marked_requests: int = 0
    later_requests: int = 0
    later_alone: int = 0

    @property
    def single_share(self) -> float | None:
        return self.single_request_clusters / self.clusters if self.clusters else None

    @property
    def state(self) -> str:
        """:data:`FAILED` (later requests alone), :data:`PASSED` or :data:`NOT_RUN`."""
        if self.later_requests >= MIN_N:
            alone = self.later_alone >= SINGLETON_SHARE * self.later_requests
            return FAILED if alone else PASSED
        share = self.single_share
        if self.clusters >= MIN_N and share is not None and share >= SINGLETON_SHARE:
            return NOT_RUN
        return PASSED

    def words(self) -> str:
        """The counts in words, and what the state means."""
        clusters = (
            f"{self.single_request_clusters} of {self.clusters} {self.key_source}-keyed "
            "clusters hold one request"
        )
        later = (
            f"{self.later_alone} of {self.later_requests} requests logged as a later turn or "
            "child span sit alone in their cluster"
        )
        state = self.state
        if state == FAILED:
            return (
                f"{later} (the {self.key_source} key was logged per request: every turn of a "
                f"conversation and every request of a trace shares its key); {clusters}"
            )
        if state == PASSED:
            return f"{clusters}; {later}" if self.later_requests else clusters
        why = (
            f"only {self.later_requests} requests are logged as a later turn or child span "
            f"(it needs {MIN_N})"
            if self.marked_requests
            else "the log has no `turn` or `child_span` to mark later requests"
        )
        return (
            f"could not run: {clusters} and {why}, so a {self.key_source} key logged per "
            f"request cannot be told from single-request {self.key_source}s (a key logged per "
            "request reads correlated requests as independent)"
        )

    def to_json(self) -> dict[str, Any]:
        share = self.single_share
        return {
            "keySource": self.key_source,
            "state": self.state,
            "clusters": self.clusters,
            "singleRequestClusters": self.single_request_clusters,
            "singleShare": None if share is None else round(share, 6),
            "markedRequests": self.marked_requests,
            "laterRequests": self.later_requests,
            "laterAlone": self.later_alone,
        }


@dataclass(frozen=True)
class ClusterSizeCheck:
    """The cluster-size check of each key source whose clusters are meant to hold several
    requests (trace, conversation): failed when one fails, not run when one could not run."""

    by_source: tuple[KeyedClusters, ...] = ()

    @property
    def state(self) -> str:
        """:data:`FAILED`, :data:`NOT_RUN` or :data:`PASSED`."""
        states = {keyed.state for keyed in self.by_source}
        return next((s for s in (FAILED, NOT_RUN) if s in states), PASSED)

    @property
    def passed(self) -> bool:
        return self.state != FAILED

    @property
    def keyed_clusters(self) -> int:
        return sum(keyed.clusters for keyed in self.by_source)

    @property
    def single_request_clusters(self) -> int:
        return sum(keyed.single_request_clusters for keyed in self.by_source)

    @property
    def single_share(self) -> float | None:
        total = self.keyed_clusters
        return self.single_request_clusters / total if total else None

    @property
    def later_requests(self) -> int:
        return sum(keyed.later_requests for keyed in self.by_source)

    @property
    def later_alone(self) -> int:
        return sum(keyed.later_alone for keyed in self.by_source)

    def words(self) -> str:
        """Each key source's check in words (the failed or not-run ones first)."""
        if not self.by_source:
            return "no trace- or conversation-keyed rows"
        order = {FAILED: 0, NOT_RUN: 1, PASSED: 2}
        ranked_sources = sorted(self.by_source, key=lambda keyed: order[keyed.state])
        return "; ".join(keyed.words() for keyed in ranked_sources)

    def to_json(self) -> dict[str, Any]:
        share = self.single_share
        return {
            "state": self.state,
            "keyedClusters": self.keyed_clusters,
            "singleRequestClusters": self.single_request_clusters,
            "singleShare": None if share is None else round(share, 6),
            "bySource": [keyed.to_json() for keyed in self.by_source],
            "maxAloneShare": SINGLETON_SHARE,
            "minLaterRequests": MIN_N,
            "words": self.words(),
            "passed": self.passed,
        }


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
            f"{_TREATED} {self.treated.disagreements} of {self.treated.audited} audited "
            f"outcomes disagree with the logged one ({self.treated.over} logged a success), "
            f"{_CONTROL} {self.control.disagreements} of {self.control.audited} "
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


_NO_AUDIT = AuditCheck(AuditArm(0, 0, 0), AuditArm(0, 0, 0), None)


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
        return _NO_AUDIT
    audited = frame.filter(
        pl.col("exposure_arm").is_in([_TREATED, _CONTROL])
        & pl.col("audited_outcome").is_not_null()
        & pl.col("outcome").is_not_null()
    )
    if audited.height == 0:
        return _NO_AUDIT
    if "request_id" in audited.columns:
        audited = ranked(audited, workspace_id=workspace_id, epoch=epoch).sort(
            "audit_rank", "request_id"
        )
    kept = audited.unique(subset=["cluster"], keep="first", maintain_order=True)
    arms = {}
    for arm in (_TREATED, _CONTROL):
        rows = kept.filter(pl.col("exposure_arm") == arm)
        disagree = rows.filter(pl.col("outcome") != pl.col("audited_outcome"))
        arms[arm] = AuditArm(
            audited=rows.height,
            disagreements=disagree.height,
            over=int(disagree.get_column("outcome").sum() or 0),
        )
    treated, control = arms[_TREATED], arms[_CONTROL]
    p_value = None
    if treated.audited >= MIN_N and control.audited >= MIN_N:
        p_value = audit_p_value(
            treated.audited, treated.disagreements, control.audited, control.disagreements
        )
    return AuditCheck(treated, control, p_value, left_out=audited.height - kept.height)


@dataclass(frozen=True)
class InstrumentChecks:
    """The checks of one scope and epoch (the outcome audit: unaudited when not given)."""

    sample_ratio: SampleRatioCheck
    assignment: AssignmentCheck
    cluster_size: ClusterSizeCheck
    audit: AuditCheck = _NO_AUDIT

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
                f"sample ratio mismatch: {ratio.control_clusters} {_CONTROL} against "
                f"{ratio.treated_clusters} {_TREATED} clusters where the split gives "
                f"{ratio.expected_control_share:.0%} {_CONTROL} (binomial p = "
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


def _keyed_clusters(key_source: str, keyed: pl.DataFrame) -> KeyedClusters:
    """One key source's rows (``cluster``, and ``request_id``, ``turn``, ``child_span`` when
    logged: without ``request_id`` each row is a request) counted for the check."""
    later = pl.lit(False)
    marked = pl.lit(False)
    if "turn" in keyed.columns:
        later = later | (pl.col("turn") >= 2).fill_null(False)
        marked = marked | pl.col("turn").is_not_null()
    if "child_span" in keyed.columns:
        later = later | pl.col("child_span").fill_null(False)
        marked = marked | pl.col("child_span").is_not_null()
    request = (
        pl.col("request_id")
        if "request_id" in keyed.columns
        else pl.int_range(pl.len()).cast(pl.String)
    )
    requests = (
        keyed.with_columns(request.alias("__request"))
        .group_by("cluster", "__request")
        .agg(later=later.any(), marked=marked.any())
        .with_columns(alone=pl.len().over("cluster") == 1)
    )
    sizes = requests.group_by("cluster").agg(alone=pl.col("alone").first())
    later_requests = requests.filter("later")
    return KeyedClusters(
        key_source=key_source,
        clusters=sizes.height,
        single_request_clusters=int(sizes.get_column("alone").sum()),
        marked_requests=int(requests.get_column("marked").sum()),
        later_requests=later_requests.height,
        later_alone=int(later_requests.get_column("alone").sum()),
    )


def cluster_size_check(traces: pl.DataFrame, conversations: pl.DataFrame) -> ClusterSizeCheck:
    """The cluster-size check of the trace-keyed and the conversation-keyed rows (each key
    source on its own, so one cannot hide the other)."""
    return ClusterSizeCheck(
        tuple(
            _keyed_clusters(source, rows)
            for source, rows in (("trace", traces), ("conversation", conversations))
            if rows.height
        )
    )


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
    (:func:`outcome_audit`); without it the scope reads unaudited.
    """
    contrast = frame.filter(pl.col("exposure_arm").is_in([_TREATED, _CONTROL]))
    clusters = contrast.group_by("exposure_arm").agg(pl.col("cluster").n_unique().alias("n"))
    counts = dict(clusters.iter_rows())
    treated, control = int(counts.get(_TREATED, 0)), int(counts.get(_CONTROL, 0))
    share = p_value = None
    if config is not None and config.lever is not None and treated + control > 0:
        share = config.lever_holdout_share
        # Imported here: scipy.stats is slow to import (docs/benchmarks.md), and every process
        # that loads the definitions would pay for it.
        from scipy import stats

        p_value = float(stats.binomtest(control, treated + control, share).pvalue)
    ratio = SampleRatioCheck(treated, control, share, p_value)

    sources = (
        contrast.get_column("key_source")
        if "key_source" in contrast.columns
        else pl.Series([None] * contrast.height, dtype=pl.String)
    )
    tokens = contrast.get_column("cluster")
    conversation = (sources == "conversation").fill_null(False) | (
        sources.is_null() & tokens.str.contains(_CONVERSATION_TOKEN.pattern)
    )
    derivable = contrast.filter(~conversation)
    mismatched = 0
    ran = config is not None and config.workspace_id == workspace_id
    if ran and config is not None and derivable.height:
        keys = derivable.get_column("cluster").unique().to_list()
        codes = assign_many(workspace_id, keys, config)
        derived = pl.DataFrame(
            {"cluster": keys, "derived": [str(ARMS[int(c)]) for c in np.asarray(codes)]}
        )
        joined = derivable.join(derived, on="cluster", how="left")
        mismatched = int((joined.get_column("derived") != joined.get_column("exposure_arm")).sum())
    assignment = AssignmentCheck(
        checked_rows=derivable.height if ran else 0,
        mismatched_rows=mismatched,
        skipped_rows=contrast.height - derivable.height if ran else contrast.height,
        ran=ran,
    )

    size = cluster_size_check(
        contrast.filter((sources == "trace").fill_null(False)), contrast.filter(conversation)
    )
    epochs = frame.get_column("exposure_epoch").unique().to_list() if frame.height else []
    audit = (
        outcome_audit(frame, workspace_id=workspace_id, epoch=str(epochs[0]))
        if len(epochs) == 1
        else _NO_AUDIT
    )
    return InstrumentChecks(ratio, assignment, size, audit)
