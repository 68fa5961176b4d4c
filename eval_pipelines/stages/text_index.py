"""The text index of a case's records version: built once, cached on disk, reused by every
evaluation of that version. The numeric kernels are imported on first use, so importing this
module (as the Dagster definitions do) compiles nothing."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eval_pipelines.core.text.retrieval import TextIndex


@dataclass(frozen=True)
class IndexHandle:
    index: TextIndex
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
    from eval_pipelines.core.text.retrieval import (
        build_text_index,
        load_text_index,
        save_text_index,
    )
    from eval_pipelines.core.text.vectorize import fit_transform

    path = index_path(index_dir, case_id, records_version)
    started = time.perf_counter()
    if path.exists():
        index = load_text_index(path)
        if index.n_docs == len(texts):
            return IndexHandle(index, path, built=False, seconds=time.perf_counter() - started)
    _, matrix = fit_transform(texts)
    index = build_text_index(matrix)
    index_dir.mkdir(parents=True, exist_ok=True)
    save_text_index(index, path)
    return IndexHandle(index, path, built=True, seconds=time.perf_counter() - started)
