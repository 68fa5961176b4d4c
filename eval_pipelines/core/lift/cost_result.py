"""What the cost bar of a claim reports (:func:`~eval_pipelines.core.lift.cost.live_cost`): the
arms' raw sums, the cost bounds, and the result with its JSON document (camelCase)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.cost_verdict import READ_VERDICTS
from eval_pipelines.core.lift.envelope import Eligibility
from eval_pipelines.core.lift.intents import DecisionIntent
from eval_pipelines.core.stats.intervals import Interval
from eval_pipelines.core.stats.mean_difference import MeanDifference

__all__ = ["CostArm", "CostBound", "CostResult"]


@dataclass(frozen=True)
class CostBound:
    """One arm's cost per task with its always-valid interval: the treated arm's, read
    against a budget, and the lever_holdout's at the report that opened the claim (the
    frozen cost bound, stored with the claim, never recomputed, never replaced by a budget).

    Attributes
    ----------
    estimate
        The arm's total cost over its clusters.
    low, high
        Its always-valid interval.
    confidence_level
        The interval's nominal coverage.
    clusters
        The arm's clusters (tasks): the n.
    currency
        The cost's currency.
    """

    estimate: float
    low: float
    high: float
    confidence_level: float
    clusters: int
    currency: str

    def to_json(self) -> dict[str, Any]:
        """camelCase, as stored with the claim (full precision: it is never recomputed)."""
        return {
            "estimate": self.estimate,
            "interval": [self.low, self.high],
            "confidenceLevel": self.confidence_level,
            "clusters": self.clusters,
            "currency": self.currency,
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any], *, field: str = "frozenBound") -> CostBound:
        """The bound :meth:`to_json` wrote."""
        try:
            low, high = document["interval"]
            return cls(
                estimate=float(document["estimate"]),
                low=float(low),
                high=float(high),
                confidence_level=float(document["confidenceLevel"]),
                clusters=int(document["clusters"]),
                currency=str(document["currency"]),
            )
        except (KeyError, TypeError, ValueError):
            raise InputError(
                field,
                document,
                "must be {estimate, interval: [low, high], confidenceLevel, clusters, currency}",
            ) from None


@dataclass(frozen=True)
class CostArm:
    """Raw sums of one arm in the claim's scope and epoch.

    Attributes
    ----------
    arm
        ``treated`` or ``lever_holdout``.
    rows
        Rows, resolved or not (every one was paid).
    clusters
        Distinct clusters (tasks).
    censored, censored_share
        Unresolved rows, and their share of ``rows`` (None without rows): shown, and counted
        in the cost.
    total_cost
        The sum of the rows' costs, None unless the cost was read (an ineligible, parked or
        undeclared claim shows no cost figure).
    priced_rows
        Rows costed from their tokens at the price table (the others logged a ``cost``).
    """

    arm: str
    rows: int
    clusters: int
    censored: int
    censored_share: float | None
    total_cost: float | None = None
    priced_rows: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "arm": self.arm,
            "rows": self.rows,
            "clusters": self.clusters,
            "censored": self.censored,
            "censoredShare": None if self.censored_share is None else round(self.censored_share, 6),
            "totalCost": self.total_cost,
            "pricedRows": self.priced_rows,
        }


@dataclass(frozen=True)
class CostResult:
    """The cost bar of one claim: scope, epoch, intent, eligibility, raw sums, and, only when
    the cost is read (:data:`~eval_pipelines.core.lift.cost_verdict.READ_VERDICTS`), its
    figures.

    Attributes
    ----------
    workspace_id, claim_type, situation_class, source, epoch
        The claim's scope and epoch (None: every value).
    intent
        The declared decision intent, or None.
    lever_changes
        The envelope elements the lever declares it changes.
    eligibility
        Whether both arms ran the same invocation and every row has a cost.
    treated, control
        Raw sums of each arm.
    currency
        The claim's one currency, None unless the cost was read.
    difference
        Treated minus lever_holdout cost per task, with its one-look bootstrap interval, its
        relative form (``treated / lever_holdout - 1``) and each arm's one-look interval;
        None unless read, or with no estimate below the minimum sample.
    sequence
        The always-valid interval of the difference (the one the verdict reads); None
        without an estimate.
    relative_sequence
        The always-valid interval of the relative difference (same construction); None
        without a relative estimate.
    treated_per_task
        The treated arm's cost per task with its always-valid interval (read against a
        budget); None without an estimate.
    frozen_bound
        The lever_holdout's cost per task when the claim opened: the bound given (stored),
        else the current one (the caller stores it on opening); None unless read.
    verdict
        :func:`~eval_pipelines.core.lift.cost_verdict.cost_verdict`'s word.
    message
        The result in plain words.
    mixed_clusters
        Clusters seen in more than one arm, left out of both (as in the quality lift).
    """

    workspace_id: str
    claim_type: str | None
    situation_class: str | None
    source: str | None
    epoch: str
    intent: DecisionIntent | None
    lever_changes: tuple[str, ...]
    eligibility: Eligibility
    treated: CostArm
    control: CostArm
    verdict: str
    message: str = ""
    currency: str | None = None
    difference: MeanDifference | None = None
    sequence: Interval | None = None
    relative_sequence: Interval | None = None
    treated_per_task: CostBound | None = None
    frozen_bound: CostBound | None = None
    mixed_clusters: int = 0
    n_resamples: int = 2000

    @property
    def read(self) -> bool:
        """Whether the cost was read (the verdict carries figures)."""
        return self.verdict in READ_VERDICTS

    def to_json(self) -> dict[str, Any]:
        """camelCase; every cost figure None unless the cost was read."""
        return {
            "workspaceId": self.workspace_id,
            "claimType": self.claim_type,
            "situationClass": self.situation_class,
            "source": self.source,
            "epoch": self.epoch,
            "intent": None if self.intent is None else self.intent.to_json(),
            "leverChanges": list(self.lever_changes),
            "eligibility": self.eligibility.to_json(),
            "treated": self.treated.to_json(),
            "control": self.control.to_json(),
            "currency": self.currency,
            "difference": _difference_json(self),
            "treatedPerTask": _bound_json(self.treated_per_task),
            "frozenBound": _bound_json(self.frozen_bound),
            "verdict": self.verdict,
            "message": self.message,
            "mixedClusters": self.mixed_clusters,
            "nResamples": self.n_resamples,
        }


def _interval_json(interval: Interval | None) -> list[float] | None:
    return None if interval is None else [interval.low, interval.high]


def _bound_json(bound: CostBound | None) -> dict[str, Any] | None:
    return None if bound is None else bound.to_json()


def _difference_json(result: CostResult) -> dict[str, Any] | None:
    difference = result.difference
    if difference is None or difference.estimate is None:
        return None
    return {
        "estimate": difference.estimate,
        "interval": _interval_json(difference.interval),
        "sequence": _interval_json(result.sequence),
        "relativeEstimate": difference.relative_estimate,
        "relativeInterval": _interval_json(difference.relative_interval),
        "relativeSequence": _interval_json(result.relative_sequence),
        "treatedPerTask": difference.mean_b,
        "controlPerTask": difference.mean_a,
        "confidenceLevel": difference.confidence_level,
        "nResamples": difference.n_resamples,
        "method": difference.method,
        "per": "task (cluster)",
    }
