"""A scored golden run as JSON (CLI/API) and as markdown plus plottable metadata (Dagster),
pure: the runs are read and scored by :mod:`eval_pipelines.stages.golden`."""

from __future__ import annotations

from typing import Any

from eval_pipelines.core.golden.gate import Gate
from eval_pipelines.core.golden.run import ScoredRun
from eval_pipelines.core.golden.scoring import CaseScore, FieldScore, RunScore
from eval_pipelines.core.golden.shares import counted_share, shown_share
from eval_pipelines.core.stats.policy import is_sufficient


def scored_run_json(scored: ScoredRun) -> dict[str, Any]:
    run = scored.run
    return {
        "goldenRunId": run.golden_run_id,
        "set": run.set_name,
        "workflow": run.workflow,
        "revision": run.revision,
        "dagsterRunId": run.dagster_run_id,
        "status": run.status,
        **({"reason": run.reason} if run.reason else {}),
        "startedAt": run.started_at.isoformat(timespec="seconds"),
        "finishedAt": run.finished_at.isoformat(timespec="seconds") if run.finished_at else None,
        "threshold": run.threshold,
        "charged": {
            "executedSteps": run.executed_steps,
            "cachedSteps": run.cached_steps,
            "costUnits": run.cost_units,
            **({"model": run.usage.to_json()} if run.usage is not None else {}),
        },
        "score": scored.score.to_json(),
        "mixedRevisions": list(scored.mixed_revisions),
        "schemaDrift": list(scored.drifted),
        "cases": {
            case_id: {
                **case.to_json(),
                "why": case_why(case) if case.status != "passed" else None,
                **({"model": scored.usage[case_id].to_json()} if case_id in scored.usage else {}),
            }
            for case_id, case in scored.cases.items()
        },
    }


def _set_markdown(scored: ScoredRun) -> list[str]:
    run, score = scored.run, scored.score
    lines = [
        f"## Set `{run.set_name}` on revision `{run.revision}` ({run.status})",
        "",
        f"- field accuracy: **{shown_share(score.field_accuracy, score.field_scored)}** "
        f"({score.field_correct}/{score.field_scored} labelled values); threshold "
        f"{run.threshold}",
        f"- document pass rate: {counted_share(score.passed, score.pass_rate_n)}; "
        f"errored {score.errored}, skipped {score.skipped} (outside the pass rate)",
        f"- stale labels: {score.stale_labels} on {score.stale_fields} field(s) (not scored)",
        f"- charged: {run.executed_steps} steps executed, {run.cached_steps} served from "
        f"cache, {run.cost_units:g} cost units",
        *([f"- {run.usage.summary()}"] if run.usage is not None else []),
    ]
    if scored.drifted:
        lines.append(f"- schema drift (warning): cases {', '.join(scored.drifted)}")
    if scored.mixed_revisions:
        lines.append(f"- **mixed revisions**: cases {', '.join(scored.mixed_revisions)}")
    lines += ["", "| field | scored | correct | accuracy |", "|---|---:|---:|---:|"]
    for field in score.fields:
        if is_invented_rows(field, score) and field.scored == 0:
            continue  # no invented row: nothing to show
        label = f"{field.key} (stale)" if field.stale else field.key
        if is_invented_rows(field, score):
            label = f"{field.key} (invented rows: one miss each)"
        accuracy = shown_share(field.accuracy, field.scored)
        lines.append(f"| `{label}` | {field.scored} | {field.correct} | {accuracy} |")
    failing = [(c, s) for c, s in scored.cases.items() if s.status != "passed"]
    if failing:
        lines += ["", "| case | status | why |", "|---|---|---|"]
        lines += [f"| {c} | {s.status} | {case_why(s)} |" for c, s in failing]
    return lines


MISMATCHES_SHOWN = 3


def is_invented_rows(field: FieldScore, score: RunScore) -> bool:
    """The breakdown row of a table's invented rows (keyed by the table; its columns are
    keyed ``table.column``)."""
    return any(other.key.startswith(field.key + ".") for other in score.fields)


def case_why(case: CaseScore) -> str:
    """The case's reason, or its first mismatches (``customer: expected 'Eyre Square Books',
    got 'Eyre'``)."""
    if case.reason:
        return case.reason
    misses = [item for item in case.items if not item.matched]
    parts = []
    for item in misses[:MISMATCHES_SHOWN]:
        if item.kind == "invented_row":
            parts.append(f"{item.key}: invented row {item.row}")
        elif item.kind == "missing_row_cell":
            parts.append(f"{item.key}[{item.row}]: row missing")
        else:
            where = f"{item.key}[{item.row}]" if item.row is not None else item.key
            parts.append(f"{where}: expected {item.expected!r}, got {item.actual!r}")
    more = len(misses) - MISMATCHES_SHOWN
    return "; ".join(parts) + (f"; {more} more" if more > 0 else "")


def report_markdown(runs: list[ScoredRun], gate: Gate) -> str:
    verdict = "passed" if gate.passed else "**blocked**"
    lines: list[str] = [
        f"# Golden runs of `{gate.workflow}` revision `{gate.revision}`",
        "",
        f"Activation gate: {verdict}: {gate.reason}",
        "",
    ]
    if not runs:
        lines.append("No golden set of this workflow has a run against this revision.")
    for scored in runs:
        lines += [*_set_markdown(scored), ""]
    return "\n".join(lines)


def report_metadata(runs: list[ScoredRun]) -> dict[str, Any]:
    """Numeric metadata with stable keys (plotted across materialisations). A share a run did
    not score, or scored from fewer than 20 observations, gets no key at all: a gap in the
    plot, never a zero nor an estimate from too few."""
    metadata: dict[str, Any] = {}
    for scored in runs:
        prefix = scored.run.set_name
        score = scored.score
        if score.field_accuracy is not None and is_sufficient(score.field_scored):
            metadata[f"{prefix}/field_accuracy"] = round(score.field_accuracy, 4)
        if score.pass_rate is not None and is_sufficient(score.pass_rate_n):
            metadata[f"{prefix}/pass_rate"] = round(score.pass_rate, 4)
        metadata[f"{prefix}/n_values"] = score.field_scored
        metadata[f"{prefix}/stale_labels"] = score.stale_labels
        for field in score.fields:
            if field.accuracy is not None and not field.stale and is_sufficient(field.scored):
                metadata[f"{prefix}/field/{field.key}"] = round(field.accuracy, 4)
    return metadata
