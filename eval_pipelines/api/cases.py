"""Cases: labelled records and their code tree, validated and written atomically."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from eval_pipelines.api._shared import resolve_warehouse
from eval_pipelines.api.embeddings import (
    EmbeddingSetInfo,
    _embedding_set_for,
    _register_case_partition,
    _set_info,
)
from eval_pipelines.core.cases import CaseSource, build_case
from eval_pipelines.core.errors import ConflictError
from eval_pipelines.core.results import JsonResult, json_field
from eval_pipelines.core.tree import Level
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import embeddings as embeddings_store
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, connect, transaction

__all__ = ["CreatedCase", "ListedCase", "create_case", "list_cases"]


@dataclass(frozen=True)
class CreatedCase(JsonResult):
    """A loaded case at its new versions; ``records_version_added`` and
    ``tree_version_added`` say whether each version was new (a reload of the same files adds
    neither). ``embeddings`` and ``embeddings_added`` are None unless the records' own
    embeddings were given (and then left out of the document)."""

    case_id: str
    records: int
    records_version: str
    tree_version: str
    tree_mode: str
    levels: tuple[Level, ...]
    target_depth: tuple[int, ...]
    metadata_columns: tuple[str, ...]
    embeddings: EmbeddingSetInfo | None = json_field(omit_none=True)
    records_version_added: bool = json_field()
    tree_version_added: bool = json_field()
    embeddings_added: bool | None = json_field(omit_none=True, default=None)


@dataclass(frozen=True)
class ListedCase(JsonResult):
    """A case at its current versions, as the warehouse's ``cases`` table has it (the
    document keeps the table's column names; ``target_depth`` is the stored JSON text, e.g.
    ``"[3, 4]"``)."""

    case_id: str = json_field("case_id")
    n_records: int = json_field("n_records")
    tree_mode: str = json_field("tree_mode")
    target_depth: str = json_field("target_depth")
    records_version: str = json_field("records_version")
    tree_version: str = json_field("tree_version")
    created_at: datetime = json_field("created_at")


def create_case(
    case_id: str,
    source: CaseSource,
    *,
    replace: bool = False,
    warehouse: Path | str | None = None,
) -> CreatedCase:
    """Load a case's labelled records and code tree (``source``: the files, columns, levels,
    target depth, :class:`~eval_pipelines.core.cases.CaseSource`), validated and written
    atomically; ``replace`` loads new records over an existing case.

    With ``source.embeddings_path`` (a Parquet of ``record_key`` and one fixed-length float
    vector column) or ``source.embedding_column`` (such a column in the records file), the
    records' own embeddings are validated with them and stored in the same transaction. Every
    argument is checked (by :func:`~eval_pipelines.core.cases.build_case`) before any file is
    read.
    """
    built = build_case(case_id, source)
    info = cases_store.CaseInfo(
        case_id=case_id,
        tree_mode=built.tree.mode,
        prefix_lengths=built.tree.prefix_lengths,
        target_depth=built.target_depth,
        records_version=built.records_version,
        tree_version=built.tree_version,
        n_records=built.records.height,
        metadata_columns=built.metadata_columns,
        source=str(source.records_path),
    )
    embedding_set = None
    if built.embeddings is not None:
        embedding_set = _embedding_set_for(
            case_id,
            info.records_version,
            list(built.embedding_keys),
            built.embeddings,
            method="provided",
            source=str(
                source.embeddings_path or f"{source.records_path}:{source.embedding_column}"
            ),
        )
    path = resolve_warehouse(warehouse)
    embeddings_added = None
    with connect(path, create=True, wait_seconds=CLI_WAIT_SECONDS) as conn, transaction(conn):
        if cases_store.case_exists(conn, case_id) and not replace:
            raise ConflictError(
                f"case={case_id!r}: already exists; pass `replace` to load new records "
                "(earlier evaluations keep the records they were made on)"
            )
        added = cases_store.save_case(conn, info, built.records, built.nodes)
        if embedding_set is not None and built.embeddings is not None:
            embeddings_added = embeddings_store.save_embedding_set(
                conn, embedding_set, list(built.embedding_keys), built.embeddings
            )
    if embedding_set is not None:
        _register_case_partition(case_id)
    return CreatedCase(
        case_id=case_id,
        records=info.n_records,
        records_version=info.records_version,
        tree_version=info.tree_version,
        tree_mode=built.tree.mode,
        levels=built.tree.levels,
        target_depth=tuple(built.target_depth),
        metadata_columns=tuple(info.metadata_columns),
        embeddings=_set_info(embedding_set) if embedding_set is not None else None,
        records_version_added=added["recordsVersionAdded"],
        tree_version_added=added["treeVersionAdded"],
        embeddings_added=embeddings_added,
    )


def list_cases(*, warehouse: Path | str | None = None) -> tuple[ListedCase, ...]:
    """Every case at its current versions, by case id."""
    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        frame = cases_store.list_cases(conn)
    return tuple(ListedCase(**row) for row in frame.iter_rows(named=True))
