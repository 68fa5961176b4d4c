"""The holdout report's cost figures: their JSON (from
:mod:`~eval_pipelines.core.holdout.cost`'s results) and the text the markdown, the compare
output and the lift ledger show (from that JSON, so a stored report renders as it was made).

A figure without a cost reads its reason (``no model calls``, ``not recorded``, ``no price``),
never a number; below the minimum sample it reads ``insufficient_evidence``."""

from __future__ import annotations

from typing import Any

from eval_pipelines.core.holdout.cost import (
    BASIS,
    NO_MODEL_CALLS,
    NO_PRICE,
    NOT_RECORDED,
    CostComparison,
    VariantCost,
)
from eval_pipelines.core.stats import INSUFFICIENT
from eval_pipelines.core.stats.intervals import Interval

# What a variant without a cost per record reads in a table cell.
_SHORT = {
    NO_MODEL_CALLS: "no model calls",
    NO_PRICE: "no price",
    NOT_RECORDED: "not recorded",
}


def _significant(value: float) -> float:
    """Six significant digits: a cost per record can be 1e-7 of a currency unit, which a
    fixed number of decimals would round to 0."""
    return float(f"{value:.6g}")


def _figure(estimate: float | None, interval: Interval | None) -> dict[str, Any]:
    if estimate is None or interval is None:
        return {"value": INSUFFICIENT, "interval": None}
    return {
        "value": _significant(estimate),
        "interval": [_significant(interval.low), _significant(interval.high)],
    }


def variant_cost_to_json(cost: VariantCost) -> dict[str, Any]:
    """``{status, reason, currency, model, perRecord, basis}``; ``perRecord`` (``value``,
    ``interval``, ``n``, ``clusters``, ``total``) only when priced."""
    out: dict[str, Any] = {
        "status": cost.status,
        "reason": cost.reason,
        "currency": cost.currency,
        "model": cost.model,
        "perRecord": None,
        "basis": BASIS,
    }
    ratio = cost.per_record
    if ratio is not None:
        out["perRecord"] = {
            **_figure(ratio.estimate, ratio.interval),
            "n": ratio.n,
            "clusters": ratio.n_clusters,
            "total": _significant(ratio.numerator),
        }
    return out


def cost_comparison_to_json(comparison: CostComparison) -> dict[str, Any]:
    """``{status, reason, currency, ...}``; when compared, also ``n``, ``clusters``, the two
    means per record, ``difference`` (candidate minus baseline per record) and ``relative``
    (candidate / baseline - 1), each ``{value, interval}``."""
    out: dict[str, Any] = {
        "status": comparison.status,
        "reason": comparison.reason,
        "currency": comparison.currency,
    }
    paired = comparison.difference
    if paired is None:
        return out
    relative = _figure(paired.relative, paired.relative_interval)
    if paired.sufficient and paired.relative is None:
        relative = {"value": None, "interval": None, "reason": "the baseline costs nothing"}
    elif paired.relative is not None and paired.relative_interval is None:
        relative = {
            "value": _significant(paired.relative),
            "interval": None,
            "reason": "a resample's baseline costs nothing: the ratio has no interval",
        }
    return {
        **out,
        "n": paired.n,
        "clusters": paired.n_clusters,
        "baselinePerRecord": None
        if paired.baseline_mean is None
        else _significant(paired.baseline_mean),
        "candidatePerRecord": None
        if paired.candidate_mean is None
        else _significant(paired.candidate_mean),
        "difference": _figure(paired.estimate, paired.interval),
        "relative": relative,
        "resamples": paired.n_resamples,
        "intervalMethod": paired.method,
        "basis": BASIS,
    }


def _money(value: float) -> str:
    return f"{value:.3g}"


def _percent(value: float) -> str:
    """``-41%``, ``+4.5%`` (one decimal below 10%), ``0%``."""
    shown = f"{value * 100:+.0f}" if abs(value) >= 0.1 else f"{value * 100:+.1f}"
    return "0%" if float(shown) == 0 else f"{shown}%"


def _currency(cost: dict[str, Any]) -> str:
    return cost.get("currency") or "(currency not declared)"


def shows_cost_per_record(report: dict[str, Any]) -> bool:
    """Whether the report shows a cost per record: once some variant calls a model (an
    evaluation of knn-vote variants has no cost)."""
    return any(
        variant.get("cost") and variant["cost"]["status"] != NO_MODEL_CALLS
        for variant in report["variants"]
    )


def cost_per_record_text(cost: dict[str, Any] | None) -> str:
    """A variant's cost per record: ``0.000118 USD [0.000109, 0.000127] n=200``, or why there
    is none (``no model calls``, ``not recorded (...)``, ``no price (...)``)."""
    if cost is None:
        return "not in this report (made before cost per record)"
    figure = cost.get("perRecord")
    if figure is None:
        short = _SHORT.get(cost["status"], cost["status"])
        return short if cost["status"] == NO_MODEL_CALLS else f"{short} ({cost['reason']})"
    if figure["value"] == INSUFFICIENT:
        return f"{INSUFFICIENT} (n={figure['n']}, clusters={figure['clusters']})"
    low, high = figure["interval"]
    return (
        f"{_money(figure['value'])} {_currency(cost)} [{_money(low)}, {_money(high)}] "
        f"n={figure['n']}"
    )


def relative_cost_text(cost: dict[str, Any] | None) -> str:
    """A pair's difference in cost per record, relative then absolute:
    ``-41% [-44%, -38%] (-4.8e-05 USD per record)``, or why there is none."""
    if cost is None:
        return "—"
    if cost.get("difference") is None:
        return f"not compared: {cost['reason']}"
    difference, relative = cost["difference"], cost["relative"]
    if difference["value"] == INSUFFICIENT:
        return f"{INSUFFICIENT} (n={cost['n']}, clusters={cost['clusters']})"
    low, high = difference["interval"]
    absolute = f"{difference['value']:+.3g} {_currency(cost)} per record [{low:+.3g}, {high:+.3g}]"
    if relative["value"] is None:
        return f"{absolute}; no relative change ({relative['reason']})"
    if relative["interval"] is None:
        return f"{_percent(relative['value'])} (no interval: {relative['reason']}), {absolute}"
    r_low, r_high = relative["interval"]
    return f"{_percent(relative['value'])} [{_percent(r_low)}, {_percent(r_high)}], {absolute}"
