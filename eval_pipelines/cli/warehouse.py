"""``eval-pipelines warehouse ...``: the warehouse itself."""

from __future__ import annotations

import argparse

from eval_pipelines.cli.output import print_json


def cmd_copy(args: argparse.Namespace) -> int:
    from eval_pipelines.api.warehouse import copy_warehouse

    print_json(copy_warehouse(args.source, to=args.to).to_json())
    return 0


def add_commands(groups: argparse._SubParsersAction) -> None:
    warehouse = groups.add_parser(
        "warehouse", help="the warehouse itself: move a DuckDB file into PostgreSQL"
    ).add_subparsers(dest="command", required=True)
    copy = warehouse.add_parser(
        "copy", help="copy a DuckDB warehouse file into an empty PostgreSQL warehouse"
    )
    copy.add_argument("source", help="the DuckDB warehouse file")
    copy.add_argument(
        "--to",
        required=True,
        help="postgresql://user@host:port/db (password in $EVAL_PIPELINES_WAREHOUSE_PASSWORD)",
    )
    copy.set_defaults(func=cmd_copy)
