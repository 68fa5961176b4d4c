"""The text index of a case's records version: built once, cached on disk, reused by every
evaluation of that version. The numeric kernels are imported on first use, so importing this
module (as the Dagster definitions do) compiles nothing.

On disk the index is a directory of ``.npy`` files that loading memory-maps read-only
(milliseconds, pages shared between processes); in a process, opened indexes are kept in a
small cache, so stages that run one after another in the same process do not reopen them."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eval_pipelines.core.text.retrieval import TextIndex

# Opened indexes kept per process. A handful covers the records versions one run touches;
# evicted ones are unmapped once no caller holds them.
_CACHE_SIZE = 4
# path -> ((inode, mtime in ns) of the directory when opened, index). A rebuilt index is a
# new directory renamed into place, so its identity differs and the stale entry is ignored.
_cache: OrderedDict[Path, tuple[tuple[int, int], TextIndex]] = OrderedDict()
_cache_lock = threading.Lock()


@dataclass(frozen=True)
class IndexHandle:
    index: TextIndex
    path: Path
    built: bool
    seconds: float


def index_path(index_dir: Path, case_id: str, records_version: str) -> Path:
    """Directory of the index of one records version (indexes of the older ``.npz`` format
    sit under another name and are ignored: the index is rebuilt next to them)."""
    return index_dir / f"{case_id}-{records_version}.tfidf"


def clear_index_cache() -> None:
    """Forget every opened index (tests; a long-lived process that wants its memory back)."""
    with _cache_lock:
        _cache.clear()


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def _open_cached(path: Path) -> TextIndex | None:
    """The index at ``path`` from the cache or memory-mapped from disk; None if unreadable."""
    from eval_pipelines.core.text.retrieval import load_text_index

    identity = _identity(path)
    if identity is None:
        return None
    with _cache_lock:
        entry = _cache.get(path)
        if entry is not None and entry[0] == identity:
            _cache.move_to_end(path)
            return entry[1]
    try:
        index = load_text_index(path)
    except (OSError, ValueError):
        # Missing files or a foreign format: treated like no index, so it is rebuilt.
        return None
    _remember(path, identity, index)
    return index


def _remember(path: Path, identity: tuple[int, int], index: TextIndex) -> None:
    with _cache_lock:
        _cache[path] = (identity, index)
        _cache.move_to_end(path)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


def load_or_build_index(
    index_dir: Path, case_id: str, records_version: str, texts: list[str]
) -> IndexHandle:
    """Load the cached index for this records version, or build and cache it.

    ``texts`` must be in ``record_key`` order; the version pins the content, so a cached index
    always matches the records it was built from. The returned index is memory-mapped from
    disk either way.
    """
    from eval_pipelines.core.text.retrieval import (
        build_text_index,
        load_text_index,
        save_text_index,
    )
    from eval_pipelines.core.text.vectorize import fit_transform

    path = index_path(index_dir, case_id, records_version)
    started = time.perf_counter()
    index = _open_cached(path)
    if index is not None and index.n_docs == len(texts):
        return IndexHandle(index, path, built=False, seconds=time.perf_counter() - started)
    _, matrix = fit_transform(texts)
    index_dir.mkdir(parents=True, exist_ok=True)
    save_text_index(build_text_index(matrix), path)
    # Reopened from disk so that every caller searches the same shared, read-only pages.
    identity = _identity(path)
    index = load_text_index(path)
    if identity is not None:
        _remember(path, identity, index)
    return IndexHandle(index, path, built=True, seconds=time.perf_counter() - started)
