"""``eval-pipelines case ...``: load and list cases."""

from __future__ import annotations

import argparse
from pathlib import Path

from eval_pipelines.cli.output import print_json


def int_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers") from None


def cmd_create(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    source = api.CaseSource(
        args.records_path,
        tree_path=args.tree_path,
        levels=args.levels,
        key_column=args.key_column,
        text_column=args.text_column,
        label_column=args.label_column,
        target_depth=args.target_depth,
        embeddings_path=args.embeddings_path,
        embedding_column=args.embedding_column,
    )
    created = api.create_case(args.case, source, replace=args.replace, warehouse=args.warehouse)
    print_json(created.to_json())
    return 0


def cmd_embed(args: argparse.Namespace) -> int:
    from eval_pipelines.api.embeddings import build_ann_index, embed_case

    embedded = embed_case(
        args.case, method=args.method, dim=args.dim, seed=args.seed, warehouse=args.warehouse
    )
    index = build_ann_index(args.case, warehouse=args.warehouse)
    print_json({**embedded.to_json(), "annIndexRun": index.to_json()})
    return 0


def cmd_embeddings(args: argparse.Namespace) -> int:
    from eval_pipelines.api.embeddings import list_embeddings

    print_json([s.to_json() for s in list_embeddings(args.case, warehouse=args.warehouse)])
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    print_json([case.to_json() for case in api.list_cases(warehouse=args.warehouse)])
    return 0


def add_commands(groups: argparse._SubParsersAction) -> None:
    case = groups.add_parser("case", help="labelled records and their code tree").add_subparsers(
        dest="command", required=True
    )
    create = case.add_parser("create", help="load a case from Parquet, CSV or JSON Lines")
    create.add_argument("case", help="case name (the key every other command takes)")
    create.add_argument(
        "--records",
        dest="records_path",
        metavar="RECORDS",
        required=True,
        type=Path,
        help="the labelled records: a Parquet, CSV or JSON Lines file",
    )
    tree = create.add_mutually_exclusive_group(required=True)
    tree.add_argument(
        "--tree",
        dest="tree_path",
        metavar="TREE",
        type=Path,
        help="file of code, parent (optional title, kind)",
    )
    tree.add_argument(
        "--levels", type=int_list, help="prefix lengths, separators ignored, e.g. 2,4,6,8"
    )
    create.add_argument(
        "--key-column",
        default="record_key",
        help="column holding each record's unique key (default %(default)s)",
    )
    create.add_argument(
        "--text-column",
        default="text",
        help="column holding the text to classify (default %(default)s)",
    )
    create.add_argument(
        "--label-column",
        default="label",
        help="column holding the record's code (default %(default)s)",
    )
    create.add_argument(
        "--target-depth",
        type=int_list,
        default=None,
        help="default target level(s) of evaluations, as level numbers (1 = top; with "
        "--levels 3,4,5 the 4-character level is 2), default: the deepest level",
    )
    create.add_argument(
        "--replace",
        action="store_true",
        help="load new records for an existing case (earlier evaluations keep theirs)",
    )
    vectors = create.add_mutually_exclusive_group()
    vectors.add_argument(
        "--embeddings",
        dest="embeddings_path",
        metavar="EMBEDDINGS",
        type=Path,
        help="Parquet of record_key and one fixed-length float vector column: the records' "
        "own embeddings (every record covered, one dimension, finite, no zero vectors)",
    )
    vectors.add_argument(
        "--embedding-column", help="a fixed-length float vector column of the records file"
    )
    create.set_defaults(func=cmd_create)
    case.add_parser("list", help="list cases").set_defaults(func=cmd_list)
    embed = case.add_parser(
        "embed",
        help="compute LSA embeddings (truncated SVD of the TF-IDF matrix) for a case, then "
        "build their ANN index (asset embedding_ann_index)",
    )
    embed.add_argument("case", help="case name")
    embed.add_argument(
        "--method", default="lsa", choices=["lsa"], help="embedding method (only %(default)s)"
    )
    embed.add_argument(
        "--dim", type=int, default=256, help="dimensions of each vector (default %(default)s)"
    )
    embed.add_argument(
        "--seed", type=int, default=0, help="seed of the randomised SVD (default %(default)s)"
    )
    embed.set_defaults(func=cmd_embed)
    listing = case.add_parser("embeddings", help="list a case's embedding sets, newest first")
    listing.add_argument("case", help="case name")
    listing.set_defaults(func=cmd_embeddings)
