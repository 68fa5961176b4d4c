"""The cluster-size check of a live experiment's logs, before its lift is read.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from eval_pipelines.core.lift.check_states import FAILED, NOT_RUN, PASSED
from eval_pipelines.core.stats.policy import MIN_N

__all__ = ["SINGLETON_SHARE", "ClusterSizeCheck", "KeyedClusters", "cluster_size_check"]

#: Marked later requests this share of which sit alone in their cluster fail the cluster-size
#: check; without enough of them, clusters this share of which hold one request leave it
#: unable to run.
SINGLETON_SHARE = 0.95


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
