"""Cases: records, code tree and their content versions."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import duckdb
import polars as pl

from eval_pipelines.core.errors import NotFoundError
from eval_pipelines.core.tree import CodeTree, tree_from_parent_links
from eval_pipelines.storage.frames import query_frame, replace_rows


@dataclass(frozen=True)
class CaseInfo:
    case_id: str
    tree_mode: str
    prefix_lengths: tuple[int, ...]
    target_depth: tuple[int, ...]
    records_version: str
    tree_version: str
    n_records: int
    metadata_columns: tuple[str, ...]
    source: str | None


def case_exists(conn: duckdb.DuckDBPyConnection, case_id: str) -> bool:
    row = conn.execute("SELECT count(*) FROM cases WHERE case_id = ?", [case_id]).fetchone()
    return bool(row and row[0])


def save_case(
    conn: duckdb.DuckDBPyConnection,
    info: CaseInfo,
    records: pl.DataFrame,
    tree_nodes: pl.DataFrame,
) -> None:
    """Write (or replace) a case. Call inside a transaction."""
    sequence_row = conn.execute(
        "SELECT eval_sequence FROM cases WHERE case_id = ?", [info.case_id]
    ).fetchone()
    sequence = int(sequence_row[0]) if sequence_row else 0
    conn.execute("DELETE FROM cases WHERE case_id = ?", [info.case_id])
    conn.execute(
        "INSERT INTO cases VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            info.case_id,
            info.tree_mode,
            json.dumps(list(info.prefix_lengths)),
            json.dumps(list(info.target_depth)),
            info.records_version,
            info.tree_version,
            info.n_records,
            json.dumps(list(info.metadata_columns)),
            info.source,
            datetime.now(UTC).replace(tzinfo=None),
            sequence,
        ],
    )
    replace_rows(
        conn,
        "records",
        info.case_id,
        records.select(
            pl.lit(info.case_id).alias("case_id"),
            "record_key",
            "text",
            "label",
            "label_node",
            "metadata",
        ),
    )
    replace_rows(
        conn,
        "tree_nodes",
        info.case_id,
        tree_nodes.select(
            pl.lit(info.case_id).alias("case_id"), "code", "parent", "depth", "title", "kind"
        ),
    )


def load_case(conn: duckdb.DuckDBPyConnection, case_id: str) -> CaseInfo:
    row = conn.execute(
        "SELECT case_id, tree_mode, prefix_lengths, target_depth, records_version, tree_version, "
        "n_records, metadata_columns, source FROM cases WHERE case_id = ?",
        [case_id],
    ).fetchone()
    if row is None:
        raise NotFoundError(f"case={case_id!r}: no such case (create it with 'case create')")
    return CaseInfo(
        case_id=row[0],
        tree_mode=row[1],
        prefix_lengths=tuple(json.loads(row[2] or "[]")),
        target_depth=tuple(json.loads(row[3])),
        records_version=row[4],
        tree_version=row[5],
        n_records=int(row[6]),
        metadata_columns=tuple(json.loads(row[7] or "[]")),
        source=row[8],
    )


def list_cases(conn: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    return query_frame(
        conn,
        "SELECT case_id, n_records, tree_mode, target_depth, records_version, tree_version, "
        "created_at FROM cases ORDER BY case_id",
        [],
    )


def load_records(conn: duckdb.DuckDBPyConnection, case_id: str) -> pl.DataFrame:
    """The case's records ordered by ``record_key`` (the order the evidence index uses)."""
    return query_frame(
        conn,
        "SELECT record_key, text, label, label_node, metadata FROM records WHERE case_id = ? "
        "ORDER BY record_key",
        [case_id],
    )


def load_tree(conn: duckdb.DuckDBPyConnection, info: CaseInfo) -> CodeTree:
    nodes = query_frame(
        conn,
        "SELECT code, parent, title, kind FROM tree_nodes WHERE case_id = ? ORDER BY code",
        [info.case_id],
    )
    tree = tree_from_parent_links(nodes)
    if info.tree_mode == "prefix":
        tree = replace(tree, mode="prefix", prefix_lengths=info.prefix_lengths)
    return tree


def next_eval_sequence(conn: duckdb.DuckDBPyConnection, case_id: str) -> int:
    """Reserve the case's next evaluation sequence number. Call inside a transaction."""
    conn.execute("UPDATE cases SET eval_sequence = eval_sequence + 1 WHERE case_id = ?", [case_id])
    row = conn.execute("SELECT eval_sequence FROM cases WHERE case_id = ?", [case_id]).fetchone()
    if row is None:
        raise NotFoundError(f"case={case_id!r}: no such case")
    return int(row[0])
