"""A per-process cache of what was read from files (memory-mapped indexes and vectors), valid
while each file is still the one it was read from."""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")


class OpenedFiles(Generic[T]):
    """What was read from files in this process, served again while each file is the one it
    was read from (same inode and mtime: files are replaced by renaming a new one into place),
    so steps that run one after another in one process map an index or vectors once. The
    ``size`` most recently used entries are kept; evicted memory maps close once no caller
    holds them."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[Path, tuple[tuple[int, int], T]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: Path) -> T | None:
        identity = file_identity(path)
        with self._lock:
            entry = self._entries.get(path)
            if entry is None or identity is None or entry[0] != identity:
                return None
            self._entries.move_to_end(path)
            return entry[1]

    def put(self, path: Path, identity: tuple[int, int] | None, value: T) -> None:
        """Remember ``value``, read from ``path`` when it had ``identity``."""
        if identity is None:
            return
        with self._lock:
            self._entries[path] = (identity, value)
            self._entries.move_to_end(path)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def file_identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_mtime_ns
