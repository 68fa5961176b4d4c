"""Cases: the current records and tree versions of each case, and every version ever loaded.

Versions are content hashes and immutable: replacing a case's records adds a version (or
reuses an identical one) and moves the case to it, while evaluations keep reading the
versions they pinned.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import duckdb
import polars as pl

from eval_pipelines.core.errors import NotFoundError
from eval_pipelines.core.tree import CodeTree, tree_from_parent_links
from eval_pipelines.storage.frames import INCOMING, insert_frame, query_frame


@dataclass(frozen=True)
class CaseInfo:
    """A case at one records version and one tree version."""

    case_id: str
    tree_mode: str
    prefix_lengths: tuple[int, ...]
    target_depth: tuple[int, ...]
    records_version: str
    tree_version: str
    n_records: int
    metadata_columns: tuple[str, ...]
    source: str | None


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def case_exists(conn: duckdb.DuckDBPyConnection, case_id: str) -> bool:
    row = conn.execute("SELECT count(*) FROM cases WHERE case_id = ?", [case_id]).fetchone()
    return bool(row and row[0])


def _has_records_version(conn: duckdb.DuckDBPyConnection, case_id: str, version: str) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM records_versions WHERE case_id = ? AND records_version = ?",
        [case_id, version],
    ).fetchone()
    return bool(row and row[0])


def _has_tree_version(conn: duckdb.DuckDBPyConnection, case_id: str, version: str) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM tree_versions WHERE case_id = ? AND tree_version = ?",
        [case_id, version],
    ).fetchone()
    return bool(row and row[0])


# Records registered with DuckDB at a time: each slice is converted to Arrow (a copy of its
# strings) only while it is inserted, instead of the whole case at once.
_INSERT_BATCH_ROWS = 500_000


def _insert_records(conn: duckdb.DuckDBPyConnection, info: CaseInfo, records: pl.DataFrame) -> None:
    """Append one records version's rows, a slice at a time, inside the caller's transaction.

    The case id and version travel as query parameters rather than as two constant columns
    of the frame (two more strings per record to build and convert).
    """
    columns = records.select("record_key", "text", "label", "label_node", "metadata")
    for start in range(0, columns.height, _INSERT_BATCH_ROWS):
        conn.register(INCOMING, columns.slice(start, _INSERT_BATCH_ROWS).to_arrow())
        try:
            conn.execute(
                "INSERT INTO records (case_id, record_key, text, label, label_node, metadata, "
                "records_version) SELECT ?, record_key, text, label, label_node, metadata, ? "
                "FROM incoming_frame",
                [info.case_id, info.records_version],
            )
        finally:
            conn.unregister(INCOMING)


def save_case(
    conn: duckdb.DuckDBPyConnection,
    info: CaseInfo,
    records: pl.DataFrame,
    tree_nodes: pl.DataFrame,
) -> dict[str, bool]:
    """Point the case at these versions, storing each one unless it is already stored.

    Call inside a transaction. Returns which versions were new.
    """
    now = _now()
    new_records = not _has_records_version(conn, info.case_id, info.records_version)
    if new_records:
        conn.execute(
            "INSERT INTO records_versions VALUES (?, ?, ?, ?, ?, ?)",
            [
                info.case_id,
                info.records_version,
                info.n_records,
                json.dumps(list(info.metadata_columns)),
                info.source,
                now,
            ],
        )
        _insert_records(conn, info, records)
    new_tree = not _has_tree_version(conn, info.case_id, info.tree_version)
    if new_tree:
        conn.execute(
            "INSERT INTO tree_versions VALUES (?, ?, ?, ?, ?)",
            [
                info.case_id,
                info.tree_version,
                info.tree_mode,
                json.dumps(list(info.prefix_lengths)),
                now,
            ],
        )
        insert_frame(
            conn,
            "INSERT INTO tree_nodes (case_id, code, parent, depth, title, kind, tree_version) "
            "SELECT case_id, code, parent, depth, title, kind, tree_version FROM incoming_frame",
            tree_nodes.select(
                pl.lit(info.case_id).alias("case_id"),
                "code",
                "parent",
                "depth",
                "title",
                "kind",
                pl.lit(info.tree_version).alias("tree_version"),
            ),
        )
    sequence_row = conn.execute(
        "SELECT eval_sequence FROM cases WHERE case_id = ?", [info.case_id]
    ).fetchone()
    sequence = int(sequence_row[0]) if sequence_row else 0
    conn.execute("DELETE FROM cases WHERE case_id = ?", [info.case_id])
    conn.execute(
        "INSERT INTO cases (case_id, tree_mode, prefix_lengths, target_depth, records_version, "
        "tree_version, n_records, metadata_columns, source, created_at, eval_sequence) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            now,
            sequence,
        ],
    )
    return {"recordsVersionAdded": new_records, "treeVersionAdded": new_tree}


def load_case(conn: duckdb.DuckDBPyConnection, case_id: str) -> CaseInfo:
    """The case at its current versions."""
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


def require_records_version(
    conn: duckdb.DuckDBPyConnection, case_id: str, records_version: str
) -> None:
    """Refuse, naming the version, when it is not stored (replaced before versions were kept)."""
    if not _has_records_version(conn, case_id, records_version):
        raise NotFoundError(
            f"records version {records_version} of case {case_id!r} is not in the warehouse "
            "(it was replaced before record versions were kept); its report is intact, but "
            "per-record rows and re-runs need those records"
        )


RECORD_COLUMNS = ("record_key", "text", "label", "label_node", "metadata")


def load_records(
    conn: duckdb.DuckDBPyConnection,
    case_id: str,
    records_version: str,
    *,
    columns: tuple[str, ...] = RECORD_COLUMNS,
) -> pl.DataFrame:
    """One records version ordered by ``record_key`` (the order the text index uses); only
    ``columns`` (of :data:`RECORD_COLUMNS`) are read, so a step that needs keys does not read
    every text."""
    unknown = [c for c in columns if c not in RECORD_COLUMNS]
    if unknown or not columns:
        raise ValueError(f"columns={columns!r}: must be some of {RECORD_COLUMNS}")
    require_records_version(conn, case_id, records_version)
    # Column names come from RECORD_COLUMNS only; the values stay parameters.
    return query_frame(
        conn,
        f"SELECT {', '.join(columns)} FROM records "
        "WHERE case_id = ? AND records_version = ? ORDER BY record_key",
        [case_id, records_version],
    )


def record_keys(conn: duckdb.DuckDBPyConnection, case_id: str, records_version: str) -> list[str]:
    """The version's record keys, sorted."""
    require_records_version(conn, case_id, records_version)
    rows = conn.execute(
        "SELECT record_key FROM records WHERE case_id = ? AND records_version = ? "
        "ORDER BY record_key",
        [case_id, records_version],
    ).fetchall()
    return [row[0] for row in rows]


# Trees built in this process, by (case, tree version, fingerprint of the stored nodes). The
# version hashes codes and parent links; the fingerprint adds what it leaves out (kinds name the
# levels), so a tree is rebuilt if another warehouse holds the same version with other kinds.
# The steps of one in-process run load the same tree three times, each a noticeable share of a
# small run at the demo's 98k nodes (docs/benchmarks.md, "Figures behind code choices").
_TREES: OrderedDict[tuple[str, str, str, int, int], CodeTree] = OrderedDict()
_TREES_KEPT = 4


def count_records(conn: duckdb.DuckDBPyConnection, case_id: str, records_version: str) -> int:
    """How many records one version holds (what its text index must cover), without reading
    them."""
    require_records_version(conn, case_id, records_version)
    row = conn.execute(
        "SELECT count(*) FROM records WHERE case_id = ? AND records_version = ?",
        [case_id, records_version],
    ).fetchone()
    return int(row[0]) if row else 0


def load_tree(conn: duckdb.DuckDBPyConnection, case_id: str, tree_version: str) -> CodeTree:
    """One tree version of a case."""
    row = conn.execute(
        "SELECT v.tree_mode, v.prefix_lengths, count(n.code), "
        "coalesce(sum(hash(n.code, n.parent, n.kind)), 0) "
        "FROM tree_versions v LEFT JOIN tree_nodes n "
        "ON n.case_id = v.case_id AND n.tree_version = v.tree_version "
        "WHERE v.case_id = ? AND v.tree_version = ? GROUP BY v.tree_mode, v.prefix_lengths",
        [case_id, tree_version],
    ).fetchone()
    if row is None:
        raise NotFoundError(f"tree version {tree_version} of case {case_id!r} is not stored")
    key = (case_id, tree_version, row[0], int(row[2]), int(row[3]))
    cached = _TREES.get(key)
    if cached is not None:
        _TREES.move_to_end(key)
        return cached
    tree = _build_tree(conn, case_id, tree_version, row[0], row[1])
    _TREES[key] = tree
    while len(_TREES) > _TREES_KEPT:
        _TREES.popitem(last=False)
    return tree


def _build_tree(
    conn: duckdb.DuckDBPyConnection,
    case_id: str,
    tree_version: str,
    mode: str,
    prefix_lengths: str | None,
) -> CodeTree:
    nodes = query_frame(
        conn,
        # Titles are not part of a tree's shape: not read (a third of the bytes).
        "SELECT code, parent, kind FROM tree_nodes "
        "WHERE case_id = ? AND tree_version = ? ORDER BY code",
        [case_id, tree_version],
    )
    tree = tree_from_parent_links(nodes)
    if mode == "prefix":
        assert prefix_lengths is not None
        tree = replace(tree, mode="prefix", prefix_lengths=tuple(json.loads(prefix_lengths)))
    return tree


def tree_depth(conn: duckdb.DuckDBPyConnection, case_id: str, tree_version: str) -> int:
    """The number of levels of one tree version (without loading the tree)."""
    row = conn.execute(
        "SELECT max(depth) FROM tree_nodes WHERE case_id = ? AND tree_version = ?",
        [case_id, tree_version],
    ).fetchone()
    if row is None or row[0] is None:
        raise NotFoundError(f"tree version {tree_version} of case {case_id!r} is not stored")
    return int(row[0])


def next_eval_sequence(conn: duckdb.DuckDBPyConnection, case_id: str) -> int:
    """Reserve the case's next evaluation sequence number. Call inside a transaction."""
    conn.execute("UPDATE cases SET eval_sequence = eval_sequence + 1 WHERE case_id = ?", [case_id])
    row = conn.execute("SELECT eval_sequence FROM cases WHERE case_id = ?", [case_id]).fetchone()
    if row is None:
        raise NotFoundError(f"case={case_id!r}: no such case (create it with 'case create')")
    return int(row[0])


def load_titles(
    conn: duckdb.DuckDBPyConnection, case_id: str, tree_version: str, codes: list[str]
) -> dict[str, str]:
    """The titles of ``codes`` in one tree version (codes without a title are left out)."""
    if not codes:
        return {}
    rows = conn.execute(
        "SELECT code, title FROM tree_nodes WHERE case_id = ? AND tree_version = ? "
        "AND title IS NOT NULL AND code IN (SELECT UNNEST(?::VARCHAR[]))",
        [case_id, tree_version, codes],
    ).fetchall()
    return {str(code): str(title) for code, title in rows}


def records_by_key(
    conn: duckdb.DuckDBPyConnection, case_id: str, records_version: str, keys: list[str]
) -> dict[str, tuple[str, str]]:
    """``record_key -> (text, label_node)`` of ``keys`` in one records version."""
    if not keys:
        return {}
    rows = conn.execute(
        "SELECT record_key, text, label_node FROM records WHERE case_id = ? "
        "AND records_version = ? AND record_key IN (SELECT UNNEST(?::VARCHAR[]))",
        [case_id, records_version, keys],
    ).fetchall()
    return {str(key): (str(text), str(label)) for key, text, label in rows}
