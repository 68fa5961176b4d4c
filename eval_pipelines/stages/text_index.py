"""The text index of a case's records version: built once, cached on disk, reused by every
evaluation of that version. The numeric kernels are imported on first use, so importing this
module (as the Dagster definitions do) compiles nothing.

On disk the index is a directory of segments of ``.npy`` files (see
:mod:`eval_pipelines.core.text.segments`: built a million records at a time, so the memory
of a build does not grow with the case) that loading memory-maps read-only (milliseconds,
pages shared between processes); in a process, opened indexes are kept in a small cache, so
stages that run one after another in the same process do not reopen them."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from eval_pipelines.stages import shared_files
from eval_pipelines.stages.file_cache import OpenedFiles, file_identity
from eval_pipelines.storage import cases as cases_store

if TYPE_CHECKING:
    from eval_pipelines.core.text.inverted_index import SegmentedIndex

OpenWarehouse = Callable[..., AbstractContextManager[duckdb.DuckDBPyConnection]]

# Opened indexes kept per process: a handful covers the records versions one run touches. A
# rebuilt index is a new directory renamed into place, so the stale entry is not served.
_opened: OpenedFiles[SegmentedIndex] = OpenedFiles(4)


@dataclass(frozen=True)
class IndexHandle:
    index: SegmentedIndex
    path: Path
    built: bool
    seconds: float


def index_path(index_dir: Path, case_id: str, records_version: str) -> Path:
    """Directory of the index of one records version (indexes of older formats, ``.npz``
    files or a directory without segments, are not read: the index is rebuilt)."""
    return index_dir / f"{case_id}-{records_version}.tfidf"


def legacy_index_path(index_dir: Path, case_id: str, records_version: str) -> Path:
    """Where releases before the segmented index kept it: one ``.npz`` file."""
    return index_dir / f"{case_id}-{records_version}.npz"


def clear_index_cache() -> None:
    """Forget every opened index (tests; a long-lived process that wants its memory back)."""
    _opened.clear()


def _open_cached(path: Path) -> SegmentedIndex | None:
    """The index at ``path`` from the cache or memory-mapped from disk; None if unreadable."""
    from eval_pipelines.core.text.segments import load_segmented_index

    cached = _opened.get(path)
    if cached is not None:
        return cached
    identity = file_identity(path)
    if identity is None:
        return None
    try:
        index = load_segmented_index(path)
    except (OSError, ValueError):
        # Missing files or a foreign format: treated like no index, so it is rebuilt.
        return None
    _opened.put(path, identity, index)
    return index


def open_index(
    index_dir: Path, case_id: str, records_version: str, *, n_docs: int
) -> IndexHandle | None:
    """The cached index of this records version if it is there and covers ``n_docs``
    records, from this process's cache or memory-mapped from disk (first brought up to date
    from the shared bucket, when the folder mirrors one); None otherwise."""
    path = index_path(index_dir, case_id, records_version)
    started = time.perf_counter()
    shared_files.refresh(path)
    index = _open_cached(path)
    if index is None or index.n_docs != n_docs:
        return None
    return IndexHandle(index, path, built=False, seconds=time.perf_counter() - started)


def open_or_build_index(
    index_dir: Path,
    case_id: str,
    records_version: str,
    *,
    n_docs: int,
    texts: Callable[[], list[str]],
    segment_docs: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> IndexHandle:
    """Open the cached index of this records version, or build and cache it.

    ``texts`` is called only to build, so a step that finds the index reads no record; it
    must return the version's ``n_docs`` texts in ``record_key`` order. The version pins the
    content, so a cached index that covers as many records always matches them. The returned
    index is memory-mapped from disk either way. ``segment_docs`` (default: the segments
    module's) and ``progress`` are handed to
    :func:`~eval_pipelines.core.text.segments.write_segmented_index`.
    """
    from eval_pipelines.core.text.segments import DEFAULT_SEGMENT_DOCS, write_segmented_index

    found = open_index(index_dir, case_id, records_version, n_docs=n_docs)
    if found is not None:
        return found
    path = index_path(index_dir, case_id, records_version)
    started = time.perf_counter()
    index_dir.mkdir(parents=True, exist_ok=True)
    write_segmented_index(
        texts(), path, segment_docs=segment_docs or DEFAULT_SEGMENT_DOCS, progress=progress
    )
    # The same version's index in the format before memory-mapped segments is never read
    # again: removed, or it would hold its disk space (0.3 GB at 130k records) for good.
    legacy_index_path(index_dir, case_id, records_version).unlink(missing_ok=True)
    shared_files.publish(path)
    return IndexHandle(_reopen(path), path, built=True, seconds=time.perf_counter() - started)


def _reopen(path: Path) -> SegmentedIndex:
    """A freshly saved index, memory-mapped from disk so that every caller searches the same
    shared, read-only pages."""
    from eval_pipelines.core.text.segments import load_segmented_index

    identity = file_identity(path)
    index = load_segmented_index(path)
    _opened.put(path, identity, index)
    return index


def load_or_build_index(
    index_dir: Path,
    case_id: str,
    records_version: str,
    texts: list[str],
    *,
    segment_docs: int | None = None,
) -> IndexHandle:
    """Load the cached index for this records version, or build and cache it.

    ``texts`` must be in ``record_key`` order (see :func:`open_or_build_index`).
    """
    return open_or_build_index(
        index_dir,
        case_id,
        records_version,
        n_docs=len(texts),
        texts=lambda: texts,
        segment_docs=segment_docs,
    )


def records_index(
    open_warehouse: OpenWarehouse,
    index_dir: Path,
    case_id: str,
    records_version: str,
    *,
    n_records: int,
    progress: Callable[[int, int], None] | None = None,
) -> IndexHandle:
    """The index of a stored records version of ``n_records`` records; the texts are read
    from the warehouse only when the index must be built (``progress`` as in
    :func:`open_or_build_index`)."""

    def texts() -> list[str]:
        with open_warehouse(read_only=True) as conn:
            return (
                cases_store.load_records(conn, case_id, records_version, columns=("text",))
                .get_column("text")
                .to_list()
            )

    return open_or_build_index(
        index_dir, case_id, records_version, n_docs=n_records, texts=texts, progress=progress
    )
