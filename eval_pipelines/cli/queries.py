"""``eval-pipelines evaluate`` (spec 003 queries, JSON in and JSON out) and
``eval-pipelines evaluations list/show``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipelines.cli.arguments import seconds
from eval_pipelines.cli.output import print_json

if TYPE_CHECKING:
    from eval_pipelines.api.queries import QueryEvaluation


def _read_document(path: str) -> Mapping[str, object]:
    """The query from a file, or from stdin for ``-``."""
    from eval_pipelines.api.queries import parse_query_text
    from eval_pipelines.core.files import MAX_DOCUMENT_BYTES, read_text

    if path != "-":
        # Read here, so that a refusal of the file names --file (the API names `query`).
        text = read_text(Path(path), "--file", max_bytes=MAX_DOCUMENT_BYTES)
        return parse_query_text(text, field="--file", value=str(Path(path)))
    # One character past the bound is enough to refuse it; the rest is never read.
    text = sys.stdin.read(MAX_DOCUMENT_BYTES + 1)
    return parse_query_text(text, field="--file", value="- (stdin)")


def _report(response: Mapping[str, Any], evaluation: QueryEvaluation) -> str:
    from eval_pipelines.core.queries.report import report_text

    return report_text(
        response,
        evaluation.metrics or {},
        eval_id=evaluation.eval_id,
        run_id=evaluation.run_id,
        cached=bool(evaluation.cached),
        folds=evaluation.folds,
        listing_hint="--json lists them all",
    )


def cmd_evaluate(args: argparse.Namespace) -> int:
    from eval_pipelines.api.queries import run_query

    answer = run_query(
        _read_document(args.file),
        folds=args.folds,
        submit=args.submit,
        timeout=args.timeout,
        warehouse=args.warehouse,
    )
    evaluation = answer.evaluation
    if args.json:
        how = "cached" if evaluation.cached else f"run {evaluation.run_id}"
        print(f"evaluation {evaluation.eval_id} ({how})", file=sys.stderr, flush=True)
        print_json(answer.response)  # exactly the 003 response
    else:
        print(_report(answer.response, evaluation), flush=True)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from eval_pipelines.api.queries import list_queries

    print_json([listed.to_json() for listed in list_queries(warehouse=args.warehouse)])
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from eval_pipelines.api.queries import get_query

    shown = get_query(args.eval_id, warehouse=args.warehouse)
    evaluation = shown.evaluation
    if args.json:
        print_json(shown.to_json())
    elif shown.response is not None:
        print(_report(shown.response, evaluation), flush=True)
        for pinned in evaluation.pinned:
            print(
                f"pins {pinned['kind']} {pinned['name']!r} at version {pinned['version']}",
                flush=True,
            )
    else:
        run = evaluation.run
        state = f"newest run {run['runId']} {run['state']}" if run else "no run"
        print(f"evaluation {args.eval_id}: no result yet ({state})", flush=True)
    return 0


def add_commands(groups: argparse._SubParsersAction) -> None:
    evaluate = groups.add_parser(
        "evaluate",
        help="evaluate a query (spec 003) as a Dagster run; prints its result",
        description="Evaluate a predict or estimate query (spec 003) on a loaded table or a "
        "case. The same query on the same data is answered from the stored result.",
    )
    evaluate.add_argument(
        "--file", required=True, metavar="PATH", help="the query as JSON (- for stdin)"
    )
    evaluate.add_argument("--json", action="store_true", help="print exactly the 003 response")
    evaluate.add_argument(
        "--folds",
        type=int,
        default=None,
        metavar="K",
        help="k-fold sweep: fold r tests the rows at positions r mod K (the query's test is "
        "{$index: {$mod: [K, r]}})",
    )
    evaluate.add_argument(
        "--submit",
        action="store_true",
        help="submit the run to the instance's run queue and wait for it (default: executed "
        "in this process when a run slot is free)",
    )
    evaluate.add_argument(
        "--timeout",
        type=seconds,
        default=3900,
        help="seconds to wait (--submit; default %(default)s)",
    )
    evaluate.set_defaults(func=cmd_evaluate)
    evaluations = groups.add_parser("evaluations", help="stored query evaluations").add_subparsers(
        dest="command", required=True
    )
    listed = evaluations.add_parser("list", help="every query evaluation, oldest first")
    listed.set_defaults(func=cmd_list)
    show = evaluations.add_parser("show", help="one evaluation's result, query and newest run")
    show.add_argument("eval_id", help="query evaluation id (eval-pipelines evaluations list)")
    show.add_argument("--json", action="store_true", help="print JSON instead of text")
    show.set_defaults(func=cmd_show)
