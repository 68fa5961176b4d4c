"""Cases: labelled records and their code tree, validated and written atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval_pipelines.api._shared import resolve_warehouse
from eval_pipelines.core.cases import build_case
from eval_pipelines.core.errors import ConflictError, InputError
from eval_pipelines.core.holdout.spec import validate_case_id
from eval_pipelines.core.records import read_table
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import embeddings as embeddings_store
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, connect, transaction


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
    built = build_case(
        case_id,
        frame,
        tree_frame=read_table(Path(tree_path), what="--tree") if tree_path is not None else None,
        levels=levels,
        key_column=key_column,
        text_column=text_column,
        label_column=label_column,
        target_depth=target_depth,
        embedded=embedded,
    )
    info = cases_store.CaseInfo(
        case_id=case_id,
        tree_mode=built.tree.mode,
        prefix_lengths=built.tree.prefix_lengths,
        target_depth=built.target_depth,
        records_version=built.records_version,
        tree_version=built.tree_version,
        n_records=built.records.height,
        metadata_columns=built.metadata_columns,
        source=str(records_path),
    )
    embedding_set = None
    if built.embeddings is not None:
        from eval_pipelines.api.embeddings import embedding_set_for

        embedding_set = embedding_set_for(
            case_id,
            info.records_version,
            list(built.embedding_keys),
            built.embeddings,
            method="provided",
            source=str(embeddings_path or f"{records_path}:{embedding_column}"),
        )
    path = resolve_warehouse(warehouse)
    with connect(path, create=True, wait_seconds=CLI_WAIT_SECONDS) as conn, transaction(conn):
        if cases_store.case_exists(conn, case_id) and not replace:
            raise ConflictError(
                f"case={case_id!r}: already exists; pass --replace to load new records "
                "(earlier evaluations keep the records they were made on)"
            )
        added = cases_store.save_case(conn, info, built.records, built.nodes)
        if embedding_set is not None and built.embeddings is not None:
            added["embeddingsAdded"] = embeddings_store.save_embedding_set(
                conn, embedding_set, list(built.embedding_keys), built.embeddings
            )
    if embedding_set is not None:
        from eval_pipelines.api.embeddings import register_case_partition

        register_case_partition(case_id)
    return {
        "caseId": case_id,
        "records": info.n_records,
        "recordsVersion": info.records_version,
        "treeVersion": info.tree_version,
        "treeMode": built.tree.mode,
        "levels": [{"depth": lv.depth, "name": lv.name} for lv in built.tree.levels],
        "targetDepth": list(built.target_depth),
        "metadataColumns": list(info.metadata_columns),
        **({"embeddings": embedding_set.to_json()} if embedding_set is not None else {}),
        **added,
    }


def list_cases(*, warehouse: Path | str | None = None) -> list[dict[str, Any]]:
    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        return cases_store.list_cases(conn).to_dicts()
