"""Embeddings of a case: the user's own vectors (a Parquet file, or a column of the records
file) or LSA vectors computed from the case's TF-IDF matrix. Validated in full before anything
is written; stored in the warehouse as an immutable set named by its content."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eval_pipelines.api._shared import resolve_warehouse
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.hashing import hash_json
from eval_pipelines.core.holdout.spec import validate_case_id
from eval_pipelines.core.progress import report
from eval_pipelines.core.results import JsonResult
from eval_pipelines.stages.shared_files import run_index_dir
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import embeddings as embeddings_store
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, connect, transaction

__all__ = [
    "EmbeddedCase",
    "EmbeddingSetInfo",
    "IndexRun",
    "ListedEmbeddingSet",
    "build_ann_index",
    "embed_case",
    "list_embeddings",
]

EMBEDDING_PARTITIONS = "cases"
LSA_DIM_MAX = 1024


@dataclass(frozen=True)
class EmbeddingSetInfo(JsonResult):
    """An embedding set: its content version, dimension, records covered, method
    (``provided`` or ``lsa-<dim>-seed<seed>``) and source file (None for computed ones)."""

    embeddings_version: str
    dim: int
    records: int
    method: str
    source: str | None


@dataclass(frozen=True)
class EmbeddedCase(JsonResult):
    """The embedding set :func:`embed_case` stored; ``added`` is False when the identical set
    was stored before."""

    case_id: str
    embeddings_version: str
    dim: int
    records: int
    method: str
    source: str | None
    added: bool


@dataclass(frozen=True)
class ListedEmbeddingSet(JsonResult):
    """One embedding set of a case and the records version it covers."""

    records_version: str
    embeddings_version: str
    dim: int
    records: int
    method: str
    source: str | None


def _set_info(embedding_set: embeddings_store.EmbeddingSet) -> EmbeddingSetInfo:
    return EmbeddingSetInfo(
        embeddings_version=embedding_set.embeddings_version,
        dim=embedding_set.dim,
        records=embedding_set.n_records,
        method=embedding_set.method,
        source=embedding_set.source,
    )


def _embedding_set_for(
    case_id: str,
    records_version: str,
    record_keys: list[str],
    vectors: np.ndarray,
    *,
    method: str,
    source: str | None,
) -> embeddings_store.EmbeddingSet:
    """The set's description; its version hashes the records version, method and vectors."""
    digest = hashlib.sha256(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
    digest.update("\n".join(record_keys).encode())
    version = hash_json(
        {"records": records_version, "method": method, "vectors": digest.hexdigest()}
    )
    return embeddings_store.EmbeddingSet(
        case_id=case_id,
        records_version=records_version,
        embeddings_version=version,
        dim=int(vectors.shape[1]),
        n_records=int(vectors.shape[0]),
        method=method,
        source=source,
    )


def _register_case_partition(case_id: str) -> None:
    """Add the case to the partitions of the embedding index asset (idempotent)."""
    from eval_pipelines.runs.instance import dagster_instance

    instance = dagster_instance()
    if not instance.has_dynamic_partition(EMBEDDING_PARTITIONS, case_id):
        instance.add_dynamic_partitions(EMBEDDING_PARTITIONS, [case_id])


def embed_case(
    case_id: str,
    *,
    method: str = "lsa",
    dim: int = 256,
    seed: int = 0,
    warehouse: Path | str | None = None,
) -> EmbeddedCase:
    """Compute LSA vectors (truncated SVD of the case's TF-IDF matrix, L2-normalised) for the
    case's current records and store them as its embeddings."""
    from eval_pipelines.core.embeddings.lsa import lsa_vectors
    from eval_pipelines.core.embeddings.vectors import check_embeddings
    from eval_pipelines.stages.text_index import open_or_build_index

    validate_case_id(case_id)
    if method != "lsa":
        raise InputError("method", method, "the built-in method is lsa")
    if isinstance(dim, bool) or not isinstance(dim, int) or not 2 <= dim <= LSA_DIM_MAX:
        raise InputError("dim", dim, f"must be an integer in 2..{LSA_DIM_MAX}")
    path = resolve_warehouse(warehouse)
    report("reading records")
    with connect(path, read_only=True, wait_seconds=CLI_WAIT_SECONDS) as conn:
        info = cases_store.load_case(conn, case_id)
        records = cases_store.load_records(conn, case_id, info.records_version)
    keys = records.get_column("record_key").to_list()
    if dim >= len(keys):
        raise InputError("dim", dim, f"must be below the case's {len(keys)} records")
    texts = records.get_column("text").to_list()
    report("text index", detail=f"{len(keys):,} records")
    handle = open_or_build_index(
        run_index_dir(path),
        case_id,
        info.records_version,
        n_docs=len(texts),
        texts=lambda: texts,
        progress=lambda written, segments: report("text index", written, segments, "segments"),
    )
    report("lsa vectors", detail=f"{dim} dimensions of {len(keys):,} records")
    vectors = check_embeddings(keys, keys, lsa_vectors(handle.index.matrix(), dim=dim, seed=seed))
    embedding_set = _embedding_set_for(
        case_id, info.records_version, keys, vectors, method=f"lsa-{dim}-seed{seed}", source=None
    )
    report("storing vectors", detail=f"{len(keys):,} x {dim}")
    with connect(path, wait_seconds=CLI_WAIT_SECONDS) as conn, transaction(conn):
        cases_store.require_records_version(conn, case_id, info.records_version)
        added = embeddings_store.save_embedding_set(conn, embedding_set, keys, vectors)
    _register_case_partition(case_id)
    return EmbeddedCase(
        case_id=case_id,
        embeddings_version=embedding_set.embeddings_version,
        dim=embedding_set.dim,
        records=embedding_set.n_records,
        method=embedding_set.method,
        source=embedding_set.source,
        added=added,
    )


@dataclass(frozen=True)
class IndexRun(JsonResult):
    """The run that materialised ``embedding_ann_index`` for the case (:func:`build_ann_index`)."""

    case_id: str
    run_id: str
    state: str


def build_ann_index(case_id: str, *, warehouse: Path | str | None = None) -> IndexRun:
    """Materialise the case's ``embedding_ann_index`` partition (the approximate index of its
    current embeddings, with its recall@20) and wait for it, as every run is launched
    (:func:`eval_pipelines.runs.launch`). Raises :class:`EvalFailed` when the run fails."""
    from eval_pipelines import runs
    from eval_pipelines.api._shared import EvalFailed, require_run_warehouse

    validate_case_id(case_id)
    require_run_warehouse(warehouse)
    state = runs.launch("embedding_index", case_id, wait=True)
    built = IndexRun(case_id, state.run_id, state.state)
    if state.state != "succeeded":
        raise EvalFailed(
            f"embedding_ann_index of case {case_id}: run {state.run_id} {state.state}: "
            f"{state.reason or 'see the run in the Dagster UI'}",
            built,
        )
    return built


def list_embeddings(
    case_id: str, *, warehouse: Path | str | None = None
) -> tuple[ListedEmbeddingSet, ...]:
    """Every embedding set of the case, newest first."""
    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        cases_store.load_case(conn, case_id)
        return tuple(
            ListedEmbeddingSet(
                records_version=s.records_version,
                embeddings_version=s.embeddings_version,
                dim=s.dim,
                records=s.n_records,
                method=s.method,
                source=s.source,
            )
            for s in embeddings_store.list_sets(conn, case_id)
        )
