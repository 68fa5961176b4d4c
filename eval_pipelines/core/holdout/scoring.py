"""Scoring predictions against labels, per tree level.

Definitions (also in docs/figures.md, "Holdout evaluation (000)"):

- A prediction is right at level L when its ancestor at L equals the label's ancestor at L.
- Level L scores the records whose label reaches L (its ``n``); a shallower label is not scored
  there. A decline, a failed row, or a code shallower than L is not right at L and counts as
  declined at L.
- Candidate ceiling at L: the label's ancestor at L is the ancestor at L of some evidence
  record's label (the vote could have reached it).
- Accuracy carries its Wilson 95% interval and n; below the minimum sample of
  :mod:`eval_pipelines.core.stats.policy` it reads ``insufficient_evidence``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from eval_pipelines.core.holdout.classify import ROUTES, candidate_votes
from eval_pipelines.core.stats import Proportion, estimate_proportion
from eval_pipelines.core.tree import CodeTree


def row_outcomes(predictions: pl.DataFrame, labels: pl.DataFrame, tree: CodeTree) -> pl.DataFrame:
    """Per-record outcome columns ``right_<L>``, ``declined_<L>``, ``ceiling_<L>`` (null where
    the label does not reach L).

    ``predictions`` needs ``record_key, code, candidates`` (JSON list of ``{code, score}``);
    ``labels`` needs ``record_key, label, label_node``.
    """
    joined = predictions.join(labels, on="record_key", how="left", validate="m:1")
    paths = tree.paths
    # Ancestors looked up once per row (and per evidence label), then read level by level
    # (measured faster than joining an ancestors frame in polars: most codes occur once).
    label_paths = [paths.get(node, ()) for node in joined.get_column("label_node").to_list()]
    code_paths = [paths.get(code, ()) for code in joined.get_column("code").to_list()]
    candidate_paths = [
        [paths.get(c["code"], ()) for c in json.loads(raw)] if raw else []
        for raw in joined.get_column("candidates").to_list()
    ]
    columns: dict[str, list[bool | None]] = {}
    for depth in range(1, tree.max_depth + 1):
        right: list[bool | None] = []
        declined: list[bool | None] = []
        ceiling: list[bool | None] = []
        at = depth - 1
        for label_path, code_path, candidates in zip(
            label_paths, code_paths, candidate_paths, strict=True
        ):
            if len(label_path) < depth:
                right.append(None)
                declined.append(None)
                ceiling.append(None)
                continue
            truth = label_path[at]
            predicted = code_path[at] if len(code_path) >= depth else None
            right.append(predicted == truth)
            declined.append(predicted is None)
            ceiling.append(any(len(c) >= depth and c[at] == truth for c in candidates))
        columns[f"right_{depth}"] = right
        columns[f"declined_{depth}"] = declined
        columns[f"ceiling_{depth}"] = ceiling
    return joined.with_columns(
        [pl.Series(name, values, dtype=pl.Boolean) for name, values in columns.items()]
    )


@dataclass(frozen=True)
class LevelScore:
    """One tree level of one variant.

    Attributes
    ----------
    depth, name
        The level (1 = top) and its readable name.
    accuracy
        Right at this level over the records whose label reaches it.
    declined
        Records scored here whose prediction does not reach this level.
    candidate_ceiling
        Records whose label's ancestor here was among the evidence labels the vote used.
    """

    depth: int
    name: str
    accuracy: Proportion
    declined: int
    candidate_ceiling: Proportion


@dataclass(frozen=True)
class RouteScore:
    """Coverage of one routing flag and the accuracy, per target level, of the rows it holds."""

    route: str
    coverage: Proportion
    accuracy: dict[int, Proportion]


@dataclass(frozen=True)
class VariantScore:
    """Everything scored for one variant."""

    n: int
    levels: tuple[LevelScore, ...]
    target_depth: tuple[int, ...]
    decline_rate: Proportion
    routing: tuple[RouteScore, ...]

    def level(self, depth: int) -> LevelScore:
        return next(level for level in self.levels if level.depth == depth)


def _count(frame: pl.DataFrame, column: str) -> int:
    return int(frame.get_column(column).sum())


def score_variant(
    outcomes: pl.DataFrame, tree: CodeTree, target_depth: tuple[int, ...]
) -> VariantScore:
    """Score one variant's outcome rows (from :func:`row_outcomes`)."""
    total = outcomes.height
    levels = []
    for level in tree.levels:
        d = level.depth
        scored = outcomes.filter(pl.col(f"right_{d}").is_not_null())
        levels.append(
            LevelScore(
                depth=d,
                name=level.name,
                accuracy=estimate_proportion(_count(scored, f"right_{d}"), scored.height),
                declined=_count(scored, f"declined_{d}"),
                candidate_ceiling=estimate_proportion(
                    _count(scored, f"ceiling_{d}"), scored.height
                ),
            )
        )
    routes = []
    for route in ROUTES:
        subset = outcomes.filter(pl.col("route") == route)
        accuracy = {}
        for d in target_depth:
            scored = subset.filter(pl.col(f"right_{d}").is_not_null())
            accuracy[d] = estimate_proportion(_count(scored, f"right_{d}"), scored.height)
        routes.append(
            RouteScore(
                route=route, coverage=estimate_proportion(subset.height, total), accuracy=accuracy
            )
        )
    declined_rows = int((outcomes.get_column("route") == "declined").sum())
    return VariantScore(
        n=total,
        levels=tuple(levels),
        target_depth=tuple(target_depth),
        decline_rate=estimate_proportion(declined_rows, total),
        routing=tuple(routes),
    )


@dataclass(frozen=True)
class CandidateSupply:
    """Evidence records requested and supplied per sampled record, the rows retrieval left
    short, and (separately) how many of the supplied records voted.

    ``effective_*`` count what retrieval returned (at most the variant's ``candidates``): a
    row is short only when retrieval found fewer records than requested, never because a
    strategy (``nearest``: one vote) or a memo rule (``exclude``) let fewer of them vote.
    ``votes_*`` are None when a row's candidates carry no ``votes`` (plug-in classifiers,
    predictions stored before votes were counted).
    """

    requested: int
    effective_mean: float
    effective_min: int
    rows_short: int
    rows_short_keys: tuple[str, ...]
    votes_mean: float | None = None
    votes_min: int | None = None


def row_votes(candidates_json: str | None) -> int | None:
    """Evidence records that voted on one row, from its stored candidates JSON."""
    return candidate_votes(json.loads(candidates_json) if candidates_json else [])


def candidate_supply(predictions: pl.DataFrame) -> CandidateSupply:
    """Requested vs effective candidates, how many rows fell short (first 20 keys kept) and
    the votes per row (from the ``votes`` of each row's candidates)."""
    stats = predictions.select(
        pl.col("requested_candidates").max().fill_null(0).alias("requested"),
        pl.col("effective_candidates").mean().fill_null(0.0).alias("mean"),
        pl.col("effective_candidates").min().fill_null(0).alias("min"),
    ).row(0, named=True)
    short = predictions.filter(pl.col("effective_candidates") < pl.col("requested_candidates"))
    votes = [row_votes(raw) for raw in predictions.get_column("candidates").to_list()]
    known = [v for v in votes if v is not None]
    counted = bool(known) and len(known) == len(votes)
    return CandidateSupply(
        requested=int(stats["requested"]),
        effective_mean=float(stats["mean"]),
        effective_min=int(stats["min"]),
        rows_short=short.height,
        rows_short_keys=tuple(short.get_column("record_key").head(20).to_list()),
        votes_mean=sum(known) / len(known) if counted else None,
        votes_min=min(known) if counted else None,
    )


def memo_rule_rows(predictions: pl.DataFrame, entry_ids: Sequence[str] = ()) -> dict[str, int]:
    """Rows on which each memo entry fired (its ``when`` matched), from the rows'
    ``memo_applied`` JSON lists; every id in ``entry_ids`` is listed, 0 when it never fired.
    Sorted by entry id."""
    counts = dict.fromkeys(entry_ids, 0)
    for raw in predictions.get_column("memo_applied").to_list():
        for entry_id in set(json.loads(raw) if raw else []):
            counts[entry_id] = counts.get(entry_id, 0) + 1
    return dict(sorted(counts.items()))
