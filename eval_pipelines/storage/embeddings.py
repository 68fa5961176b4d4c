"""Embedding sets of a case: vectors per record, one set per records version and content.

The warehouse holds the vectors (``record_embeddings``, one ``FLOAT[]`` per record) so they
live and die with the case in one transactional store; searches read a memory-mapped ``.npy``
copy in the index folder (see :mod:`eval_pipelines.stages.embedding_index`), rebuilt from
here whenever it is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import duckdb
import numpy as np
import pyarrow as pa

from eval_pipelines.core.errors import NotFoundError


@dataclass(frozen=True)
class EmbeddingSet:
    case_id: str
    records_version: str
    embeddings_version: str
    dim: int
    n_records: int
    method: str
    source: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "embeddingsVersion": self.embeddings_version,
            "dim": self.dim,
            "records": self.n_records,
            "method": self.method,
            "source": self.source,
        }


def _row_to_set(row: tuple[object, ...]) -> EmbeddingSet:
    case_id, records_version, version, dim, n, method, source = row
    return EmbeddingSet(
        case_id=str(case_id),
        records_version=str(records_version),
        embeddings_version=str(version),
        dim=int(dim),  # type: ignore[call-overload]
        n_records=int(n),  # type: ignore[call-overload]
        method=str(method),
        source=None if source is None else str(source),
    )


_COLUMNS = "case_id, records_version, embeddings_version, dim, n_records, method, source"


def save_embedding_set(
    conn: duckdb.DuckDBPyConnection,
    embedding_set: EmbeddingSet,
    record_keys: list[str],
    vectors: np.ndarray,
) -> bool:
    """Store a set unless the same content is stored already; returns whether it was new.

    ``vectors`` are float32 rows in ``record_keys`` order. Call inside a transaction.
    """
    exists = conn.execute(
        "SELECT 1 FROM embedding_sets WHERE case_id = ? AND embeddings_version = ?",
        [embedding_set.case_id, embedding_set.embeddings_version],
    ).fetchone()
    if exists:
        # Same content again: it becomes the newest set of its records version.
        conn.execute(
            "UPDATE embedding_sets SET created_at = ? WHERE case_id = ? AND embeddings_version = ?",
            [datetime.now(UTC), embedding_set.case_id, embedding_set.embeddings_version],
        )
        return False
    conn.execute(
        f"INSERT INTO embedding_sets ({_COLUMNS}, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            embedding_set.case_id,
            embedding_set.records_version,
            embedding_set.embeddings_version,
            embedding_set.dim,
            embedding_set.n_records,
            embedding_set.method,
            embedding_set.source,
            datetime.now(UTC),
        ],
    )
    flat = np.ascontiguousarray(vectors, dtype=np.float32)
    offsets = np.arange(0, flat.size + 1, flat.shape[1], dtype=np.int32)
    table = pa.table(
        {
            "record_key": pa.array(record_keys, pa.string()),
            "vector": pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat.ravel())),
        }
    )
    conn.register("incoming_vectors", table)
    try:
        conn.execute(
            "INSERT INTO record_embeddings (case_id, embeddings_version, record_key, vector) "
            "SELECT ?, ?, record_key, vector FROM incoming_vectors",
            [embedding_set.case_id, embedding_set.embeddings_version],
        )
    finally:
        conn.unregister("incoming_vectors")
    return True


def current_set(
    conn: duckdb.DuckDBPyConnection, case_id: str, records_version: str
) -> EmbeddingSet | None:
    """The newest embedding set of this records version, or None."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM embedding_sets WHERE case_id = ? AND records_version = ? "
        "ORDER BY created_at DESC, embeddings_version LIMIT 1",
        [case_id, records_version],
    ).fetchone()
    return None if row is None else _row_to_set(row)


def embedding_set(conn: duckdb.DuckDBPyConnection, case_id: str, version: str) -> EmbeddingSet:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM embedding_sets WHERE case_id = ? AND embeddings_version = ?",
        [case_id, version],
    ).fetchone()
    if row is None:
        raise NotFoundError(f"case={case_id!r}: no embedding set {version!r}")
    return _row_to_set(row)


def list_sets(conn: duckdb.DuckDBPyConnection, case_id: str) -> list[EmbeddingSet]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM embedding_sets WHERE case_id = ? ORDER BY created_at DESC",
        [case_id],
    ).fetchall()
    return [_row_to_set(row) for row in rows]


def load_vectors(conn: duckdb.DuckDBPyConnection, case_id: str, version: str) -> np.ndarray:
    """The set's vectors as a float32 ``(n_records, dim)`` matrix in ``record_key`` order."""
    info = embedding_set(conn, case_id, version)
    table = conn.execute(
        "SELECT vector FROM record_embeddings WHERE case_id = ? AND embeddings_version = ? "
        "ORDER BY record_key",
        [case_id, version],
    ).fetch_arrow_table()
    column = table.column("vector").combine_chunks()
    values = column.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    return values.reshape(info.n_records, info.dim)
