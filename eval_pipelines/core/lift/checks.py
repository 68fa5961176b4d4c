"""The checks run on a live experiment's logs before its lift is read (issue 19, item 7).

The A/A check of :mod:`eval_pipelines.core.lift.lift` splits the control arm only: it sees an
interval too narrow for the control arm's data, but not logs whose arms or clusters are not
the ones the assignment used. Three checks look at exactly that, as trusted experimentation
platforms do before reading a result [1]_ [2]_; any one failing parks the instrument:

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
    Where the logs say the key source is ``trace`` (the optional ``key_source`` column,
    :attr:`~eval_pipelines.core.lift.assignment.Assignment.key_source`), trace clusters that
    are nearly all single requests (at least :data:`SINGLETON_SHARE` of at least
    ``MIN_N`` clusters) fail: the logged cluster is most likely the request, and the
    cluster bootstrap would treat correlated requests of one trace as independent.

References
----------
.. [1] R. Kohavi, D. Tang and Y. Xu, "Trustworthy Online Controlled Experiments", Cambridge
       University Press (2020), chapter 21 (sample ratio mismatch and other guardrails).
.. [2] A. Fabijan et al., "Diagnosing Sample Ratio Mismatch in Online Controlled
       Experiments", KDD 2019 (p < 0.0005 used at Microsoft; 0.001 here).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from eval_pipelines.core.lift.assignment import ARMS, LiftConfig, assign_many
from eval_pipelines.core.stats.policy import MIN_N

__all__ = [
    "SINGLETON_SHARE",
    "SRM_ALPHA",
    "AssignmentCheck",
    "ClusterSizeCheck",
    "InstrumentChecks",
    "SampleRatioCheck",
    "instrument_checks",
]

#: A sample-ratio p-value below this fails the check.
SRM_ALPHA = 0.001
#: Trace-keyed clusters this share of which are single requests fail the cluster-size check.
SINGLETON_SHARE = 0.95

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
class ClusterSizeCheck:
    """Trace-keyed clusters and how many of them hold one request (None: no key source)."""

    trace_clusters: int
    single_request_clusters: int
    ran: bool

    @property
    def single_share(self) -> float | None:
        return self.single_request_clusters / self.trace_clusters if self.trace_clusters else None

    @property
    def passed(self) -> bool:
        share = self.single_share
        return not (self.trace_clusters >= MIN_N and share is not None and share >= SINGLETON_SHARE)

    def to_json(self) -> dict[str, Any]:
        share = self.single_share
        return {
            "traceClusters": self.trace_clusters,
            "singleRequestClusters": self.single_request_clusters,
            "singleShare": None if share is None else round(share, 6),
            "maxSingleShare": SINGLETON_SHARE,
            "ran": self.ran,
            "passed": self.passed,
        }


@dataclass(frozen=True)
class InstrumentChecks:
    """The three checks of one scope and epoch."""

    sample_ratio: SampleRatioCheck
    assignment: AssignmentCheck
    cluster_size: ClusterSizeCheck

    @property
    def passed(self) -> bool:
        return self.sample_ratio.passed and self.assignment.passed and self.cluster_size.passed

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
        size = self.cluster_size
        if not size.passed:
            out.append(
                f"cluster size: {size.single_request_clusters} of {size.trace_clusters} "
                "trace-keyed clusters hold a single request (the logged cluster looks like the "
                "request, not the trace)"
            )
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "sampleRatio": self.sample_ratio.to_json(),
            "assignment": self.assignment.to_json(),
            "clusterSize": self.cluster_size.to_json(),
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
        Rows with ``exposure_arm`` and ``cluster``, and optionally ``key_source``.
    workspace_id
        The workspace the rows belong to.
    config
        The split the rows were assigned under (the workspace's settings of this epoch), or
        None when it is not known: the ratio and assignment checks then do not run (and
        :attr:`InstrumentChecks.complete` is False).
    """
    contrast = frame.filter(pl.col("exposure_arm").is_in([_TREATED, _CONTROL]))
    clusters = contrast.group_by("exposure_arm").agg(pl.col("cluster").n_unique().alias("n"))
    counts = dict(clusters.iter_rows())
    treated, control = int(counts.get(_TREATED, 0)), int(counts.get(_CONTROL, 0))
    share = p_value = None
    if config is not None and config.lever is not None and treated + control > 0:
        share = config.lever_holdout_share
        # Imported here: scipy.stats costs every process that loads the definitions 0.2-0.4 s.
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

    traced = contrast.filter((sources == "trace").fill_null(False))
    sizes = traced.group_by("cluster").len()
    size = ClusterSizeCheck(
        trace_clusters=sizes.height,
        single_request_clusters=int((sizes.get_column("len") == 1).sum()) if sizes.height else 0,
        ran="key_source" in contrast.columns,
    )
    return InstrumentChecks(ratio, assignment, size)
