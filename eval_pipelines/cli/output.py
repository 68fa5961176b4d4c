"""What the CLI prints: JSON documents on stdout, markdown for people (progress on stderr is
:mod:`eval_pipelines.cli.progress`)."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from eval_pipelines.api import HoldoutStatus
    from eval_pipelines.api.compare import HoldoutComparison


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str), flush=True)


def _fileno(stream: TextIO) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return None


@contextmanager
def run_output_to_stderr() -> Iterator[TextIO]:
    """Keep stdout for the one document while a run may execute in this process.

    Dagster captures a run's output by pointing this process's stdout and stderr at its log
    files and copying them back with ``tail``: a step's prints would reach stdout, and lines
    this process writes to stderr would arrive late or, at the very end, not at all. Inside
    this context stdout goes to stderr, and the stream yielded writes to the terminal's
    stderr directly (for progress lines).
    """
    out, err = _fileno(sys.stdout), _fileno(sys.stderr)
    if out is None or err is None:
        yield sys.stderr  # not attached to files (tests capturing in memory): nothing to keep
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out = os.dup(out)
    terminal = os.fdopen(os.dup(err), "w", buffering=1)
    os.dup2(err, out)
    try:
        yield terminal
    finally:
        sys.stdout.flush()
        os.dup2(saved_out, out)
        os.close(saved_out)
        terminal.close()


def dagster_ui() -> str:
    """The Dagster UI, with its address while a ``make dev`` of this instance serves it (the
    port is ``make dev PORT=``'s, so no address is named when none is known)."""
    from eval_pipelines.ui.devserver import ui_address

    address = ui_address()
    return f"the Dagster UI ({address})" if address else "the Dagster UI (make dev)"


def status_markdown(status: HoldoutStatus) -> str:
    """The evaluation's status as markdown: a status block, then the report once there is one."""
    run = status.run
    lines = [f"# `{status.eval_id}`: {status.status}", ""]
    if run is not None:
        lines.append(f"- newest run `{run.run_id}`: {run.state}")
        if run.reason:
            lines.append(f"- reason: {run.reason}")
    elif status.report_run_id is not None:
        lines.append(
            f"- no run of it in this Dagster instance: the report below was written by run "
            f"`{status.report_run_id}` from another one (see DAGSTER_HOME)"
        )
    else:
        lines.append("- no run yet")
    if status.report_run_id and run is not None and status.report_run_id != run.run_id:
        lines.append(f"- report written by run `{status.report_run_id}`")
    if status.run_assets is not None:
        lines.append(
            f"- the newest run materialised only {', '.join(status.run_assets) or 'no asset'}, "
            "not eval_report: "
            + ("the report below is from before it" if status.report is not None else "no report")
            + f"; run the whole evaluation with eval-pipelines eval rerun {status.case_id} "
            f"{status.eval_id}"
        )
    if run is not None:
        lines.append(
            "- classify steps of the newest run: "
            + ", ".join(f"{v.name} ({v.status})" for v in status.variants)
        )
    else:
        lines.append("- variants: " + ", ".join(v.name for v in status.variants))
    lines.append(
        f"- versions: records `{status.records_version}`, tree `{status.tree_version}`, "
        f"memo `{status.memo_version}`"
    )
    if status.report_markdown is not None:
        lines += ["", status.report_markdown]
        lines += [
            "",
            f"In {dagster_ui()}: asset eval_report, partition "
            f"{status.eval_id}. Per-record rows: eval-pipelines eval rows {status.case_id} "
            f"{status.eval_id}",
        ]
    return "\n".join(lines)


def print_status(status: HoldoutStatus, *, as_json: bool) -> None:
    if as_json:
        print_json({k: v for k, v in status.to_json().items() if k != "reportMarkdown"})
    else:
        print(status_markdown(status), flush=True)


def comparison_markdown(result: HoldoutComparison) -> str:
    """``eval compare`` for people: the two variants, what they share, and the paired table
    of the evaluation report (target levels in bold)."""
    from eval_pipelines.core.holdout.report_markdown import paired_table

    targets = {str(depth) for depth in result.target_depth}
    titles = {
        depth: f"**L{depth}** (target)" if depth in targets else f"L{depth}"
        for depth in result.levels
    }
    baseline = f"{result.baseline_eval_id} {result.baseline_variant}"
    candidate = f"{result.candidate_eval_id} {result.candidate_variant}"
    lines = [
        f"# `{candidate}` vs `{baseline}`",
        "",
        f"- case `{result.case_id}`, the same sample `{result.sample_hash}` paired per record",
    ]
    lines += [
        f"- changed besides the variant: {change.what} ({change.baseline} -> "
        f"{change.candidate}); the differences below include it"
        for change in result.changed_besides_variant
    ]
    lines += [
        "",
        *paired_table(
            [
                {
                    "baseline": baseline,
                    "candidate": candidate,
                    "levels": result.levels,
                    **({"cost": result.cost} if result.cost is not None else {}),
                }
            ],
            titles,
        ),
        "",
        "Interval: 95% cluster bootstrap over the groups held out together; `better`/`worse` "
        "only when it excludes zero and the exact McNemar test agrees at 0.05; MDE at 80% "
        "power (docs/figures.md). JSON: --json.",
    ]
    return "\n".join(lines)
