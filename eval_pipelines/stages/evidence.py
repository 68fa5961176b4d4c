"""The evidence index of a case version: built once, cached on disk, reused by every evaluation."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from eval_pipelines.core.retrieval import (
    EvidenceIndex,
    build_evidence_index,
    load_evidence_index,
    save_evidence_index,
)
from eval_pipelines.core.vectorize import fit_transform


@dataclass(frozen=True)
class IndexHandle:
    index: EvidenceIndex
    path: Path
    built: bool
    seconds: float


def index_path(index_dir: Path, case_id: str, records_version: str) -> Path:
    return index_dir / f"{case_id}-{records_version}.npz"


def load_or_build_index(
    index_dir: Path, case_id: str, records_version: str, texts: list[str]
) -> IndexHandle:
    """Load the cached index for this records version, or build and cache it.

    ``texts`` must be in ``record_key`` order; the version pins the content, so a cached file
    always matches the records it was built from.
    """
    path = index_path(index_dir, case_id, records_version)
    started = time.perf_counter()
    if path.exists():
        index = load_evidence_index(path)
        if index.n_docs == len(texts):
            return IndexHandle(index, path, built=False, seconds=time.perf_counter() - started)
    _, matrix = fit_transform(texts)
    index = build_evidence_index(matrix)
    index_dir.mkdir(parents=True, exist_ok=True)
    save_evidence_index(index, path)
    return IndexHandle(index, path, built=True, seconds=time.perf_counter() - started)
