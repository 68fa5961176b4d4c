"""Diagnostics of a holdout evaluation beyond accuracy: how far wrong codes are from their
labels in the tree, what the routing threshold trades (risk against coverage), and which
records every variant confidently contradicts (candidates for label review).

All three read the per-record outcome rows of :func:`eval_pipelines.core.holdout.scoring.
row_outcomes` (one frame per variant: ``record_key, code, confidence, route, label,
label_node`` and ``right_<L>, declined_<L>`` per level ``L``). ``target_depth`` is one level:
pass the evaluation's shallowest target depth (``min(spec.target_depth)``), the level routing
and confidence are defined at. Definitions (for users: docs/figures.md, "Holdout evaluation
(000)"):

Error severity (per variant)
    A row is *wrong* at the target depth when its label reaches that depth and
    ``right_<target>`` is false. A wrong row whose prediction does not reach the target depth
    (no code, a failed row, a code shallower than the target, or a code unknown to the tree:
    ``declined_<target>``) is a *decline*; every other wrong row is an *error*. The
    *agreement depth* of a row is the depth of the deepest common ancestor of the predicted
    code and the label node (the deepest level at which their ancestors are equal; 0 when they
    differ already at level 1 or there is no code). A wrong row's agreement depth is below the
    target depth. The *tree distance* of an error is the number of edges from the predicted
    node up to that common ancestor and down to the label node: ``(depth(code) - a) +
    (depth(label) - a)``, with the full nodes as stored (a prediction or label deeper than the
    target depth adds its extra levels). Errors are counted by agreement depth (``0 ..
    target-1``, each with its share of the errors), declines separately (also by agreement
    depth, the partial code's); the mean tree distance is over errors only and reads
    ``insufficient_evidence`` below the minimum sample; the distance counts are always shown.

Risk–coverage (per variant)
    For a threshold ``t``: a row is *covered* when it is not routed ``declined`` and its
    confidence is ``>= t``, i.e. it would be routed ``auto`` were ``autoAbove = t`` (routing
    declines a row whatever the threshold). *Coverage* is covered rows over all rows;
    *risk* is the share of covered rows whose label reaches the target depth that are wrong
    there (covered rows with a shallower label are not in its ``n``). Both are proportions
    with a Wilson 95% interval and ``n``, reading ``insufficient_evidence`` below the minimum
    sample (:mod:`eval_pipelines.core.stats.policy`). The grid is ``0.0, 0.1, ..., 1.0`` plus
    the variant's ``autoAbove`` when given.

Label review (across variants)
    A record is listed when its label reaches the target depth and *every* variant predicts a
    code that reaches the target depth, is wrong there, and has confidence ``>= min_confidence``.
    It is *agreeing* when all variants' predictions have the same ancestor at the target depth
    (independent classifiers converging on one other code is the stronger sign of a label
    error). Sorted by the lowest confidence among the variants, descending; ties agreeing
    first, then by record key. A holdout score measures agreement with past filing: these are
    the records where past filing is most likely wrong, for a person to check.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from eval_pipelines.core.stats import INSUFFICIENT, Proportion, estimate_proportion, is_sufficient
from eval_pipelines.core.tree import CodeTree

DEFAULT_THRESHOLDS: tuple[float, ...] = tuple(round(step / 10, 1) for step in range(11))
DEFAULT_MIN_CONFIDENCE = 0.8
NO_COMMON_LEVEL = "none"


def _require_columns(outcomes: pl.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in outcomes.columns]
    if missing:
        raise ValueError(
            f"outcome rows lack columns {missing}: pass row_outcomes() rows scored at that depth"
        )


def _require_depth(tree: CodeTree, target_depth: int) -> None:
    if not 1 <= target_depth <= tree.max_depth:
        raise ValueError(f"target_depth={target_depth}: must be in 1..{tree.max_depth}")


def agreement_depth(tree: CodeTree, code: str | None, label_node: str | None) -> int:
    """Depth of the deepest common ancestor of two nodes (0 when none, or either is unknown)."""
    if code is None or label_node is None:
        return 0
    code_path = tree.paths.get(code)
    label_path = tree.paths.get(label_node)
    if code_path is None or label_path is None:
        return 0
    depth = 0
    for a, b in zip(code_path, label_path, strict=False):
        if a != b:
            break
        depth += 1
    return depth


# --------------------------------------------------------------------------- error severity

ERROR_ROW_SCHEMA = {
    "record_key": pl.String,
    "label_node": pl.String,
    "code": pl.String,
    "kind": pl.String,
    "label_depth": pl.Int32,
    "code_depth": pl.Int32,
    "agreement_depth": pl.Int32,
    "distance": pl.Int32,
}


def error_rows(outcomes: pl.DataFrame, tree: CodeTree, *, target_depth: int) -> pl.DataFrame:
    """One row per record wrong at ``target_depth`` (module docstring), in input order.

    Columns ``record_key, label_node, code, kind`` (``error`` or ``declined``),
    ``label_depth, code_depth`` (null when the code is missing or unknown to the tree),
    ``agreement_depth`` and ``distance`` (tree distance; null for declines).
    """
    _require_depth(tree, target_depth)
    right, declined = f"right_{target_depth}", f"declined_{target_depth}"
    _require_columns(outcomes, ["record_key", "code", "label_node", right, declined])
    wrong = outcomes.filter(pl.col(right).not_())
    rows: dict[str, list[Any]] = {name: [] for name in ERROR_ROW_SCHEMA}
    for key, code, label_node, is_declined in zip(
        wrong.get_column("record_key").to_list(),
        wrong.get_column("code").to_list(),
        wrong.get_column("label_node").to_list(),
        wrong.get_column(declined).to_list(),
        strict=True,
    ):
        code_path = tree.paths.get(code) if code is not None else None
        is_declined = is_declined or code_path is None
        label_depth = len(tree.path(label_node))
        common = agreement_depth(tree, code, label_node)
        rows["record_key"].append(key)
        rows["label_node"].append(label_node)
        rows["code"].append(code)
        rows["kind"].append("declined" if is_declined else "error")
        rows["label_depth"].append(label_depth)
        rows["code_depth"].append(None if code_path is None else len(code_path))
        rows["agreement_depth"].append(common)
        rows["distance"].append(
            None if code_path is None or is_declined else len(code_path) + label_depth - 2 * common
        )
    return pl.DataFrame(rows, schema=ERROR_ROW_SCHEMA)


@dataclass(frozen=True)
class AgreementCount:
    """Wrong rows whose deepest common level with the label is ``depth`` (0: none).

    ``share`` is ``count`` over all errors (or all declines), with its Wilson interval.
    """

    depth: int
    name: str
    count: int
    share: Proportion

    def to_json(self) -> dict[str, Any]:
        return {
            "depth": self.depth,
            "name": self.name,
            "count": self.count,
            "share": self.share.to_json(),
        }


@dataclass(frozen=True)
class ErrorSeverity:
    """How far one variant's wrong predictions are from their labels in the tree.

    Attributes
    ----------
    target_depth
        The level rows are judged wrong at.
    scored
        Rows whose label reaches ``target_depth``.
    errors, declined
        Wrong rows with a code reaching the target depth, and wrong rows without one.
    by_agreement
        Errors by agreement depth, one entry per depth ``0 .. target_depth - 1`` (zeros kept).
    declined_by_agreement
        The same for declines (a partial code can agree above the target depth).
    distance_counts
        Errors by tree distance, ascending distance (raw counts, always shown).
    mean_distance
        Mean tree distance over errors, None below the minimum sample.
    """

    target_depth: int
    scored: int
    errors: int
    declined: int
    by_agreement: tuple[AgreementCount, ...]
    declined_by_agreement: tuple[AgreementCount, ...]
    distance_counts: tuple[tuple[int, int], ...]
    mean_distance: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "targetDepth": self.target_depth,
            "scored": self.scored,
            "errors": self.errors,
            "declined": self.declined,
            "byAgreement": [entry.to_json() for entry in self.by_agreement],
            "declinedByAgreement": [entry.to_json() for entry in self.declined_by_agreement],
            "distance": {
                "n": self.errors,
                "counts": {str(d): c for d, c in self.distance_counts},
                "mean": INSUFFICIENT
                if self.mean_distance is None
                else round(self.mean_distance, 6),
            },
        }


def _agreement_counts(
    depths: list[int], tree: CodeTree, target_depth: int
) -> tuple[AgreementCount, ...]:
    counts = Counter(depths)
    return tuple(
        AgreementCount(
            depth=depth,
            name=NO_COMMON_LEVEL if depth == 0 else tree.levels[depth - 1].name,
            count=counts.get(depth, 0),
            share=estimate_proportion(counts.get(depth, 0), len(depths)),
        )
        for depth in range(target_depth)
    )


def error_severity(outcomes: pl.DataFrame, tree: CodeTree, *, target_depth: int) -> ErrorSeverity:
    """Error severity of one variant's outcome rows at ``target_depth`` (module docstring).

    Raises
    ------
    ValueError
        When ``target_depth`` is not a level of the tree or the rows lack its columns.
    """
    rows = error_rows(outcomes, tree, target_depth=target_depth)
    errors = rows.filter(pl.col("kind") == "error")
    declines = rows.filter(pl.col("kind") == "declined")
    distances = [int(d) for d in errors.get_column("distance").to_list()]
    return ErrorSeverity(
        target_depth=target_depth,
        scored=int(outcomes.get_column(f"right_{target_depth}").is_not_null().sum()),
        errors=errors.height,
        declined=declines.height,
        by_agreement=_agreement_counts(
            errors.get_column("agreement_depth").to_list(), tree, target_depth
        ),
        declined_by_agreement=_agreement_counts(
            declines.get_column("agreement_depth").to_list(), tree, target_depth
        ),
        distance_counts=tuple(sorted(Counter(distances).items())),
        mean_distance=sum(distances) / len(distances)
        if distances and is_sufficient(len(distances))
        else None,
    )


# ---------------------------------------------------------------------------- risk-coverage


@dataclass(frozen=True)
class RiskCoveragePoint:
    """One routing threshold: the share of rows it would route ``auto`` and their error rate."""

    threshold: float
    is_auto_above: bool
    coverage: Proportion
    risk: Proportion

    def to_json(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "autoAbove": self.is_auto_above,
            "coverage": self.coverage.to_json(),
            "risk": self.risk.to_json(),
        }


@dataclass(frozen=True)
class RiskCoverage:
    """One variant's risk–coverage table, thresholds ascending.

    ``n`` is all rows (coverage's denominator), ``declined`` the rows routed ``declined``
    (never covered), ``auto_above`` the variant's threshold when given.
    """

    target_depth: int
    n: int
    declined: int
    auto_above: float | None
    points: tuple[RiskCoveragePoint, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "targetDepth": self.target_depth,
            "n": self.n,
            "declined": self.declined,
            "autoAbove": self.auto_above,
            "points": [point.to_json() for point in self.points],
        }


def _check_unit(name: str, value: float) -> float:
    if isinstance(value, bool) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name}={value!r}: must be a number in [0, 1]")
    return float(value)


def risk_coverage(
    outcomes: pl.DataFrame,
    *,
    target_depth: int,
    thresholds: Sequence[float] | None = None,
    auto_above: float | None = None,
) -> RiskCoverage:
    """Risk and coverage of one variant's outcome rows at each threshold (module docstring).

    Parameters
    ----------
    outcomes
        :func:`~eval_pipelines.core.holdout.scoring.row_outcomes` rows of one variant.
    target_depth
        The shallowest target depth (the level routing uses).
    thresholds
        Thresholds in [0, 1]; default ``0.0, 0.1, ..., 1.0``. Sorted and deduplicated.
    auto_above
        The variant's ``autoAbove``, added to the grid and flagged.

    Raises
    ------
    ValueError
        On a threshold outside [0, 1] or rows lacking the needed columns.
    """
    right = f"right_{target_depth}"
    _require_columns(outcomes, ["confidence", "route", right])
    grid = {
        _check_unit("threshold", t)
        for t in (DEFAULT_THRESHOLDS if thresholds is None else thresholds)
    }
    if auto_above is not None:
        auto_above = _check_unit("auto_above", auto_above)
        grid.add(auto_above)
    routable = outcomes.filter(pl.col("route") != "declined")
    points = []
    for threshold in sorted(grid):
        covered = routable.filter(pl.col("confidence") >= threshold)
        scored = covered.filter(pl.col(right).is_not_null())
        wrong = int(scored.get_column(right).not_().sum())
        points.append(
            RiskCoveragePoint(
                threshold=threshold,
                is_auto_above=auto_above is not None and threshold == auto_above,
                coverage=estimate_proportion(covered.height, outcomes.height),
                risk=estimate_proportion(wrong, scored.height),
            )
        )
    return RiskCoverage(
        target_depth=target_depth,
        n=outcomes.height,
        declined=outcomes.height - routable.height,
        auto_above=auto_above,
        points=tuple(points),
    )


# ----------------------------------------------------------------------------- label review


@dataclass(frozen=True)
class ReviewPrediction:
    """One variant's prediction for a listed record: code, its ancestor at the target depth,
    confidence and route."""

    variant: str
    code: str
    ancestor: str
    confidence: float
    route: str

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "code": self.code,
            "ancestor": self.ancestor,
            "confidence": self.confidence,
            "route": self.route,
        }


@dataclass(frozen=True)
class ReviewRecord:
    """A record every variant confidently gets wrong: a likely label error."""

    record_key: str
    label: str
    label_node: str
    label_ancestor: str
    min_confidence: float
    agreeing: bool
    predictions: tuple[ReviewPrediction, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "recordKey": self.record_key,
            "label": self.label,
            "labelNode": self.label_node,
            "labelAncestor": self.label_ancestor,
            "minConfidence": self.min_confidence,
            "agreeing": self.agreeing,
            "predictions": [p.to_json() for p in self.predictions],
        }


@dataclass(frozen=True)
class LabelReview:
    """The label-review list.

    ``considered`` counts the records whose label reaches the target depth (the records that
    could be listed); ``variants`` are in the order given.
    """

    target_depth: int
    min_confidence: float
    variants: tuple[str, ...]
    considered: int
    records: tuple[ReviewRecord, ...]

    @property
    def agreeing(self) -> int:
        return sum(1 for record in self.records if record.agreeing)

    def to_json(self) -> dict[str, Any]:
        return {
            "targetDepth": self.target_depth,
            "minConfidence": self.min_confidence,
            "variants": list(self.variants),
            "considered": self.considered,
            "listed": len(self.records),
            "agreeing": self.agreeing,
            "records": [record.to_json() for record in self.records],
        }


def _rows_by_key(name: str, outcomes: pl.DataFrame, right: str) -> dict[str, dict[str, Any]]:
    _require_columns(
        outcomes, ["record_key", "code", "confidence", "route", "label", "label_node", right]
    )
    rows = outcomes.select(
        "record_key", "code", "confidence", "route", "label", "label_node", right
    )
    by_key = {row["record_key"]: row for row in rows.iter_rows(named=True)}
    if len(by_key) != rows.height:
        raise ValueError(f"variant {name!r}: record keys repeat in its outcome rows")
    return by_key


def label_review(
    outcomes_by_variant: Mapping[str, pl.DataFrame],
    tree: CodeTree,
    *,
    target_depth: int,
    min_confidence: float = DEFAULT_MIN_CONFIDENCE,
) -> LabelReview:
    """Records every variant gets wrong at ``target_depth`` with confidence ``>=
    min_confidence`` (module docstring).

    Raises
    ------
    ValueError
        With no variants, when the variants' rows cover different records, or on a bad depth
        or confidence.
    """
    if not outcomes_by_variant:
        raise ValueError("label_review needs at least one variant's outcome rows")
    _require_depth(tree, target_depth)
    min_confidence = _check_unit("min_confidence", min_confidence)
    right = f"right_{target_depth}"
    names = tuple(outcomes_by_variant)
    tables = {name: _rows_by_key(name, outcomes_by_variant[name], right) for name in names}
    keys = set(tables[names[0]])
    for name in names[1:]:
        if set(tables[name]) != keys:
            raise ValueError(
                f"variants {names[0]!r} and {name!r} hold different records: "
                "variants of one evaluation share its sample"
            )
    considered = 0
    listed = []
    for key in keys:
        first = tables[names[0]][key]
        label_ancestor = tree.ancestor_at(first["label_node"], target_depth)
        if label_ancestor is None:
            continue
        considered += 1
        predictions = []
        for name in names:
            row = tables[name][key]
            ancestor = tree.ancestor_at(row["code"], target_depth)
            if ancestor is None or row[right] or row["confidence"] is None:
                break
            confidence = float(row["confidence"])
            if confidence < min_confidence:
                break
            predictions.append(
                ReviewPrediction(name, row["code"], ancestor, confidence, row["route"])
            )
        else:
            listed.append(
                ReviewRecord(
                    record_key=key,
                    label=first["label"],
                    label_node=first["label_node"],
                    label_ancestor=label_ancestor,
                    min_confidence=min(p.confidence for p in predictions),
                    agreeing=len({p.ancestor for p in predictions}) == 1,
                    predictions=tuple(predictions),
                )
            )
    listed.sort(key=lambda r: (-r.min_confidence, not r.agreeing, r.record_key))
    return LabelReview(
        target_depth=target_depth,
        min_confidence=min_confidence,
        variants=names,
        considered=considered,
        records=tuple(listed),
    )


REVIEW_LISTED = 20


def evaluation_diagnostics(
    outcomes_by_variant: Mapping[str, pl.DataFrame],
    tree: CodeTree,
    *,
    target_depth: int,
    auto_above: Mapping[str, float],
    review_listed: int = REVIEW_LISTED,
) -> dict[str, Any]:
    """The report's diagnostics: per variant the error severity and the risk-coverage table;
    over all variants the label-review list (its first ``review_listed`` records)."""
    review = label_review(outcomes_by_variant, tree, target_depth=target_depth).to_json()
    review["shown"] = min(review_listed, len(review["records"]))
    review["records"] = review["records"][:review_listed]
    return {
        "targetDepth": target_depth,
        "variants": {
            name: {
                "errorSeverity": error_severity(
                    outcomes, tree, target_depth=target_depth
                ).to_json(),
                "riskCoverage": risk_coverage(
                    outcomes, target_depth=target_depth, auto_above=auto_above[name]
                ).to_json(),
            }
            for name, outcomes in outcomes_by_variant.items()
        },
        "labelReview": review,
    }
