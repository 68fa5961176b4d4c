"""``eval-pipelines``: cases, memo entries and holdout evaluations from the shell.

Thin: parses flags, calls :mod:`eval_pipelines.api`, prints. Exit codes: 0 ok, 1 evaluation
failed, 2 bad input or refusal (nothing written), 3 timed out, 4 warehouse busy, 130
interrupted (a started evaluation keeps running).
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from pathlib import Path
from typing import Any

from eval_pipelines.core.errors import ConflictError, InputError, NotFoundError
from eval_pipelines.core.specs import DEFAULT_SEED, SAMPLE_SIZE_DEFAULT

EXIT_FAILED, EXIT_REFUSED, EXIT_TIMEOUT, EXIT_BUSY = 1, 2, 3, 4
EXIT_INTERRUPTED = 130


def _int_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers") from None


def _read_json_file(path: str, flag: str) -> Any:
    file = Path(path)
    if not file.exists():
        raise InputError(flag, path, "file does not exist")
    try:
        return json.loads(file.read_text())
    except json.JSONDecodeError as error:
        raise InputError(flag, path, f"is not valid JSON: {error}") from None


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def _progress(status: dict[str, Any]) -> None:
    steps = ", ".join(f"{v['name']}: {v['status']}" for v in status["variants"])
    run = status["runStatus"] or "not started yet"
    print(
        f"[{status['evalId']}] {status['status']} (run {run}); {steps}",
        file=sys.stderr,
        flush=True,
    )


def _print_report(status: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _print(status)
        return
    from eval_pipelines.core.report import report_markdown

    print(report_markdown(status["report"]))
    print(
        f"\nOpen it in the Dagster UI (make dev, then http://127.0.0.1:3000): asset eval_report, "
        f"partition {status['evalId']}; run {status['runId']}.\n"
        f"Per-record rows: eval-pipelines eval rows {status['caseId']} {status['evalId']}"
    )


def cmd_case_create(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    result = api.create_case(
        args.case,
        args.records,
        tree_path=args.tree,
        levels=args.levels,
        key_column=args.key_column,
        text_column=args.text_column,
        label_column=args.label_column,
        target_depth=args.target_depth,
        replace=args.replace,
        warehouse=args.warehouse,
    )
    _print(result)
    return 0


def cmd_case_list(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    _print(api.list_cases(warehouse=args.warehouse))
    return 0


def cmd_memo_add(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    _print(api.add_memo_entry(args.case, args.file, warehouse=args.warehouse))
    return 0


def cmd_memo_approve(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    _print(api.approve_memo_entry(args.case, args.entry_id, by=args.by, warehouse=args.warehouse))
    return 0


def cmd_memo_list(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    _print(api.list_memo_entries(args.case, warehouse=args.warehouse))
    return 0


def _start_and_maybe_wait(args: argparse.Namespace, start: Any) -> int:
    """Start an evaluation with the shared eval flags, print its ids, and wait if asked."""
    from eval_pipelines import api

    config = _read_json_file(args.config_file, "--config-file") if args.config_file else None
    started = start(
        sample_size=args.sample_size,
        seed=args.seed,
        grouping=_grouping(args),
        group_field=args.group_field,
        config=config,
        warehouse=args.warehouse,
    )
    print(json.dumps(started), flush=True)
    if not args.wait:
        return 0
    status = api.wait_for_eval(
        args.case,
        started["evalId"],
        timeout=args.timeout,
        warehouse=args.warehouse,
        progress=_progress,
    )
    _print_report(status, args.json)
    return 0


def cmd_eval_holdout(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    variants = _read_json_file(args.variants_file, "--variants-file")
    launch = "none" if args.no_launch else "background"
    return _start_and_maybe_wait(
        args, partial(api.start_holdout_eval, args.case, variants, launch=launch)
    )


def cmd_eval_status(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    if args.wait:
        status = api.wait_for_eval(
            args.case,
            args.eval_id,
            timeout=args.timeout,
            warehouse=args.warehouse,
            progress=_progress,
        )
        _print_report(status, args.json)
        return 0
    status = api.get_holdout_eval(args.case, args.eval_id, warehouse=args.warehouse)
    if args.json or "report" not in status:
        _print({k: v for k, v in status.items() if args.json or k != "spec"})
    else:
        _print_report(status, False)
    return 1 if status["status"] == "failed" else 0


def cmd_eval_compare(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    result = api.compare_holdout_evals(
        args.case,
        baseline_eval_id=args.baseline_eval_id,
        candidate_eval_id=args.candidate_eval_id,
        baseline_variant=args.baseline_variant,
        candidate_variant=args.candidate_variant,
        warehouse=args.warehouse,
    )
    _print(result)
    return 0


def cmd_memo_evaluate(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    return _start_and_maybe_wait(args, partial(api.evaluate_memo_entry, args.case, args.entry_id))


def _grouping(args: argparse.Namespace) -> dict[str, Any]:
    grouping: dict[str, Any] = {}
    if args.grouping_mode is not None:
        grouping["mode"] = args.grouping_mode
    if args.grouping_threshold is not None:
        grouping["threshold"] = args.grouping_threshold
    return grouping


def _add_eval_flags(command: argparse.ArgumentParser) -> None:
    command.add_argument("--sample-size", type=int, default=SAMPLE_SIZE_DEFAULT)
    command.add_argument("--seed", type=int, default=DEFAULT_SEED)
    command.add_argument(
        "--grouping-mode", default=None, help="nearDuplicate (default), field or none"
    )
    command.add_argument("--grouping-threshold", type=float, default=None)
    command.add_argument("--group-field", default=None)
    command.add_argument("--config-file", default=None)
    command.add_argument("--wait", action="store_true", help="block until the report exists")
    command.add_argument("--json", action="store_true", help="print the report as JSON")
    command.add_argument("--timeout", type=float, default=3600)


def cmd_eval_list(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    _print(api.list_evals(args.case, warehouse=args.warehouse))
    return 0


def cmd_eval_rows(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    for row in api.eval_rows(
        args.case,
        args.eval_id,
        variant=args.variant,
        errors_only=args.errors_only,
        warehouse=args.warehouse,
    ):
        print(json.dumps(row))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eval-pipelines",
        description="Holdout evaluation of classification setups on Dagster and DuckDB.",
    )
    parser.add_argument(
        "--warehouse",
        type=Path,
        default=None,
        help="DuckDB file (default $EVAL_PIPELINES_WAREHOUSE or data/warehouse.duckdb)",
    )
    groups = parser.add_subparsers(dest="group", required=True)

    case = groups.add_parser("case", help="labelled records and their code tree").add_subparsers(
        dest="command", required=True
    )
    create = case.add_parser("create", help="load a case from Parquet, CSV or JSON Lines")
    create.add_argument("case")
    create.add_argument("--records", required=True, type=Path)
    tree = create.add_mutually_exclusive_group(required=True)
    tree.add_argument("--tree", type=Path, help="file of code, parent (optional title, kind)")
    tree.add_argument(
        "--levels", type=_int_list, help="prefix lengths, separators ignored, e.g. 2,4,6,8"
    )
    create.add_argument("--key-column", default="record_key")
    create.add_argument("--text-column", default="text")
    create.add_argument("--label-column", default="label")
    create.add_argument(
        "--target-depth",
        type=_int_list,
        default=None,
        help="default target depth(s) of evaluations (default: deepest level)",
    )
    create.add_argument("--replace", action="store_true", help="replace an existing case")
    create.set_defaults(func=cmd_case_create)
    case.add_parser("list", help="list cases").set_defaults(func=cmd_case_list)

    memo = groups.add_parser("memo", help="memo entries of a case").add_subparsers(
        dest="command", required=True
    )
    add = memo.add_parser("add", help="add a proposed entry from YAML/JSON")
    add.add_argument("case")
    add.add_argument("--file", required=True, type=Path)
    add.set_defaults(func=cmd_memo_add)
    approve = memo.add_parser("approve", help="approve a proposed entry (it becomes active)")
    approve.add_argument("case")
    approve.add_argument("entry_id")
    approve.add_argument("--by", required=True)
    approve.set_defaults(func=cmd_memo_approve)
    evaluate = memo.add_parser(
        "evaluate", help="memo A/B: active memo vs active memo plus this proposed entry"
    )
    evaluate.add_argument("case")
    evaluate.add_argument("entry_id")
    _add_eval_flags(evaluate)
    evaluate.set_defaults(func=cmd_memo_evaluate)
    memo_list = memo.add_parser("list", help="list entries")
    memo_list.add_argument("case")
    memo_list.set_defaults(func=cmd_memo_list)

    evals = groups.add_parser("eval", help="holdout evaluations").add_subparsers(
        dest="command", required=True
    )
    holdout = evals.add_parser("holdout", help="start a holdout evaluation")
    holdout.add_argument("case")
    holdout.add_argument("--variants-file", required=True)
    holdout.add_argument("--sample-size", type=int, default=SAMPLE_SIZE_DEFAULT)
    holdout.add_argument("--seed", type=int, default=DEFAULT_SEED)
    holdout.add_argument(
        "--grouping-mode", default=None, help="nearDuplicate (default), field or none"
    )
    holdout.add_argument("--grouping-threshold", type=float, default=None)
    holdout.add_argument("--group-field", default=None)
    holdout.add_argument("--config-file", default=None)
    holdout.add_argument("--wait", action="store_true", help="block until the report exists")
    holdout.add_argument("--json", action="store_true", help="print the report as JSON")
    holdout.add_argument("--timeout", type=float, default=3600)
    holdout.add_argument(
        "--no-launch",
        action="store_true",
        help="register only; materialise from the UI or dagster CLI",
    )
    holdout.set_defaults(func=cmd_eval_holdout)
    status = evals.add_parser("status", help="status and, once complete, the report")
    status.add_argument("case")
    status.add_argument("eval_id")
    status.add_argument("--wait", action="store_true")
    status.add_argument("--json", action="store_true")
    status.add_argument("--timeout", type=float, default=3600)
    status.set_defaults(func=cmd_eval_status)
    listing = evals.add_parser("list", help="the case's evaluations, oldest first")
    listing.add_argument("case")
    listing.set_defaults(func=cmd_eval_list)
    compare = evals.add_parser("compare", help="compare two completed evaluations (paired)")
    compare.add_argument("case")
    compare.add_argument("baseline_eval_id")
    compare.add_argument("candidate_eval_id")
    compare.add_argument("--baseline-variant", required=True)
    compare.add_argument("--candidate-variant", required=True)
    compare.set_defaults(func=cmd_eval_compare)
    rows = evals.add_parser("rows", help="one JSON line per sampled record and variant")
    rows.add_argument("case")
    rows.add_argument("eval_id")
    rows.add_argument("--variant", default=None)
    rows.add_argument("--errors-only", action="store_true")
    rows.set_defaults(func=cmd_eval_rows)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from eval_pipelines.api import EvalFailed
    from eval_pipelines.storage.warehouse import WarehouseBusy

    try:
        return int(args.func(args))
    except (InputError, ConflictError, NotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_REFUSED
    except EvalFailed as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except TimeoutError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_TIMEOUT
    except WarehouseBusy as error:
        print(f"error: {error}; try again shortly", file=sys.stderr)
        return EXIT_BUSY
    except KeyboardInterrupt:
        print(
            "interrupted: an evaluation already started keeps running in the background; "
            "follow it with 'eval-pipelines eval status CASE EVAL_ID --wait'",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
