"""A predict evaluation: hide the test rows from one fitted naive Bayes model, predict each test
row, and record what the model and the no-evidence baseline said about its truth."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
from scipy import sparse

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.queries.deadline import Deadline, PacedChunks
from eval_pipelines.core.queries.features import (
    FeatureMatrices,
    FieldMode,
    build_matrices,
    feature_frame,
    field_mode,
    vocabulary_of,
)
from eval_pipelines.core.queries.metrics import PredictOutcomes
from eval_pipelines.core.queries.naive_bayes import (
    ClassCounts,
    NaiveBayes,
    class_counts,
    fit_temperature,
    softmax,
)
from eval_pipelines.core.queries.plan import Plan
from eval_pipelines.core.queries.query import Query
from eval_pipelines.core.queries.views import TableView

CALIBRATION_ROWS = 2_000  # training rows the temperature is fitted on (seeded subsample)
CALIBRATION_MIN_ROWS = 30
CALIBRATION_CHUNK_ROWS = 256  # training rows scored between two deadline checks, at most
CELLS_PER_CHUNK = 4_000_000  # probabilities held at once (rows x classes)
PREPARE_CHUNK_ROWS = 16_384  # rows whose features are built between two deadline checks, at most


@dataclass(frozen=True)
class PredictData:
    """What does not depend on the test rows: classes, features, the pool's counts. A fold
    sweep prepares it once."""

    classes: list[Any]
    modes: list[FieldMode]
    vocabulary: pl.DataFrame
    scope_targets: sparse.csr_matrix
    scope_features: FeatureMatrices
    pool_counts: ClassCounts


@dataclass(frozen=True)
class PreparationCut:
    """The deadline passed while the evidence was being built: ``done`` of ``total`` rows had
    their ``step`` built (``maxTime`` bounds the preparation too, spec 003)."""

    step: str
    done: int
    total: int


@dataclass
class PredictRun:
    """Per-row outcomes of the rows scored so far, and what the message must say."""

    columns: dict[str, list[np.ndarray]] = field(default_factory=dict)
    cases: list[dict[str, Any]] = field(default_factory=list)
    scored: int = 0
    skipped: int = 0
    unseen: int = 0
    truncated: bool = False
    # (rows scored, rows chosen) of the temperature fit when the deadline passed during it.
    calibration_cut: tuple[int, int] | None = None
    preparation_cut: PreparationCut | None = None
    tau: float | None = None
    notes: list[str] = field(default_factory=list)
    base_value: Any = None

    def outcomes(self) -> PredictOutcomes:
        names = (
            "truth_p truth_rank top_p accurate sum_sq_p base_truth_p base_truth_rank "
            "base_accurate base_sum_sq_p"
        ).split()
        empty = {"truth_rank": np.int64, "base_truth_rank": np.int64}
        return PredictOutcomes(
            **{
                name: np.concatenate(self.columns[name])
                if self.columns.get(name)
                else np.empty(0, dtype=empty.get(name, np.float64))
                for name in names
            }
        )


def check_target(query: Query, scope: TableView) -> str:
    field_name = "evaluate.predict"
    kind = scope.kind(query.target, field=field_name)
    if query.feature_target and kind != "string_list":
        raise InputError(
            field_name,
            query.document["evaluate"]["predict"],
            f"column {query.target!r} is single-valued: predict it directly "
            f"(predict: {query.target!r}); .$feature is for set columns",
        )
    if not query.feature_target and kind == "string_list":
        raise InputError(
            field_name,
            query.target,
            f"column {query.target!r} holds sets: predict {query.target + '.$feature'!r}",
        )
    if kind == "float":
        raise InputError(
            field_name, query.target, f"column {query.target!r} is numeric: use estimate"
        )
    return kind


def binding_values(query: Query, plan: Plan) -> tuple[list[pl.Series], list[pl.Series]]:
    """Each binding's values on the scope (the training side, read from the where key) and
    on the test rows (read from its ``$get`` source, or the literal)."""
    train, test = [], []
    for binding in query.bindings:
        at = f"evaluate.where.{binding.key}"
        train_values = plan.scope.column(binding.key, field=at)
        train.append(train_values)
        if binding.source is None:
            literal = pl.Series(binding.key, [binding.literal] * plan.test_samples)
            test.append(literal.cast(train_values.dtype, strict=False))
            continue
        values = plan.test_view.column(binding.source, field=f"{at}.$get")
        if values.dtype != train_values.dtype:
            raise InputError(
                f"{at}.$get",
                binding.source,
                f"is {values.dtype} but {binding.key!r} is {train_values.dtype}",
            )
        test.append(values.gather(plan.test_positions))
    return train, test


def _class_codes(values: pl.Series, index: dict[Any, int], *, members: bool) -> list[list[int]]:
    if members:
        return [[index[m] for m in (row or []) if m is not None] for row in values.to_list()]
    return [[] if v is None else [index[v]] for v in values.to_list()]


def _target_matrix(codes: list[list[int]], n_classes: int) -> sparse.csr_matrix:
    rows = np.repeat(np.arange(len(codes)), [len(c) for c in codes])
    cols = np.fromiter((c for row in codes for c in row), dtype=np.int64, count=len(rows))
    data = np.ones(len(rows))
    matrix = sparse.csr_matrix((data, (rows, cols)), shape=(len(codes), n_classes))
    matrix.data = np.minimum(matrix.data, 1.0)  # a member listed twice is still one member
    return matrix


def prepare(
    query: Query, plan: Plan, train_values: list[pl.Series], *, deadline: Deadline
) -> PredictData | PreparationCut:
    """Classes, features and the pool's counts of the scope, the features built in row chunks
    under ``deadline``; a :class:`PreparationCut` when it passes first."""
    if deadline.expired():  # spent reading the columns (a linked table's join): build nothing
        return PreparationCut("features", 0, plan.total)
    members = query.feature_target
    scope_target = plan.scope.column(query.target, field="evaluate.predict")
    values = [scope_target]
    if plan.test_view is not plan.scope:
        values.append(plan.test_view.column(query.target, field="evaluate.predict"))
    found: set[Any] = set()
    for series in values:
        flat = series.explode() if members else series
        found.update(v for v in flat.drop_nulls().unique().to_list())
    classes = sorted(found)
    index = {value: i for i, value in enumerate(classes)}
    targets = _target_matrix(_class_codes(scope_target, index, members=members), len(classes))
    pool_rows = np.flatnonzero(plan.train_mask | _test_mask(plan))
    modes = [
        field_mode(b.key, plan.scope.kind(b.key, field=f"evaluate.where.{b.key}"), v)
        for b, v in zip(query.bindings, train_values, strict=True)
    ]
    built = _evidence(query, modes, train_values, plan.total, None, deadline)
    if isinstance(built, PreparationCut):
        return built
    vocabulary, matrices = built
    pool = class_counts(targets[pool_rows], matrices.counts[pool_rows])
    return PredictData(classes, modes, vocabulary, targets, matrices, pool)


def _evidence(
    query: Query,
    modes: list[FieldMode],
    values: list[pl.Series],
    n_rows: int,
    vocabulary: pl.DataFrame | None,
    deadline: Deadline,
) -> tuple[pl.DataFrame, FeatureMatrices] | PreparationCut:
    """The rows' feature matrices over ``vocabulary`` (the rows' own features when it is
    None), built in row chunks while ``deadline`` lasts. A chunk's rows are whole (a row's
    features and group weights depend on that row alone), so the chunks stacked are the
    matrices of one call over all rows."""
    conjunctions, grouped = query.profile == "high", query.profile in ("group", "high")
    step = "features" if vocabulary is None else "test rows' features"
    parts: list[tuple[int, int, pl.DataFrame]] = []
    chunks = PacedChunks(n_rows, PREPARE_CHUNK_ROWS, deadline)
    for start, stop in chunks:
        sliced = [v.slice(start, stop - start) for v in values]
        parts.append((start, stop, feature_frame(modes, sliced, conjunctions=conjunctions)))
    if chunks.truncated:
        return PreparationCut(step, parts[-1][1] if parts else 0, n_rows)
    if not parts:  # no rows: the empty frame of their features
        parts.append((0, 0, feature_frame(modes, values, conjunctions=conjunctions)))
    if vocabulary is None:
        vocabulary = vocabulary_of(pl.concat([frame for _, _, frame in parts]))
        step = "evidence matrices"
    counts: list[sparse.csr_matrix] = []
    weighted: list[sparse.csr_matrix] = []
    by_part = PacedChunks(len(parts), 1, deadline)
    for i, _ in by_part:
        start, stop, frame = parts[i]
        part = build_matrices(frame, stop - start, vocabulary, grouped=grouped)
        counts.append(part.counts)
        weighted.append(part.weighted)
    if by_part.truncated:
        return PreparationCut(step, parts[len(counts)][0], n_rows)
    stacked = FeatureMatrices(
        sparse.vstack(counts, format="csr"), sparse.vstack(weighted, format="csr")
    )
    return vocabulary, stacked


def _test_mask(plan: Plan) -> np.ndarray:
    """Scope rows that are test rows (hold-out only): they are in the pool and subtracted."""
    mask = np.zeros(plan.total, dtype=bool)
    if plan.holdout:
        mask[plan.test_positions] = True
    return mask


def _test_matrices(
    query: Query,
    plan: Plan,
    data: PredictData,
    test_values: list[pl.Series],
    deadline: Deadline,
) -> FeatureMatrices | PreparationCut:
    """Weighted evidence of the test rows (rows of the scope's matrix when they are scope
    rows read through the same columns)."""
    same = plan.holdout and all(b.source == b.key for b in query.bindings)
    if same:
        scope = data.scope_features
        return FeatureMatrices(
            scope.counts[plan.test_positions], scope.weighted[plan.test_positions]
        )
    built = _evidence(query, data.modes, test_values, plan.test_samples, data.vocabulary, deadline)
    return built if isinstance(built, PreparationCut) else built[1]


def _calibrate(
    query: Query,
    plan: Plan,
    data: PredictData,
    model: NaiveBayes,
    run: PredictRun,
    deadline: Deadline,
) -> None:
    """Fit the temperature on up to :data:`CALIBRATION_ROWS` training rows, each scored
    without itself, in chunks under the deadline; when it passes, ``run.calibration_cut``
    says how far the fit got and no temperature is set."""
    if query.feature_target:
        run.notes.append(
            "calibrate was not applied: a set-valued target has no single true value per row "
            "to fit a temperature on."
        )
        return
    train = np.flatnonzero(plan.train_mask)
    codes = data.scope_targets[train]
    labelled = train[codes.getnnz(axis=1) > 0]
    if len(labelled) < CALIBRATION_MIN_ROWS or model.n_seen < 2:
        run.notes.append(
            f"calibrate was not applied: the temperature fit needs at least "
            f"{CALIBRATION_MIN_ROWS} labelled training rows and 2 classes; there are "
            f"{len(labelled)} rows and {model.n_seen} classes."
        )
        return
    rng = np.random.default_rng(0)
    chosen = np.sort(rng.choice(labelled, size=min(CALIBRATION_ROWS, len(labelled)), replace=False))
    truth = data.scope_targets[chosen].indices
    counts, weighted = data.scope_features.counts[chosen], data.scope_features.weighted[chosen]
    # Each row's leave-one-out scores are its own: chunks give the scores of one call.
    parts: list[np.ndarray] = []
    chunks = PacedChunks(len(chosen), CALIBRATION_CHUNK_ROWS, deadline)
    for start, stop in chunks:
        parts.append(
            model.leave_one_out_scores(counts[start:stop], weighted[start:stop], truth[start:stop])
        )
    if chunks.truncated:
        run.calibration_cut = (sum(len(part) for part in parts), len(chosen))
        return
    scores = np.concatenate(parts)
    run.tau = fit_temperature(scores, truth)
    run.notes.append(
        f"calibrate: temperature tau={run.tau:.4g} fitted on {len(chosen)} training rows "
        "(each scored without itself; no test row was seen)."
    )


def _ranks(probabilities: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """0-based rank of class ``columns[i]`` in row i, ties broken by class order."""
    rows = np.arange(len(columns))
    p = probabilities[rows, columns][:, None]
    order = np.arange(probabilities.shape[1])[None, :]
    ahead = (probabilities > p) | ((probabilities == p) & (order < columns[:, None]))
    return ahead.sum(axis=1)


def run_predict(
    query: Query,
    plan: Plan,
    data: PredictData | PreparationCut,
    test_values: list[pl.Series],
    *,
    deadline: Deadline,
    progress: Callable[[int, int], None] | None,
    want_cases: bool,
) -> PredictRun:
    if isinstance(data, PreparationCut):  # the budget ran out before the first test row
        return PredictRun(truncated=True, preparation_cut=data)
    run = PredictRun()
    held = _test_mask(plan)
    counts = data.pool_counts
    if held.any():
        counts = counts.minus(
            class_counts(data.scope_targets[held], data.scope_features.counts[held])
        )
    model = NaiveBayes(counts)
    if query.calibrate:
        _calibrate(query, plan, data, model, run, deadline)
        if run.calibration_cut is not None:
            run.truncated = True  # the budget ran out before the first test row
            return run
    tau = run.tau or 1.0
    n_classes = len(data.classes)
    members = query.feature_target
    truth_values = plan.test_view.column(query.target, field="evaluate.predict").gather(
        plan.test_positions
    )
    index = {value: i for i, value in enumerate(data.classes)}
    truth_codes = _class_codes(truth_values, index, members=members)
    scorable = np.array([len(c) > 0 for c in truth_codes], dtype=bool)
    run.skipped = int((~scorable).sum())
    evidence = _test_matrices(query, plan, data, test_values, deadline)
    if isinstance(evidence, PreparationCut):
        run.truncated, run.preparation_cut = True, evidence
        return run
    grouped = query.profile != "fast"
    base_p = counts.class_rows / max(counts.n_rows, 1)
    base_order = np.lexsort((np.arange(n_classes), -counts.class_rows))
    base_rank = np.empty(n_classes, dtype=np.int64)
    base_rank[base_order] = np.arange(n_classes)
    base_top = int(base_order[0]) if n_classes else -1
    run.base_value = data.classes[base_top] if n_classes and model.n_seen else None
    # Shares of a set target need not sum to 1; the Brier sum is capped at its one-hot maximum.
    base_sum_sq = min(float(np.sum(base_p**2)), 1.0)
    rows = np.flatnonzero(scorable)
    step = max(16, min(4096, CELLS_PER_CHUNK // max(n_classes, 1)))
    truth_matrix = _target_matrix([truth_codes[i] for i in rows], n_classes).tocsr()
    chunks = PacedChunks(len(rows), step, deadline)
    for start, stop in chunks:
        chunk = rows[start:stop]
        scores = model.log_scores(
            evidence.weighted[chunk], evidence.counts[chunk] if grouped else None
        )
        probabilities = softmax(scores, tau)
        truth_mask = truth_matrix[start : start + len(chunk)].toarray() > 0
        masked = np.where(truth_mask & model.seen[None, :], probabilities, -1.0)
        best = masked.argmax(axis=1)
        known = masked.max(axis=1) >= 0
        truth_p = np.where(known, probabilities[np.arange(len(chunk)), best], 0.0)
        truth_rank = np.where(known, _ranks(probabilities, best), model.n_seen)
        top = probabilities.argmax(axis=1)
        base_masked = np.where(truth_mask & model.seen[None, :], base_rank[None, :], n_classes)
        base_best = base_masked.argmin(axis=1)
        base_known = base_masked.min(axis=1) < n_classes
        columns = {
            "truth_p": truth_p,
            "truth_rank": truth_rank,
            "top_p": probabilities[np.arange(len(chunk)), top],
            "accurate": truth_mask[np.arange(len(chunk)), top],
            "sum_sq_p": np.minimum(np.sum(probabilities**2, axis=1), 1.0),
            "base_truth_p": np.where(base_known, base_p[base_best], 0.0),
            "base_truth_rank": np.where(base_known, base_rank[base_best], model.n_seen),
            "base_accurate": truth_mask[:, base_top] if n_classes else np.zeros(len(chunk), bool),
            "base_sum_sq_p": np.full(len(chunk), base_sum_sq),
        }
        for name, values in columns.items():
            run.columns.setdefault(name, []).append(values)
        run.unseen += int((~known).sum())
        if want_cases:
            run.cases.extend(
                _case(
                    query,
                    plan,
                    test_values,
                    truth_values,
                    position,
                    data.classes,
                    top[j],
                    probabilities[j],
                    best[j],
                    bool(known[j]),
                    int(truth_rank[j]),
                    bool(columns["accurate"][j]),
                )
                for j, position in enumerate(chunk.tolist())
            )
        run.scored += len(chunk)
        if progress is not None:
            progress(run.scored + run.skipped, plan.test_samples)
    run.truncated = chunks.truncated
    return run


def _json_value(value: Any) -> Any:
    """A cell as JSON: a set-valued cell (a Series) as an array, a non-finite float as null."""
    if isinstance(value, pl.Series):
        return value.to_list()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _case(
    query: Query,
    plan: Plan,
    test_values: list[pl.Series],
    truth_values: pl.Series,
    position: int,
    classes: list[Any],
    top: int,
    probabilities: np.ndarray,
    best: int,
    known: bool,
    rank: int,
    accurate: bool,
) -> dict[str, Any]:
    """One entry of cases / errorCases / correctCases, in 003's shape."""
    test_case = {
        (b.source or b.key): _json_value(values[position])
        for b, values in zip(query.bindings, test_values, strict=True)
    }
    test_case[query.target] = _json_value(truth_values[position])
    correct: dict[str, Any]
    if known:
        correct = {"$value": classes[best], "$p": float(probabilities[best]), "rank": rank}
    else:
        first = test_case[query.target]
        value = first[0] if isinstance(first, list) else first
        correct = {"$value": value, "$p": 0.0, "rank": rank}
    return {
        "offset": int(plan.test_positions[position]),
        "testCase": test_case,
        "accurate": accurate,
        "top": {"$value": classes[top], "$p": float(probabilities[top])},
        "correct": correct,
    }
