"""Run an evaluate query (spec 003) and build its response.

The response holds the selected metrics (all scalar metrics of the query's kind when it has
no ``select``), the case lists it asks for, and ``message`` whenever there is something to
say (a baseAccuracy of 0 explained, rows skipped, the calibration outcome). When ``maxTime``
runs out the response covers the rows scored so far and always carries ``truncated``,
``requested`` and ``message``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.queries.deadline import Deadline
from eval_pipelines.core.queries.estimate import check_target as estimate_target
from eval_pipelines.core.queries.estimate import run_estimate
from eval_pipelines.core.queries.metrics import classification_metrics, regression_metrics
from eval_pipelines.core.queries.plan import Plan, Resolver, SourceRef, make_plan, scope_view
from eval_pipelines.core.queries.predict import (
    PredictData,
    PreparationCut,
    binding_values,
    check_target,
    prepare,
    run_predict,
)
from eval_pipelines.core.queries.query import CASE_LISTS, Query
from eval_pipelines.core.queries.source import Source

__all__ = ["QueryOutcome", "SourceRef", "check_query", "run_folds", "run_query"]

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class QueryOutcome:
    """``result`` is the 003 response; ``metrics`` every scalar metric (for metadata)."""

    result: dict[str, Any]
    metrics: dict[str, float | int | None]
    sources: tuple[SourceRef, ...]
    elapsed_seconds: float
    truncated: bool


def _base_accuracy_note(metrics: dict[str, Any], base_value: Any) -> str | None:
    if metrics.get("baseAccuracy") != 0.0 or not metrics.get("n"):
        return None
    return (
        f"baseAccuracy is 0.0 because no test row carries the baseline's value {base_value!r} "
        "(the training rows' most common). That is about the split, not the model: the test "
        "rows come from a different part of the data than the training rows (a positional "
        "limit takes the first rows, which is not a sample when the table is ordered by the "
        "target), so accuracyGain equals accuracy. Select test rows with $sample, $hash or "
        "$index $mod for a representative split."
    )


def _response(
    query: Query,
    metrics: dict[str, Any],
    *,
    cases: list[dict[str, Any]],
    notes: list[str],
    truncated: bool,
    tau: float | None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in query.select:
        if name in CASE_LISTS:
            out[name] = [
                c for c in cases if name == "cases" or (name == "errorCases") != c["accurate"]
            ]
        elif name == "tau":
            out["tau"] = tau
        elif name == "truncated":
            out["truncated"] = truncated
        elif name == "requested":
            out["requested"] = metrics["testSamples"]
        elif name != "message":
            out[name] = metrics.get(name)
    if tau is not None:
        out["tau"] = tau
    if truncated:
        out["truncated"] = True
        out["requested"] = metrics["testSamples"]
    if notes:
        out["message"] = " ".join(notes)
    elif "message" in query.select:
        out["message"] = ""
    return out


def _predict(
    query: Query,
    plan: Plan,
    deadline: Deadline,
    progress: Progress | None,
    data: PredictData | PreparationCut | None = None,
) -> tuple[dict[str, Any], dict[str, Any], bool]:
    check_target(query, plan.scope)
    train_values, test_values = binding_values(query, plan)
    data = data or prepare(query, plan, train_values, deadline=deadline)
    want_cases = any(name in CASE_LISTS for name in query.select)
    run = run_predict(
        query,
        plan,
        data,
        test_values,
        deadline=deadline,
        progress=progress,
        want_cases=want_cases,
    )
    metrics: dict[str, Any] = classification_metrics(
        run.outcomes(), train_samples=plan.train_samples, test_samples=plan.test_samples
    )
    metrics["tau"] = run.tau
    notes: list[str] = []
    what = "no members" if query.feature_target else f"no value for {query.target!r}"
    if run.preparation_cut is not None:
        cut = run.preparation_cut
        notes.append(
            _truncation_note(
                query,
                0,
                plan.test_samples,
                others=[f"{run.skipped} others had {what}"] if run.skipped else [],
                during=f"while the evidence was prepared (the {cut.step} of {cut.done} of "
                f"{cut.total} rows had been built), ",
                advice="raise maxTime (the evidence of every row in scope is built before the "
                "first test row is scored)",
            )
        )
    elif run.calibration_cut is not None:
        fitted, chosen = run.calibration_cut
        notes.append(
            _truncation_note(
                query,
                0,
                plan.test_samples,
                during=f"during calibration (the temperature fit had scored {fitted} of "
                f"{chosen} training rows), ",
                advice="raise maxTime or leave calibrate off",
            )
        )
    elif run.truncated:
        notes.append(
            _truncation_note(
                query,
                run.scored,
                plan.test_samples,
                others=[f"{run.skipped} others had {what}"] if run.skipped else [],
            )
        )
    if plan.test_samples == 0:
        notes.append("The test selector chose no rows; nothing was scored.")
    if run.skipped:
        notes.append(
            f"{run.skipped} of {plan.test_samples} test rows have {what} and were not scored."
        )
    if run.unseen:
        notes.append(
            f"{run.unseen} scored rows carry a value no training row has: probability 0, "
            "ranked after every known value."
        )
    note = _base_accuracy_note(metrics, run.base_value)
    if note:
        notes.append(note)
    notes.extend(run.notes)
    result = _response(
        query, metrics, cases=run.cases, notes=notes, truncated=run.truncated, tau=run.tau
    )
    return result, metrics, run.truncated


def _truncation_note(
    query: Query,
    scored: int,
    requested: int,
    *,
    others: list[str] | None = None,
    during: str = "",
    advice: str = "narrow the test set (a smaller $mod fraction or limit) or raise maxTime",
) -> str:
    """``scored`` counts the test rows with a score only; rows that could not have one
    (no target value, no estimate) are ``others``, said apart."""
    aside = f" ({', '.join(others)})" if others else ""
    return (
        f"Evaluation hit the {query.max_time:g}s time limit {during}after {scored} of "
        f"{requested} test rows had been scored{aside}; {advice}."
    )


def _estimate(
    query: Query, plan: Plan, deadline: Deadline, progress: Progress | None
) -> tuple[dict[str, Any], dict[str, Any], bool]:
    run = run_estimate(query, plan, deadline=deadline, progress=progress)
    metrics: dict[str, Any] = {
        "testSamples": plan.test_samples,
        "trainSamples": plan.train_samples,
    }
    if run.train_mean is None:
        raise InputError("evaluate.estimate", query.target, "no training row has a value for it")
    metrics.update(regression_metrics(run.truth, run.estimate, train_mean=run.train_mean))
    notes: list[str] = []
    if run.truncated:
        others = [f"{run.no_estimate} others had no estimate"] if run.no_estimate else []
        if run.skipped:
            others.append(f"{run.skipped} others had no value for {query.target!r}")
        notes.append(_truncation_note(query, len(run.truth), plan.test_samples, others=others))
    if plan.test_samples == 0:
        notes.append("The test selector chose no rows; nothing was scored.")
    if run.skipped:
        notes.append(
            f"{run.skipped} of {plan.test_samples} test rows have no value for "
            f"{query.target!r} and were not scored."
        )
    if run.no_estimate:
        notes.append(
            f"{run.no_estimate} test rows had no estimate (their evidence is null, or no "
            "training row shares it) and are left out of n."
        )
    result = _response(query, metrics, cases=[], notes=notes, truncated=run.truncated, tau=None)
    return result, metrics, run.truncated


def run_query(
    query: Query,
    resolve: Callable[[str], Source],
    *,
    clock: Callable[[], float] = time.monotonic,
    progress: Progress | None = None,
) -> QueryOutcome:
    """Run ``query`` over the sources ``resolve`` returns by name.

    Raises
    ------
    InputError
        For anything the query names that the data does not have (a column, a link, a
        target of the wrong kind), before any row is scored.
    """
    deadline = Deadline(query.max_time, clock)
    resolver = Resolver(resolve)
    scope = scope_view(query, resolver)
    plan = make_plan(query, resolver, scope)
    if query.kind == "predict":
        result, metrics, truncated = _predict(query, plan, deadline, progress)
    else:
        result, metrics, truncated = _estimate(query, plan, deadline, progress)
    return QueryOutcome(result, metrics, resolver.refs(), deadline.elapsed(), truncated)


def check_query(
    query: Query, resolve: Callable[[str], Source], *, folds: int | None = None
) -> None:
    """Everything :func:`run_query` / :func:`run_folds` refuses about the query against the
    data (a column, a link, a target of the wrong kind, a sweep's test selector), without
    scoring a row: a caller can refuse before it stores or launches anything."""
    if folds is not None:
        _fold_count(query, folds)
    resolver = Resolver(resolve)
    plan = make_plan(query, resolver, scope_view(query, resolver))
    if query.kind == "predict":
        check_target(query, plan.scope)
    else:
        estimate_target(query, plan)
    binding_values(query, plan)


def _fold_count(query: Query, folds: int) -> None:
    expected = {"$index": {"$mod": [folds, 0]}}
    test = query.test
    ok = (
        query.test_source is None
        and isinstance(test, dict)
        and set(test) == {"$index"}
        and isinstance(test["$index"], dict)
        and set(test["$index"]) == {"$mod"}
        and test["$index"]["$mod"][0] == folds
    )
    if not ok:
        raise InputError(
            "test",
            test if query.test_source is None else query.document.get("testSource"),
            f"a {folds}-fold sweep runs test {expected} for r = 0..{folds - 1}; give that "
            "test (any r) so the query says what the sweep runs",
        )


def run_folds(
    query: Query,
    resolve: Callable[[str], Source],
    *,
    folds: int,
    clock: Callable[[], float] = time.monotonic,
    progress: Progress | None = None,
) -> QueryOutcome:
    """A k-fold sweep: fold r tests the rows whose position is r modulo k, trained on the
    others; every row is tested exactly once. Metrics are the mean over folds (``n``,
    ``testSamples`` summed); ``folds`` lists each fold's response. ``maxTime`` bounds the
    whole sweep."""
    if not isinstance(folds, int) or folds < 2:
        raise InputError("folds", folds, "a sweep needs at least 2 folds")
    _fold_count(query, folds)
    deadline = Deadline(query.max_time, clock)
    resolver = Resolver(resolve)
    scope = scope_view(query, resolver)
    fold_results: list[dict[str, Any]] = []
    fold_metrics: list[dict[str, Any]] = []
    truncated = False
    data: PredictData | PreparationCut | None = None
    stopped_before: int | None = None
    for r in range(folds):
        if r and deadline.expired():
            truncated, stopped_before = True, r
            break
        test = {"$index": {"$mod": [folds, r]}}
        fold_query = replace(query, test=test, document={**query.document, "test": test})
        plan = make_plan(fold_query, resolver, scope)
        if query.kind == "predict":
            if data is None:
                check_target(query, plan.scope)
                data = prepare(query, plan, binding_values(query, plan)[0], deadline=deadline)
            result, metrics, cut = _predict(fold_query, plan, deadline, progress, data)
        else:
            result, metrics, cut = _estimate(fold_query, plan, deadline, progress)
        fold_results.append(result)
        fold_metrics.append(metrics)
        if cut:
            truncated = True
            break
    averaged = _average(fold_metrics)
    tested = sum(m["testSamples"] for m in fold_metrics)
    result = {
        name: averaged.get(name)
        for name in query.select
        if name not in CASE_LISTS and name not in ("truncated", "requested", "message")
    }
    result["folds"] = fold_results
    result["coverage"] = {
        "rows": scope.n_rows,
        "tested": tested,
        "everyRowOnce": tested == scope.n_rows and not truncated,
    }
    # Each fold's own message (rows skipped, unseen values, calibration) stays visible at the
    # top, named by fold, so the averages never hide what was left out.
    notes = [
        f"fold {r}: {fold['message']}" for r, fold in enumerate(fold_results) if fold.get("message")
    ]
    if truncated:
        result["truncated"] = True
        result["requested"] = scope.n_rows
        where = (
            f"before fold {stopped_before} of {folds}"
            if stopped_before is not None
            else f"in fold {len(fold_results) - 1} of {folds}"
        )
        notes.insert(
            0,
            f"The sweep hit the {query.max_time:g}s time limit {where}; the averages cover "
            "the folds run. Raise maxTime or sweep fewer rows.",
        )
    if notes:
        result["message"] = " ".join(notes)
    return QueryOutcome(result, averaged, resolver.refs(), deadline.elapsed(), truncated)


def _average(fold_metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean of each metric over the folds that have it; counts are summed, and the training
    rows per fold averaged to a whole number."""
    summed = ("n", "testSamples", "mapeRows")
    out: dict[str, Any] = {}
    for name in fold_metrics[0] if fold_metrics else ():
        values = [m[name] for m in fold_metrics if m.get(name) is not None]
        if name in summed:
            out[name] = int(sum(values))
        elif name == "trainSamples":
            out[name] = round(sum(values) / len(values))
        elif values:
            out[name] = float(sum(values) / len(values))
        else:
            out[name] = None
    return out
