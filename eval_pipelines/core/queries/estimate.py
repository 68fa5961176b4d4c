"""An estimate evaluation: each test row's numeric target estimated from the training rows
(test rows hidden under hold-out) and scored against the value it has."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.queries.deadline import Deadline, PacedChunks
from eval_pipelines.core.queries.estimators import (
    as_numbers,
    encode_evidence,
    fit_regression,
    has_estimate,
    knn_estimates,
)
from eval_pipelines.core.queries.plan import Plan
from eval_pipelines.core.queries.predict import binding_values
from eval_pipelines.core.queries.query import Query

CHUNK_ROWS = 512


@dataclass(frozen=True)
class EstimateRun:
    truth: np.ndarray
    estimate: np.ndarray
    train_mean: float | None
    skipped: int  # test rows without a target value
    no_estimate: int  # test rows without evidence a training row can be compared on
    truncated: bool


def check_target(query: Query, plan: Plan) -> None:
    kind = plan.scope.kind(query.target, field="evaluate.estimate")
    if kind not in ("integer", "float"):
        raise InputError(
            "evaluate.estimate",
            query.target,
            f"column {query.target!r} is {kind}, not numeric: predict it instead",
        )


def run_estimate(
    query: Query,
    plan: Plan,
    *,
    deadline: Deadline,
    progress: Callable[[int, int], None] | None,
) -> EstimateRun:
    check_target(query, plan)
    train_values, test_values = binding_values(query, plan)
    target = as_numbers(plan.scope.column(query.target, field="evaluate.estimate"))
    train_rows = np.flatnonzero(plan.train_mask & np.isfinite(target))
    truth = as_numbers(
        plan.test_view.column(query.target, field="evaluate.estimate").gather(plan.test_positions)
    )
    kinds = [plan.scope.kind(b.key, field=f"evaluate.where.{b.key}") for b in query.bindings]
    evidence = encode_evidence(
        [v.gather(train_rows) for v in train_values],
        test_values,
        kinds,
        n_train=len(train_rows),
        n_test=plan.test_samples,
    )
    train_target = target[train_rows]
    scorable = np.isfinite(truth)
    usable = scorable & has_estimate(evidence)
    rows = np.flatnonzero(usable)
    fitted = fit_regression(evidence, train_target) if query.estimator == "regression" else None
    estimates: list[np.ndarray] = []
    done = 0
    chunks = PacedChunks(len(rows), CHUNK_ROWS, deadline)
    for start, stop in chunks:
        chunk = rows[start:stop]
        if fitted is not None:
            estimates.append(fitted.estimates(evidence, chunk))
        else:
            estimates.append(knn_estimates(evidence, train_target, chunk, k=query.k))
        done += len(chunk)
        if progress is not None:
            progress(done, len(rows))
    estimate = np.concatenate(estimates) if estimates else np.empty(0)
    scored_rows = rows[: len(estimate)]
    finite = np.isfinite(estimate)
    return EstimateRun(
        truth=truth[scored_rows][finite],
        estimate=estimate[finite],
        train_mean=float(train_target.mean()) if len(train_target) else None,
        skipped=int((~scorable).sum()),
        no_estimate=int((scorable & ~usable).sum()) + int((~finite).sum()),
        truncated=chunks.truncated,
    )
