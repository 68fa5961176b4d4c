"""Scoring predictions against labels, per tree level.

Definitions (also in the README):

- A prediction is right at level L when its ancestor at L equals the label's ancestor at L.
- Level L scores the records whose label reaches L (its ``n``); a shallower label is not scored
  there. A decline, a failed row, or a code shallower than L is not right at L and counts as
  declined at L.
- Candidate ceiling at L: the label's ancestor at L is the ancestor at L of some evidence
  record's label (the vote could have reached it).
- Accuracy carries its Wilson 95% interval and n; with fewer than ``MIN_SCORED`` scored
  records it reads ``insufficient_evidence``.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from eval_pipelines.core.classify import ROUTES
from eval_pipelines.core.stats import wilson_interval
from eval_pipelines.core.tree import CodeTree

MIN_SCORED = 10
INSUFFICIENT = "insufficient_evidence"


def level_key(depth: int) -> str:
    return str(depth)


def row_outcomes(predictions: pl.DataFrame, labels: pl.DataFrame, tree: CodeTree) -> pl.DataFrame:
    """Per-record outcome columns ``right_<L>``, ``declined_<L>``, ``ceiling_<L>`` (null where
    the label does not reach L).

    ``predictions`` needs ``record_key, code, candidates`` (JSON list of ``{code, score}``);
    ``labels`` needs ``record_key, label, label_node``.
    """
    joined = predictions.join(labels, on="record_key", how="left", validate="m:1")
    codes = joined.get_column("code").to_list()
    label_nodes = joined.get_column("label_node").to_list()
    candidate_lists = [
        [c["code"] for c in json.loads(raw)] if raw else []
        for raw in joined.get_column("candidates").to_list()
    ]
    columns: dict[str, list[bool | None]] = {}
    for depth in range(1, tree.max_depth + 1):
        right: list[bool | None] = []
        declined: list[bool | None] = []
        ceiling: list[bool | None] = []
        for code, label_node, candidate_codes in zip(
            codes, label_nodes, candidate_lists, strict=True
        ):
            truth = tree.ancestor_at(label_node, depth)
            if truth is None:
                right.append(None)
                declined.append(None)
                ceiling.append(None)
                continue
            predicted = tree.ancestor_at(code, depth)
            right.append(predicted == truth)
            declined.append(predicted is None)
            ceiling.append(any(tree.ancestor_at(c, depth) == truth for c in candidate_codes))
        columns[f"right_{depth}"] = right
        columns[f"declined_{depth}"] = declined
        columns[f"ceiling_{depth}"] = ceiling
    return joined.with_columns(
        [pl.Series(name, values, dtype=pl.Boolean) for name, values in columns.items()]
    )


def proportion(k: int, n: int) -> dict[str, Any]:
    """A proportion with its Wilson 95% interval and n, or ``insufficient_evidence``."""
    if n < MIN_SCORED:
        return {"k": k, "n": n, "value": INSUFFICIENT, "interval": None}
    interval = wilson_interval(k, n)
    return {
        "k": k,
        "n": n,
        "value": round(k / n, 6),
        "interval": [round(interval.low, 6), round(interval.high, 6)],
    }


def score_variant(outcomes: pl.DataFrame, tree: CodeTree, target_depth: tuple[int, ...]) -> dict:
    """Score one variant's outcome rows (from :func:`row_outcomes`)."""
    total = outcomes.height
    levels: dict[str, Any] = {}
    for level in tree.levels:
        d = level.depth
        scored = outcomes.filter(pl.col(f"right_{d}").is_not_null())
        n = scored.height
        right = int(scored.get_column(f"right_{d}").sum())
        declined = int(scored.get_column(f"declined_{d}").sum())
        ceiling = int(scored.get_column(f"ceiling_{d}").sum())
        levels[level_key(d)] = {
            "name": level.name,
            "accuracy": proportion(right, n),
            "declined": declined,
            "candidateCeiling": proportion(ceiling, n),
        }
    routes: dict[str, Any] = {}
    for route in ROUTES:
        subset = outcomes.filter(pl.col("route") == route)
        accuracy = {}
        for d in target_depth:
            scored = subset.filter(pl.col(f"right_{d}").is_not_null())
            accuracy[level_key(d)] = proportion(
                int(scored.get_column(f"right_{d}").sum()), scored.height
            )
        routes[route] = {
            "coverage": proportion(subset.height, total),
            "accuracy": accuracy,
        }
    declined_rows = int((outcomes.get_column("route") == "declined").sum())
    return {
        "n": total,
        "levels": levels,
        "targetDepth": {level_key(d): levels[level_key(d)]["accuracy"] for d in target_depth},
        "declineRate": proportion(declined_rows, total),
        "routing": routes,
    }


def leave_out_summary(predictions: pl.DataFrame) -> dict[str, Any]:
    """Requested vs effective candidates, and how many rows fell short."""
    stats = predictions.select(
        pl.col("requested_candidates").max().fill_null(0).alias("requested"),
        pl.col("effective_candidates").mean().fill_null(0.0).alias("mean"),
        pl.col("effective_candidates").min().fill_null(0).alias("min"),
    ).row(0, named=True)
    short = predictions.filter(pl.col("effective_candidates") < pl.col("requested_candidates"))
    return {
        "requestedCandidates": int(stats["requested"]),
        "effectiveCandidatesMean": round(float(stats["mean"]), 3),
        "effectiveCandidatesMin": int(stats["min"]),
        "rowsShort": short.height,
        "rowsShortKeys": short.get_column("record_key").head(20).to_list(),
    }
