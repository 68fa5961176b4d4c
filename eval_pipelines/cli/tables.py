"""``eval-pipelines table ...``: load data tables for evaluate queries, list and show them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipelines.cli.output import print_json
from eval_pipelines.core.errors import InputError

if TYPE_CHECKING:
    from eval_pipelines.api.tables import TableSummary


def parse_links(values: list[str] | None) -> dict[str, str]:
    """``--link COL=TABLE`` flags as ``{column: table}``."""
    links: dict[str, str] = {}
    for text in values or []:
        column, sep, table = text.partition("=")
        if not sep or not column or not table:
            raise InputError("--link", text, "give COLUMN=TABLE, e.g. --link product=products")
        if column in links:
            raise InputError("--link", text, f"column {column!r} is linked twice")
        links[column] = table
    return links


def _columns_line(table: TableSummary) -> str:
    return ", ".join(f"{c.name} ({c.kind})" for c in table.columns)


def _key_line(table: TableSummary) -> str:
    links = ", ".join(f"{column} -> {target}" for column, target in table.links.items())
    return f"key: {table.key or 'none'}; links: {links or 'none'}"


def cmd_load(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    loaded = api.load_table(
        args.name,
        args.path,
        key=args.key,
        links=parse_links(args.links),
        warehouse=args.warehouse,
    )
    if args.json:
        print_json(loaded.to_json())
        return 0
    state = "new version" if loaded.new else "unchanged: this content was loaded before"
    print(f"table {loaded.name}: version {loaded.version[:16]} ({state})")
    print(f"  {loaded.rows} rows; columns: {_columns_line(loaded)}")
    print(f"  {_key_line(loaded)}", flush=True)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    tables = api.list_tables(warehouse=args.warehouse)
    if args.json:
        print_json([table.to_json() for table in tables])
        return 0
    if not tables:
        print("no tables yet; load one with `eval-pipelines table load NAME --file PATH`")
        return 0
    width = max(len(t.name) for t in tables)
    for t in tables:
        print(
            f"{t.name:<{width}}  {t.version[:16]}  {t.rows} rows  "
            f"{len(t.columns)} columns  key {t.key or '-'}",
            flush=True,
        )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    table = api.show_table(
        args.name, version=args.version, limit=args.limit, warehouse=args.warehouse
    )
    if args.json:
        print_json(table.to_json())
        return 0
    import polars as pl

    current = "current" if table.current else "not current"
    print(f"table {table.name}: version {table.version[:16]} ({current})")
    print(f"  {table.rows} rows from {table.source}, loaded {table.created_at}")
    print(f"  columns: {_columns_line(table)}")
    print(f"  {_key_line(table)}")
    print(f"  versions: {len(table.versions)} (table show {table.name} --version V)")
    if table.first_rows:
        first = pl.from_dicts(list(table.first_rows), infer_schema_length=None)
        with pl.Config(
            tbl_cols=-1,
            tbl_width_chars=160,
            tbl_hide_dataframe_shape=True,
            tbl_hide_column_data_types=True,
            fmt_str_lengths=40,
        ):
            print(first)
    return 0


def add_commands(groups: argparse._SubParsersAction) -> None:
    table = groups.add_parser(
        "table", help="data tables that evaluate queries read (`from`)"
    ).add_subparsers(dest="command", required=True)
    load = table.add_parser(
        "load",
        help="load Parquet, CSV, JSON Lines or a JSON array as a new version of a table",
    )
    load.add_argument("name", help="table name: a lowercase letter, then a-z, 0-9 or _")
    load.add_argument(
        "--file",
        dest="path",
        metavar="FILE",
        required=True,
        type=Path,
        help="Parquet, CSV, JSON Lines or JSON array file",
    )
    load.add_argument("--key", default=None, help="the column identifying rows (links name it)")
    load.add_argument(
        "--link",
        dest="links",
        action="append",
        metavar="COL=TABLE",
        help="COL holds keys of the loaded table TABLE (repeatable)",
    )
    load.add_argument("--json", action="store_true", help="print JSON instead of text")
    load.set_defaults(func=cmd_load)
    listing = table.add_parser("list", help="every table at its current version")
    listing.add_argument("--json", action="store_true", help="print JSON instead of text")
    listing.set_defaults(func=cmd_list)
    show = table.add_parser("show", help="a table's columns, versions and first rows")
    show.add_argument("name", help="table name")
    show.add_argument("--version", default=None, help="a stored version (a unique prefix will do)")
    show.add_argument("--limit", type=int, default=5, help="rows to show (default 5)")
    show.add_argument("--json", action="store_true", help="print JSON instead of text")
    show.set_defaults(func=cmd_show)
