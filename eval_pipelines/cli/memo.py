"""``eval-pipelines memo ...``: propose, approve, list and A/B memo entries."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from eval_pipelines.cli.holdout import add_eval_flags, start_and_maybe_wait
from eval_pipelines.cli.output import print_json


def cmd_add(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    print_json(api.add_memo_entry(args.case, args.entry_path, warehouse=args.warehouse).to_json())
    return 0


def cmd_approve(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    approved = api.approve_memo_entry(
        args.case, args.entry_id, by=args.by, warehouse=args.warehouse
    )
    print_json(approved.to_json())
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    print_json(
        [entry.to_json() for entry in api.list_memo_entries(args.case, warehouse=args.warehouse)]
    )
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    return start_and_maybe_wait(args, partial(api.evaluate_memo_entry, args.case, args.entry_id))


def add_commands(groups: argparse._SubParsersAction) -> None:
    memo = groups.add_parser("memo", help="memo entries of a case").add_subparsers(
        dest="command", required=True
    )
    add = memo.add_parser("add", help="add a proposed entry from YAML/JSON")
    add.add_argument("case", help="case name")
    add.add_argument(
        "--file",
        dest="entry_path",
        metavar="FILE",
        required=True,
        type=Path,
        help="the entry as a YAML or JSON file",
    )
    add.set_defaults(func=cmd_add)
    approve = memo.add_parser("approve", help="approve a proposed entry (it becomes active)")
    approve.add_argument("case", help="case name")
    approve.add_argument("entry_id", help="memo entry id (eval-pipelines memo list CASE)")
    approve.add_argument("--by", required=True, help="who approves it (recorded)")
    approve.set_defaults(func=cmd_approve)
    evaluate = memo.add_parser(
        "evaluate", help="memo A/B: active memo vs active memo plus this proposed entry"
    )
    evaluate.add_argument("case", help="case name")
    evaluate.add_argument("entry_id", help="id of the proposed memo entry")
    add_eval_flags(evaluate)
    evaluate.set_defaults(func=cmd_evaluate)
    listing = memo.add_parser("list", help="list entries")
    listing.add_argument("case", help="case name")
    listing.set_defaults(func=cmd_list)
