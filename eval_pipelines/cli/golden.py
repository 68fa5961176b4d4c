"""``eval-pipelines golden ...``: golden sets, cases, runs, comparisons and trends."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipelines.cli.arguments import finite_float, seconds
from eval_pipelines.cli.output import print_json

if TYPE_CHECKING:
    from eval_pipelines.api.golden import GoldenReportResult, ModelUsageResult


def cmd_create(args: argparse.Namespace) -> int:
    from eval_pipelines.api import golden

    created = golden.create_set(
        args.set,
        workflow=args.workflow,
        node=args.node,
        threshold=args.threshold,
        gate=args.gate,
        warehouse=args.warehouse,
    )
    print_json(created.to_json())
    return 0


def cmd_add_case(args: argparse.Namespace) -> int:
    from eval_pipelines.api import golden

    added = golden.add_golden_case(
        args.set, document=args.document, labels=args.labels, warehouse=args.warehouse
    )
    _warn_unmapped(added.unmapped)
    print_json(added.to_json())
    return 0


def cmd_add_run(args: argparse.Namespace) -> int:
    from eval_pipelines.api import golden

    added = golden.add_golden_case_from_run(args.set, args.run_id, warehouse=args.warehouse)
    _warn_unmapped(added.unmapped)
    print_json(added.to_json())
    return 0


def _warn_unmapped(unmapped: tuple[str, ...]) -> None:
    if unmapped:
        print(
            f"warning: {len(unmapped)} value(s) map onto no field and are not "
            f"labels: {', '.join(unmapped)}",
            file=sys.stderr,
        )


def cmd_add_records(args: argparse.Namespace) -> int:
    from eval_pipelines.api import golden

    added = golden.add_golden_cases_from_records(
        args.set,
        records=args.records or None,
        sample_size=args.sample_size,
        seed=args.seed,
        warehouse=args.warehouse,
    )
    print_json(added.to_json())
    return 0


def cmd_cases(args: argparse.Namespace) -> int:
    from eval_pipelines.api import golden

    print_json([c.to_json() for c in golden.list_golden_cases(args.set, warehouse=args.warehouse)])
    return 0


def cmd_enable(args: argparse.Namespace, enabled: bool) -> int:
    from eval_pipelines.api import golden

    case = golden.set_golden_case_enabled(args.set, args.case_id, enabled, warehouse=args.warehouse)
    print_json(case.to_json())
    return 0


def cmd_delete_case(args: argparse.Namespace) -> int:
    from eval_pipelines.api import golden

    deleted = golden.delete_golden_case(
        args.set, args.case_id, yes=args.yes, warehouse=args.warehouse
    )
    print_json(deleted.to_json())
    return 0


def _model_line(model: ModelUsageResult) -> str:
    if model.cost is not None:
        cost = f"cost {model.cost:.6g}"
    else:
        cost = f"cost unknown ({model.cost_note})" if model.cost_note else "cost unknown"
    return (
        f"model calls: {model.calls} made, {model.from_cache} from cache, {model.failed} "
        f"failed; tokens {model.input_tokens} in, {model.output_tokens} out; {cost}"
    )


def _report_lines(report: GoldenReportResult) -> list[str]:
    score = report.score

    from eval_pipelines.core.golden.shares import counted_share  # as the report shows it

    charged = report.charged
    lines = [
        f"golden run {report.golden_run_id}: set {report.set_name} on revision "
        f"{report.revision} ({report.status}{'' if report.counts else ', does not count'})",
        *([f"  {report.reason}"] if report.reason else []),
        f"  field accuracy {counted_share(score.field_correct, score.field_scored)}, "
        f"threshold {report.threshold}",
        f"  document pass rate {counted_share(score.passed, score.pass_rate_n)}; "
        f"errored {score.errored}, skipped {score.skipped}",
        f"  stale labels {score.stale_labels} on {score.stale_fields} field(s)",
        *(
            [
                f"  schema drift (warning): {len(report.schema_drift)} case(s) written "
                "against another structure of the scored node: "
                f"{', '.join(report.schema_drift)} (re-seed them from a fresh approved review)"
            ]
            if report.schema_drift
            else []
        ),
        *(
            [f"  mixed revisions: cases {', '.join(report.mixed_revisions)}"]
            if report.mixed_revisions
            else []
        ),
        f"  charged: {charged.executed_steps} steps executed, "
        f"{charged.cached_steps} cached, {charged.cost_units:g} cost units",
        *([f"  {_model_line(charged.model)}"] if charged.model is not None else []),
    ]
    keys = [field.key for field in score.fields]
    for field in score.fields:
        note = " (stale, not scored)" if field.stale else ""
        if any(k.startswith(field.key + ".") for k in keys):
            if field.scored == 0:
                continue  # no invented row
            note = " (invented rows: each one a miss)"
        lines.append(f"    {field.key:<32} {counted_share(field.correct, field.scored)}{note}")
    for case_id, case in report.cases.items():
        if case.status != "passed":
            lines.append(f"  {case_id}: {case.status}: {case.why}")

    return lines


def cmd_run(args: argparse.Namespace) -> int:
    from eval_pipelines.api import golden

    report = golden.run_and_report(
        args.set, revision=args.revision, timeout=args.timeout, warehouse=args.warehouse
    )
    if args.json:
        print_json(report.to_json())
    else:
        print("\n".join(_report_lines(report)))
    gate = report.gate
    if gate is not None and not args.json:
        print(f"  gate: {'passed' if gate.passed else 'blocked'}: {gate.reason}")
    # A gating set that does not pass exits 1 (like a failed evaluation), so a script can
    # stop on it; read from the gate's decision, never from the run's success (a correctly
    # blocked revision is a successful run whose activation_gate check failed).
    return 1 if gate is not None and not gate.passed else 0


def cmd_report(args: argparse.Namespace) -> int:
    from eval_pipelines.api import golden

    report = golden.run_report(args.golden_run_id, warehouse=args.warehouse)
    if args.json:
        print_json(report.to_json())
    else:
        print("\n".join(_report_lines(report)))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from eval_pipelines.api import golden

    compared = golden.compare_golden_runs(args.run_a, args.run_b, warehouse=args.warehouse)
    print_json(compared.to_json())
    return 0


def cmd_trend(args: argparse.Namespace) -> int:
    from eval_pipelines.api import golden
    from eval_pipelines.core.golden.shares import shown_share

    trend = golden.trend(args.set, field=args.field, last=args.last, warehouse=args.warehouse)
    if args.json:
        print_json(trend.to_json())
        return 0
    print(f"set {trend.set_name}, {trend.field or 'all fields'}: accuracy over the last runs")
    for point in trend.points:
        value = (
            "gap (not scored)" if point.accuracy is None else shown_share(point.accuracy, point.n)
        )
        print(
            f"  {point.finished_at}  {point.golden_run_id}  rev {point.revision}  "
            f"{value}  n={point.n}"
        )
    return 0


def add_commands(groups: argparse._SubParsersAction) -> None:
    group = groups.add_parser(
        "golden", help="golden sets: labelled documents a workflow is scored against"
    )
    # The API's parameters for the positionals SET and RUN_ID.
    group.set_defaults(api_flags={"set_name": "SET", "test_run_id": "RUN_ID"})
    golden = group.add_subparsers(dest="command", required=True)
    create = golden.add_parser("create", help="create a golden set for one node of a workflow")
    create.add_argument("set", help="golden set name")
    create.add_argument("--workflow", required=True, help="workflow whose node the set scores")
    create.add_argument("--node", default=None, help="scored node (optional if only one)")
    create.add_argument(
        "--threshold", type=finite_float, default=1.0, help="gate pass threshold, (0, 1]"
    )
    create.add_argument("--gate", action="store_true", help="block activation until it passes")
    create.set_defaults(func=cmd_create)
    add_case = golden.add_parser("add-case", help="add a document with its expected values")
    add_case.add_argument("set", help="golden set name")
    add_case.add_argument(
        "--document",
        required=True,
        type=Path,
        help="the document file (stored once, shared by the cases that use it)",
    )
    add_case.add_argument(
        "--labels",
        required=True,
        type=Path,
        help="JSON object of the expected values keyed by field id",
    )
    add_case.set_defaults(func=cmd_add_case)
    add_run = golden.add_parser("add-run", help="add a case from an approved test run")
    add_run.add_argument("set", help="golden set name")
    add_run.add_argument(
        "run_id", help="id of an approved workflow test run (eval-pipelines workflow run)"
    )
    add_run.set_defaults(func=cmd_add_run)
    add_records = golden.add_parser(
        "add-records", help="classify workflows: labelled records of the case as cases"
    )
    add_records.add_argument("set", help="golden set name")
    add_records.add_argument(
        "--record",
        dest="records",
        metavar="RECORD",
        action="append",
        help="a record key (repeatable)",
    )
    add_records.add_argument(
        "--sample",
        dest="sample_size",
        metavar="SAMPLE",
        type=int,
        default=None,
        help="a seeded sample size",
    )
    add_records.add_argument(
        "--seed", type=int, default=7, help="seed of --sample (default %(default)s)"
    )
    add_records.set_defaults(func=cmd_add_records)
    cases = golden.add_parser("cases", help="the set's cases with schema-drift flags")
    cases.add_argument("set", help="golden set name")
    cases.set_defaults(func=cmd_cases)
    for name, enabled in (("disable-case", False), ("enable-case", True)):
        toggle = golden.add_parser(name, help=f"{name.split('-')[0]} a case (labels are kept)")
        toggle.add_argument("set", help="golden set name")
        toggle.add_argument("case_id", help="case id (eval-pipelines golden cases SET)")
        toggle.set_defaults(func=lambda args, on=enabled: cmd_enable(args, on))
    delete = golden.add_parser("delete-case", help="delete a case and its results from every run")
    delete.add_argument("set", help="golden set name")
    delete.add_argument("case_id", help="case id (eval-pipelines golden cases SET)")
    delete.add_argument("--yes", action="store_true", help="confirm")
    delete.set_defaults(func=cmd_delete_case)
    run = golden.add_parser("run", help="run the set against a revision and print the report")
    run.add_argument("set", help="golden set name")
    run.add_argument("--revision", default=None, help="default: the workflow's newest")
    run.add_argument(
        "--timeout",
        type=seconds,
        default=1800,
        help="seconds to wait for the run (default %(default)s)",
    )
    run.add_argument("--json", action="store_true", help="print JSON instead of text")
    run.set_defaults(func=cmd_run)
    report = golden.add_parser("report", help="a golden run's report")
    report.add_argument("golden_run_id", help="golden run id (printed by golden run)")
    report.add_argument("--json", action="store_true", help="print JSON instead of text")
    report.set_defaults(func=cmd_report)
    compare = golden.add_parser("compare", help="per-field deltas and changed cases of two runs")
    compare.add_argument("run_a", help="the earlier golden run id")
    compare.add_argument("run_b", help="the later golden run id")
    compare.set_defaults(func=cmd_compare)
    trend = golden.add_parser("trend", help="accuracy over the last runs (gaps where unscored)")
    trend.add_argument("set", help="golden set name")
    trend.add_argument("--field", default=None, help="only this field id (default: every field)")
    trend.add_argument(
        "--last", type=int, default=10, help="number of newest runs shown (default %(default)s)"
    )
    trend.add_argument("--json", action="store_true", help="print JSON instead of text")
    trend.set_defaults(func=cmd_trend)
