"""A query evaluation (spec 003) for people: the headline that pairs the model with its
baseline, the markdown report the Dagster UI shows, the text the CLI prints, and the key that
says which evaluations a plotted metric is comparable across."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval_pipelines.core.hashing import hash_json
from eval_pipelines.core.queries.query import Query

# The headline pairs the model with its baseline, as 003 says to read an evaluation.
HEADLINES = {"accuracy": "baseAccuracy", "mae": "baselineMae"}


def format_value(value: float | int | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool) or isinstance(value, int):
        return str(value)
    return f"{value:.4f}"


def headline(metrics: Mapping[str, float | int | None]) -> str:
    """``accuracy 0.8120 vs baseAccuracy 0.4030 (n = 240)``, or ``mae ... vs baselineMae``."""
    for metric, baseline in HEADLINES.items():
        if metric in metrics:
            return (
                f"{metric} {format_value(metrics[metric])} vs {baseline} "
                f"{format_value(metrics.get(baseline))} (n = {format_value(metrics.get('n'))})"
            )
    return f"n = {format_value(metrics.get('n'))}"


def comparable_as(query: Query, folds: int | None, sources: list[dict[str, Any]]) -> str:
    """What a plotted metric is comparable across: the same tables at the same versions, the
    same scope, target and test rows (selector or test source and fold count). Evidence,
    config and maxTime may differ: they are what a user compares. Reads like
    ``cars.Origin/1a2b3c4d``."""
    identity = {
        "sources": sorted((s["name"], s["kind"], s["version"]) for s in sources),
        "scope": [query.scope.table, list(query.scope.filters)],
        "kind": query.kind,
        "target": [query.target, query.feature_target],
        "test": query.document.get("test"),
        "testSource": query.document.get("testSource"),
        "folds": folds,
    }
    return f"{query.scope.table}.{query.target}/{hash_json(identity, length=8)}"


def setup_lines(query: Query, folds: int | None) -> list[str]:
    """What was evaluated and how, besides the data: the experiment, the target, the
    evidence and the config (so two reports say what differs between them)."""
    if folds:
        experiment = f"{folds}-fold sweep (each fold a hold-out; every row tested once)"
    elif query.holdout:
        experiment = "hold-out (`test`: the test rows are hidden from training)"
    else:
        experiment = "resubstitution (`testSource`: training is the whole table)"
    evidence = ", ".join(
        f"`{b.key}`" + (f" ← `{b.source}`" if b.source and b.source != b.key else "")
        if b.source
        else f"`{b.key}` = {b.literal!r}"
        for b in query.bindings
    )
    target = query.target + (".$feature" if query.feature_target else "")
    if query.kind == "predict":
        config = f"profile `{query.profile}`, calibrate {str(query.calibrate).lower()}"
    else:
        config = f"model `{query.estimator}`" + (
            f", k {query.k}" if query.estimator == "knn" else ""
        )
    return [
        f"- experiment: {experiment}",
        f"- {query.kind} `{target}` from {evidence or 'no evidence (the baseline alone)'}",
        f"- config: {config}; maxTime {query.max_time:g} s",
    ]


def report_markdown(
    eval_id: str,
    metrics: Mapping[str, float | int | None],
    result: Mapping[str, Any],
    sources: list[dict[str, Any]],
    setup: list[str] | None = None,
) -> str:
    """The evaluation as markdown: the headline, what was evaluated, every scalar metric, the
    message, the sources it read."""
    lines = [f"### {headline(metrics)}", ""]
    if setup:
        lines += [*setup, ""]
    if result.get("truncated"):
        lines += [
            f"**Truncated**: hit maxTime after {format_value(metrics.get('n'))} of "
            f"{result.get('requested')} test rows.",
            "",
        ]
    lines += ["| metric | value |", "|---|---|"]
    lines += [f"| {name} | {format_value(value)} |" for name, value in metrics.items()]
    if result.get("message"):
        lines += ["", f"> {result['message']}"]
    lines += ["", f"Evaluation `{eval_id}` read:"]
    lines += [
        f"- {s['kind']} `{s['name']}` version `{s['version']}`"
        + (f", {s['rows']} rows" if s.get("rows") is not None else "")
        for s in sources
    ]
    return "\n".join(lines)


def experiment_label(folds: int | None, holdout: bool) -> str:
    """Which experiment 003 runs, in a few words: test rows hidden from training, or seen by
    it."""
    if folds:
        return f"{folds}-fold sweep (hold-out)"
    return "hold-out (test)" if holdout else "resubstitution (testSource)"


def _metric_lines(metrics: Mapping[str, Any]) -> list[str]:
    width = max((len(name) for name in metrics), default=0)
    return [f"  {name:<{width}}  {format_value(value)}" for name, value in metrics.items()]


_NOT_METRICS = ("evaluation", "message", "truncated", "requested", "folds", "coverage")
CASES_SHOWN = 3


def _scalars(response: Mapping[str, Any]) -> dict[str, Any]:
    """The metrics the query selected, in its order."""
    return {
        k: v
        for k, v in response.items()
        if k not in _NOT_METRICS and not isinstance(v, list | dict)
    }


def _case_lines(response: Mapping[str, Any], listing_hint: str) -> list[str]:
    lines = []
    for name in ("cases", "errorCases", "correctCases"):
        if name not in response:
            continue
        entries = response[name]
        hint = f" ({listing_hint})" if listing_hint else ""
        lines.append(f"{name}: {len(entries)}{hint}")
        for case in entries[:CASES_SHOWN]:
            top, correct = case["top"], case["correct"]
            lines.append(
                f"  offset {case['offset']}: top {top['$value']!r} ({top['$p']:.3f}), "
                f"correct {correct['$value']!r} ({correct['$p']:.3f}, rank {correct['rank']})"
            )
    return lines


def _fold_lines(response: Mapping[str, Any]) -> list[str]:
    folds = response.get("folds")
    if not isinstance(folds, list):
        return []
    name = next((m for m in ("accuracy", "mae") if m in (folds[0] if folds else {})), None)
    lines = []
    if name is not None:
        values = " ".join(format_value(fold.get(name)) for fold in folds)
        lines.append(f"{name} per fold: {values}")
    coverage = response.get("coverage") or {}
    if coverage:
        once = "yes" if coverage.get("everyRowOnce") else "no"
        lines.append(
            f"every row tested exactly once: {once} ({coverage['tested']} of {coverage['rows']})"
        )
    return lines


def report_text(
    response: Mapping[str, Any],
    metrics: Mapping[str, float | int | None],
    *,
    eval_id: str,
    run_id: str | None,
    cached: bool,
    folds: int | None,
    listing_hint: str = "",
) -> str:
    """For people: the headline (model against baseline, with n), every scalar metric, the
    message, and which evaluation and run it is (``response`` is the 003 response,
    ``metrics`` every scalar metric of the stored result). Only the first few cases are
    shown; ``listing_hint`` says where the caller's user finds them all."""
    lines = [headline(metrics)]
    if response.get("truncated"):
        lines.append(
            f"truncated: hit maxTime after {metrics.get('n')} of {response.get('requested')} "
            "test rows"
        )
    lines += _metric_lines(_scalars(response) or metrics)
    lines += _case_lines(response, listing_hint)
    lines += _fold_lines(response)
    if response.get("message"):
        lines.append(f"message: {response['message']}")
    how = "cached result" if cached else f"run {run_id}"
    sweep = f", {folds}-fold sweep" if folds else ""
    lines.append(f"evaluation {eval_id} ({how}{sweep})")
    return "\n".join(lines)
