"""The live cost bar: what a task costs in the treated arm against the lever holdout, read
under the claim's decision intent, only when both arms ran the same model invocation.

A task is the claim's cluster (the artifact or trace the quality lift resamples). An arm's
**cost per task** is the sum of its rows' costs, resolved or not (an unresolved request was
still paid), over its clusters, in the claim's one currency. The difference (treated minus
lever_holdout) and its relative form are read with the quality lift's engine: the two-sample
cluster bootstrap (:func:`~eval_pipelines.core.stats.mean_difference.unpaired_mean_difference`)
and its always-valid interval (:mod:`eval_pipelines.core.stats.sequential`, the clusters of
both arms as units), so a report read every day keeps its error rate. Eligibility
(:mod:`eval_pipelines.core.lift.envelope`, :mod:`eval_pipelines.core.lift.prices`) comes
first: an ineligible claim carries no cost figure at all. The verdict is
:func:`~eval_pipelines.core.lift.cost_verdict.cost_verdict`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np
import polars as pl

from eval_pipelines.core.lift.cost_columns import COST_COLUMNS
from eval_pipelines.core.lift.cost_result import CostArm, CostBound, CostResult
from eval_pipelines.core.lift.cost_verdict import READ_VERDICTS, cost_verdict
from eval_pipelines.core.lift.cost_words import cost_message
from eval_pipelines.core.lift.envelope import (
    CURRENCY_MISMATCH,
    envelope_eligibility,
    ineligible,
    parse_lever_changes,
)
from eval_pipelines.core.lift.intents import DecisionIntent
from eval_pipelines.core.lift.lift import PARKED, always_valid, arm_summary
from eval_pipelines.core.lift.prices import PriceTable, RowCosts, row_costs
from eval_pipelines.core.lift.rollup import _validated
from eval_pipelines.core.lift.scope import CONTROL_ARM, TREATED_ARM, contrast_rows
from eval_pipelines.core.stats.intervals import Interval
from eval_pipelines.core.stats.mean_difference import unpaired_mean_difference
from eval_pipelines.core.stats.policy import INSUFFICIENT

__all__ = ["CostArm", "CostBound", "CostResult", "live_cost"]


def live_cost(
    events: pl.DataFrame,
    *,
    workspace_id: str,
    epoch: str,
    claim_type: str | None = None,
    situation_class: str | None = None,
    source: str | None = None,
    intent: DecisionIntent | None,
    lever_changes: str | Iterable[str] = (),
    prices: PriceTable | None,
    quality_verdict: str,
    frozen_bound: CostBound | None = None,
    rng: int | np.random.Generator,
    n_resamples: int = 2000,
) -> CostResult:
    """The cost verdict of one claim: treated against lever_holdout in one scope and epoch.

    Parameters
    ----------
    events
        One row per claim outcome: the columns of
        :data:`~eval_pipelines.core.lift.rollup.EVENT_COLUMNS` and any of the cost and
        envelope columns (:data:`~eval_pipelines.core.lift.cost_columns.COST_COLUMNS`; a
        missing one is a value no row logs). Any arms, epochs and workspaces: only the
        treated and lever_holdout rows of the scope and epoch are read.
    workspace_id, epoch, claim_type, situation_class, source
        The claim's scope and epoch, as :func:`~eval_pipelines.core.lift.lift.live_lift`.
    intent
        The claim's decision intent, None when none was declared (``no_intent``: nothing
        is read).
    lever_changes
        The envelope elements the lever declares it changes
        (:func:`~eval_pipelines.core.lift.envelope.parse_lever_changes`).
    prices
        The workspace's price table for rows that log tokens; None when it has none.
    quality_verdict
        The claim's quality verdict: ``parked`` reads nothing; ``inferior`` is never
        ``cheaper``.
    frozen_bound
        The lever_holdout's cost per task stored when the claim opened; None before (the
        result's :attr:`CostResult.frozen_bound` is then the current one, to store).
    rng
        An int seed or a :class:`numpy.random.Generator` (required).
    n_resamples
        Bootstrap resamples per side.

    Returns
    -------
    CostResult

    Raises
    ------
    InputError
        When the scope holds no events of ``epoch``, the events are malformed, or
        ``lever_changes`` names an unknown element.

    Notes
    -----
    Eligibility, in order: every contrasted row logs every envelope element, the arms agree
    on each element but ``lever_changes``, every row has a cost (its ``cost``, or tokens the
    price table prices), the costs are in one currency, and a budget is in that currency
    (``currency_mismatch: currency`` otherwise: no exchange rate is applied). Then below 20
    clusters in either arm (or 20 rows) the verdict is ``insufficient_evidence`` with the
    raw sums only. The bootstrap resamples whole clusters; each arm's always-valid
    interval uses its own clusters as units, the difference's those of both arms.
    """
    if rng is None or isinstance(rng, bool):
        raise ValueError(f"rng={rng!r}: must be an int seed or a numpy Generator (seeded)")
    changes = parse_lever_changes(lever_changes)
    frame = _validated(events).with_columns(
        (events.get_column(name) if name in events.columns else pl.lit(None))
        .cast(dtype)
        .alias(name)
        for name, dtype in COST_COLUMNS.items()
    )
    scope = {
        "workspace_id": workspace_id,
        "claim_type": claim_type,
        "situation_class": situation_class,
        "source": source,
    }
    contrast = contrast_rows(frame, scope, epoch=epoch)
    treated_rows, control_rows = contrast.treated, contrast.control
    eligibility = envelope_eligibility(treated_rows, control_rows, lever_changes=changes)
    priced = None
    if eligibility.eligible:
        priced = row_costs(pl.concat([treated_rows, control_rows]), prices)
        eligibility = priced.eligibility
    if (
        priced is not None
        and eligibility.eligible
        and intent is not None
        and intent.budget is not None
        and intent.currency != priced.currency
    ):
        eligibility = ineligible(
            CURRENCY_MISMATCH,
            "currency",
            f"the budget is in {intent.currency} and the costs in {priced.currency}: no "
            "exchange rate is applied, so the budget is not compared",
        )
    result = CostResult(
        workspace_id=workspace_id,
        claim_type=claim_type,
        situation_class=situation_class,
        source=source,
        epoch=epoch,
        intent=intent,
        lever_changes=changes,
        eligibility=eligibility,
        treated=_arm(TREATED_ARM, treated_rows),
        control=_arm(CONTROL_ARM, control_rows),
        verdict="",
        mixed_clusters=len(contrast.mixed),
        n_resamples=int(n_resamples),
    )
    reading = intent is not None and quality_verdict != PARKED and eligibility.eligible
    if reading and priced is not None and priced.costs is not None:
        result = _read(result, priced, treated_rows, control_rows, frozen_bound, rng)
    word = cost_verdict(
        intent=intent,
        quality_verdict=quality_verdict,
        eligibility=eligibility,
        difference=result.sequence,
        treated=None
        if result.treated_per_task is None
        else Interval(
            result.treated_per_task.low,
            result.treated_per_task.high,
            result.treated_per_task.confidence_level,
        ),
    )
    if word not in READ_VERDICTS and word != INSUFFICIENT:
        result = _unread(result)
    result = dataclasses.replace(result, verdict=word)
    return dataclasses.replace(result, message=cost_message(result, quality_verdict))


def _arm(arm: str, rows: pl.DataFrame) -> CostArm:
    counts = arm_summary(arm, rows)
    return CostArm(
        arm=arm,
        rows=counts.total,
        clusters=counts.clusters,
        censored=counts.censored,
        censored_share=counts.censored_share,
    )


def _read(
    result: CostResult,
    priced: RowCosts,
    treated_rows: pl.DataFrame,
    control_rows: pl.DataFrame,
    frozen_bound: CostBound | None,
    rng: int | np.random.Generator,
) -> CostResult:
    """The figures of a claim whose cost is read: raw sums always, the rest from 20
    clusters a side."""
    costs, by_tokens = priced.costs, priced.by_tokens
    assert costs is not None and by_tokens is not None  # an eligible claim's rows all have one
    treated_costs, control_costs = costs[: treated_rows.height], costs[treated_rows.height :]
    difference = unpaired_mean_difference(
        control_costs,
        treated_costs,
        a_clusters=control_rows.get_column("cluster").to_numpy(),
        b_clusters=treated_rows.get_column("cluster").to_numpy(),
        per="cluster",
        n_resamples=result.n_resamples,
        rng=np.random.default_rng(rng),
    )
    result = dataclasses.replace(
        result,
        currency=priced.currency,
        difference=difference,
        treated=dataclasses.replace(
            result.treated,
            total_cost=difference.sum_b,
            priced_rows=int(by_tokens[: treated_rows.height].sum()),
        ),
        control=dataclasses.replace(
            result.control,
            total_cost=difference.sum_a,
            priced_rows=int(by_tokens[treated_rows.height :].sum()),
        ),
    )
    if difference.estimate is None or difference.interval is None:
        return result
    units = difference.clusters_a + difference.clusters_b
    relative = difference.relative_interval
    currency = str(priced.currency)
    current_bound = _bound(
        difference.mean_a, difference.interval_a, difference.clusters_a, currency
    )
    return dataclasses.replace(
        result,
        sequence=always_valid(difference.estimate, difference.interval, units),
        relative_sequence=None
        if relative is None or difference.relative_estimate is None
        else always_valid(difference.relative_estimate, relative, units),
        treated_per_task=_bound(
            difference.mean_b, difference.interval_b, difference.clusters_b, currency
        ),
        frozen_bound=frozen_bound if frozen_bound is not None else current_bound,
    )


def _bound(
    mean: float | None, interval: Interval | None, clusters: int, currency: str
) -> CostBound:
    assert mean is not None and interval is not None  # an estimate has both
    sequence = always_valid(mean, interval, clusters)
    return CostBound(
        mean, sequence.low, sequence.high, sequence.confidence_level, clusters, currency
    )


def _unread(result: CostResult) -> CostResult:
    """The result with every cost figure removed: an unread claim shows counts only."""
    return dataclasses.replace(
        result,
        currency=None,
        difference=None,
        sequence=None,
        relative_sequence=None,
        treated_per_task=None,
        frozen_bound=None,
        treated=dataclasses.replace(result.treated, total_cost=None),
        control=dataclasses.replace(result.control, total_cost=None),
    )
