"""Cases: labelled records and their code tree, validated and written atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from eval_pipelines.api._shared import resolve_warehouse
from eval_pipelines.core.errors import ConflictError, InputError
from eval_pipelines.core.hashing import hash_frame, hash_json
from eval_pipelines.core.holdout.spec import parse_target_depth, validate_case_id
from eval_pipelines.core.records import (
    check_labels_in_tree,
    metadata_keys,
    normalise_records,
    read_table,
)
from eval_pipelines.core.tree import CodeTree, tree_from_parent_links, tree_from_prefix_levels
from eval_pipelines.storage import cases, embeddings
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, connect, transaction


def _column_by_code(tree_frame: pl.DataFrame, column: str) -> dict[str, str | None]:
    """An optional tree-file column as ``code -> value`` (empty when the file lacks it)."""
    if column not in tree_frame.columns:
        return {}
    codes = tree_frame["code"].cast(pl.String).to_list()
    return dict(zip(codes, tree_frame[column].cast(pl.String).to_list(), strict=True))


def _tree_nodes_frame(
    tree: CodeTree, titles: dict[str, str | None], kinds: dict[str, str | None]
) -> pl.DataFrame:
    """Rows for ``tree_nodes``; prefix trees take their level name as the kind."""
    codes = sorted(tree.paths)
    level_names = {level.depth: level.name for level in tree.levels}
    return pl.DataFrame(
        {
            "code": codes,
            "parent": [tree.paths[c][-2] if len(tree.paths[c]) > 1 else None for c in codes],
            "depth": [len(tree.paths[c]) for c in codes],
            "title": [titles.get(c) for c in codes],
            "kind": [
                level_names[len(tree.paths[c])] if tree.mode == "prefix" else kinds.get(c)
                for c in codes
            ],
        },
        schema={
            "code": pl.String,
            "parent": pl.String,
            "depth": pl.Int32,
            "title": pl.String,
            "kind": pl.String,
        },
    )


def create_case(
    case_id: str,
    records_path: Path | str,
    *,
    tree_path: Path | str | None = None,
    levels: list[int] | None = None,
    key_column: str = "record_key",
    text_column: str = "text",
    label_column: str = "label",
    target_depth: list[int] | None = None,
    replace: bool = False,
    embeddings_path: Path | str | None = None,
    embedding_column: str | None = None,
    warehouse: Path | str | None = None,
) -> dict[str, Any]:
    """Load a case's labelled records and code tree, validated and written atomically.

    With ``embeddings_path`` (a Parquet of ``record_key`` and one fixed-length float vector
    column) or ``embedding_column`` (such a column in the records file), the records' own
    embeddings are validated with them and stored in the same transaction.
    """
    validate_case_id(case_id)
    if (tree_path is None) == (levels is None):
        raise InputError("--tree/--levels", None, "give exactly one of --tree or --levels")
    if embeddings_path is not None and embedding_column is not None:
        raise InputError("--embeddings/--embedding-column", None, "give at most one of the two")
    frame = read_table(Path(records_path), what="--records")
    embedded: tuple[list[str], Any] | None = None
    if embedding_column is not None:
        from eval_pipelines.core.embeddings.vectors import embeddings_from_frame

        embedded = embeddings_from_frame(
            frame, key_column=key_column, vector_column=embedding_column
        )
        frame = frame.drop(embedding_column)
    elif embeddings_path is not None:
        from eval_pipelines.core.embeddings.vectors import read_embeddings_file

        embedded = read_embeddings_file(Path(embeddings_path))
    records = normalise_records(
        frame, key_column=key_column, text_column=text_column, label_column=label_column
    )
    if tree_path is not None:
        tree_frame = read_table(Path(tree_path), what="--tree")
        tree = tree_from_parent_links(tree_frame)
        nodes = _tree_nodes_frame(
            tree, _column_by_code(tree_frame, "title"), _column_by_code(tree_frame, "kind")
        )
    else:
        assert levels is not None
        tree = tree_from_prefix_levels(records.get_column("label").unique().to_list(), levels)
        nodes = _tree_nodes_frame(tree, {}, {})
    records = check_labels_in_tree(records, tree)
    depth = parse_target_depth(
        target_depth if target_depth is not None else [tree.max_depth],
        "--target-depth",
        tree.max_depth,
    )
    tree_version = hash_json(
        {
            "mode": tree.mode,
            "levels": list(tree.prefix_lengths),
            "nodes": hash_frame(nodes.select("code", "parent")),
        }
    )
    info = cases.CaseInfo(
        case_id=case_id,
        tree_mode=tree.mode,
        prefix_lengths=tree.prefix_lengths,
        target_depth=depth,
        records_version=hash_frame(records.select("record_key", "text", "label", "metadata")),
        tree_version=tree_version,
        n_records=records.height,
        metadata_columns=tuple(sorted(metadata_keys(records))),
        source=str(records_path),
    )
    embedding_set = vectors = None
    keys: list[str] = []
    if embedded is not None:
        from eval_pipelines.api.embeddings import embedding_set_for
        from eval_pipelines.core.embeddings.vectors import check_embeddings

        keys = sorted(records.get_column("record_key").to_list())
        vectors = check_embeddings(keys, *embedded)
        embedding_set = embedding_set_for(
            case_id,
            info.records_version,
            keys,
            vectors,
            method="provided",
            source=str(embeddings_path or f"{records_path}:{embedding_column}"),
        )
    path = resolve_warehouse(warehouse)
    with connect(path, create=True, wait_seconds=CLI_WAIT_SECONDS) as conn, transaction(conn):
        if cases.case_exists(conn, case_id) and not replace:
            raise ConflictError(
                f"case={case_id!r}: already exists; pass --replace to load new records "
                "(earlier evaluations keep the records they were made on)"
            )
        added = cases.save_case(conn, info, records, nodes)
        if embedding_set is not None and vectors is not None:
            added["embeddingsAdded"] = embeddings.save_embedding_set(
                conn, embedding_set, keys, vectors
            )
    if embedding_set is not None:
        from eval_pipelines.api.embeddings import register_case_partition

        register_case_partition(case_id)
    return {
        "caseId": case_id,
        "records": info.n_records,
        "recordsVersion": info.records_version,
        "treeVersion": info.tree_version,
        "treeMode": tree.mode,
        "levels": [{"depth": lv.depth, "name": lv.name} for lv in tree.levels],
        "targetDepth": list(depth),
        "metadataColumns": list(info.metadata_columns),
        **({"embeddings": embedding_set.to_json()} if embedding_set is not None else {}),
        **added,
    }


def list_cases(*, warehouse: Path | str | None = None) -> list[dict[str, Any]]:
    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        return cases.list_cases(conn).to_dicts()
