"""A case's embeddings as searches read them: the warehouse's vectors copied once into a
memory-mapped ``.npy`` file in the index folder, and the pynndescent index built over them,
both cached per embedding set (whose content hash names the files, so a cached file always
matches its vectors). The numeric libraries are imported on first use, so importing this
module (as the Dagster definitions do) compiles nothing."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eval_pipelines.stages import shared_files
from eval_pipelines.stages.file_cache import OpenedFiles, file_identity
from eval_pipelines.stages.text_index import OpenWarehouse
from eval_pipelines.storage import embeddings as embeddings_store

if TYPE_CHECKING:
    from eval_pipelines.core.embeddings.ann import AnnIndex

# The approximate index is built with a fixed seed: the set's content and this seed pin it.
ANN_SEED = 0

# A couple of embedding sets per process: the one a run searches, and one it replaced.
_vectors: OpenedFiles[np.ndarray] = OpenedFiles(2)
# Each index with the vectors object it was checked against (a hit must search those).
_ann: OpenedFiles[tuple[np.ndarray, AnnIndex]] = OpenedFiles(2)


def clear_embedding_cache() -> None:
    """Forget every opened vectors file and approximate index (tests; memory)."""
    _vectors.clear()
    _ann.clear()


def vectors_path(index_dir: Path, case_id: str, embeddings_version: str) -> Path:
    return index_dir / f"{case_id}-{embeddings_version}.emb.npy"


def ann_path(index_dir: Path, case_id: str, embeddings_version: str) -> Path:
    return index_dir / f"{case_id}-{embeddings_version}.nndescent.pkl"


def _write_npy(path: Path, vectors: np.ndarray) -> None:
    """Write atomically (a crash leaves the old file or the new one, never half a file), then
    publish it to the shared bucket when the folder mirrors one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
    )
    try:
        with handle:
            np.save(handle, np.ascontiguousarray(vectors, dtype=np.float32))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    shared_files.publish(path)


def load_vectors(
    open_warehouse: OpenWarehouse, index_dir: Path, case_id: str, embeddings_version: str
) -> np.ndarray:
    """The set's L2-normalised vectors in ``record_key`` order, memory-mapped read-only
    (checked against the warehouse once per process and file)."""
    path = vectors_path(index_dir, case_id, embeddings_version)
    shared_files.refresh(path)
    cached = _vectors.get(path)
    if cached is not None:
        return cached
    with open_warehouse(read_only=True) as conn:
        info = embeddings_store.embedding_set(conn, case_id, embeddings_version)
        if not path.exists():
            _write_npy(path, embeddings_store.load_vectors(conn, case_id, embeddings_version))
    identity = file_identity(path)
    vectors = np.load(path, mmap_mode="r")
    if vectors.shape != (info.n_records, info.dim):
        # A file left by something else under this name: rebuild it from the warehouse.
        with open_warehouse(read_only=True) as conn:
            _write_npy(path, embeddings_store.load_vectors(conn, case_id, embeddings_version))
        identity = file_identity(path)
        vectors = np.load(path, mmap_mode="r")
    _vectors.put(path, identity, vectors)
    return vectors


@dataclass(frozen=True)
class AnnHandle:
    index: AnnIndex
    path: Path
    built: bool
    seconds: float


def load_or_build_ann(
    index_dir: Path,
    case_id: str,
    embeddings_version: str,
    vectors: np.ndarray,
    *,
    n_threads: int,
) -> AnnHandle:
    """Load the cached pynndescent index of this embedding set, or build and cache it."""
    from eval_pipelines.core.embeddings.ann import build_ann_index, load_ann_index, save_ann_index

    path = ann_path(index_dir, case_id, embeddings_version)
    started = time.perf_counter()
    shared_files.refresh(path)
    opened = _ann.get(path)
    if opened is not None and opened[0] is vectors:
        return AnnHandle(opened[1], path, built=False, seconds=time.perf_counter() - started)
    identity = file_identity(path)
    if identity is not None:
        try:
            index = load_ann_index(path, vectors)
            _ann.put(path, identity, (vectors, index))
            return AnnHandle(index, path, built=False, seconds=time.perf_counter() - started)
        except ValueError:
            pass  # built over other vectors (a stale file): build it again below
    index = build_ann_index(vectors, seed=ANN_SEED, n_threads=n_threads)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_ann_index(index, path)
    shared_files.publish(path)
    _ann.put(path, file_identity(path), (vectors, index))
    return AnnHandle(index, path, built=True, seconds=time.perf_counter() - started)


def ann_index_stage(
    open_warehouse: OpenWarehouse, case_id: str, *, index_dir: Path, threads: int
) -> dict[str, Any]:
    """Build (or load) the approximate index of the case's current embedding set and measure
    its recall@20 against the exact search on a seeded probe of 200 records."""
    from eval_pipelines.core.embeddings.ann import measure_recall
    from eval_pipelines.storage import cases as cases_store

    with open_warehouse(read_only=True) as conn:
        info = cases_store.load_case(conn, case_id)
        current = embeddings_store.current_set(conn, case_id, info.records_version)
    if current is None:
        from eval_pipelines.core.errors import NotFoundError

        raise NotFoundError(
            f"case={case_id!r}: has no embeddings for its current records; add them with "
            f"'eval-pipelines case embed {case_id} --method lsa --dim 256' or "
            "'case create ... --embeddings FILE'"
        )
    vectors = load_vectors(open_warehouse, index_dir, case_id, current.embeddings_version)
    handle = load_or_build_ann(
        index_dir, case_id, current.embeddings_version, vectors, n_threads=threads
    )
    recall = measure_recall(handle.index, vectors, k=20, probe=200, seed=ANN_SEED)
    return {
        "case": case_id,
        "records_version": info.records_version,
        "embeddings_version": current.embeddings_version,
        "records": current.n_records,
        "dim": current.dim,
        "built": handle.built,
        "seconds": round(handle.seconds, 3),
        "recall_at_20": round(recall.recall_at_k, 4),
        "probe_queries": recall.probe_queries,
        "path": str(handle.path),
    }
