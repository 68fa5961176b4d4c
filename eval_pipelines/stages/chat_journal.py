"""The chat calls' journal: each answer appended to a file the moment it arrives, before the
warehouse has it, so a process killed with answers not yet in the warehouse loses none of them.

A batch of calls keeps one journal, ``<warehouse>.chat-journal/<pid>-<random>.jsonl``: one line
per answered call, the JSON of its :class:`~eval_pipelines.storage.chat_cache.CachedCall` (the
request key, endpoint, model, trial, the answer's text and the tokens reported; never the API
key, which no cached row holds). A line is one ``write`` to a file opened ``O_APPEND``, with
no ``fsync``: what a process wrote is in the kernel's page cache and survives the process's
``kill -9``; only a machine crash could lose it, and then what is lost is answers to pay for
again, never a wrong one (a torn or garbled line is skipped). An ``fsync`` per answer would
cost a disk flush per call for that case alone.

The batch holds an exclusive ``flock`` on its journal while it is alive; the kernel releases
it when the process ends, even by ``kill -9`` (as for the endpoint slots,
:mod:`~eval_pipelines.stages.endpoint_slots`). :func:`load_left_journals` stores into the
warehouse every journal whose lock it can take (its batch is gone) and deletes it; a journal
whose lock is held belongs to a batch still running and is left alone. Storing is idempotent
(a key already cached is kept as it was), so a journal loaded twice stores each answer once.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import logging
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import duckdb

from eval_pipelines.settings import WarehouseLocation, chat_journal_dir
from eval_pipelines.storage.chat_cache import CachedCall, store_calls

log = logging.getLogger(__name__)

_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "key": (str,),
    "endpoint": (str,),
    "model": (str,),
    "trial": (int,),
    "response_text": (str, type(None)),
    "input_tokens": (int,),
    "output_tokens": (int,),
}


def journal_directory(warehouse: WarehouseLocation) -> Path:
    """Where the journals of ``warehouse``'s chat calls are (:func:`settings.chat_journal_dir`:
    beside a DuckDB file itself, whichever path or link names it; a local folder of this
    machine for a PostgreSQL warehouse)."""
    return chat_journal_dir(warehouse)


def _still_at(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (another process may have loaded
    and deleted it between our open and our lock)."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


class ChatJournal:
    """One batch's journal, locked while it is open: :meth:`append` from any thread, then
    :meth:`remove` once every answer is in the warehouse, or :meth:`leave` it for the next
    batch to load."""

    def __init__(self, warehouse: WarehouseLocation) -> None:
        directory = journal_directory(warehouse)
        directory.mkdir(parents=True, exist_ok=True)
        while True:
            path = directory / f"{os.getpid()}-{uuid.uuid4().hex}.jsonl"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o666)
            # Blocking: only a loader can hold it, for the instant of finding it empty.
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _still_at(fd, path):
                break
            os.close(fd)  # a loader took the new, empty file away before the lock: again
        self.path = path
        self._fd: int | None = fd
        self._writing = threading.Lock()

    def append(self, call: CachedCall) -> None:
        """Add one answered call, written through to the kernel before returning."""
        line = (json.dumps(dataclasses.asdict(call), separators=(",", ":")) + "\n").encode()
        with self._writing:
            if self._fd is None:
                raise RuntimeError(f"the chat journal {self.path} is closed")
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view) :]

    def remove(self) -> None:
        """Delete the journal (every answer in it is in the warehouse), then let go of it."""
        with self._writing:
            if self._fd is None:
                return
            self.path.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = None

    def leave(self) -> None:
        """Let go of the journal, keeping it for the next batch on this warehouse to load."""
        with self._writing:
            if self._fd is None:
                return
            os.close(self._fd)
            self._fd = None


def _call_from_line(line: bytes) -> CachedCall | None:
    try:
        fields: Any = json.loads(line)
    except ValueError:
        return None
    if not isinstance(fields, dict) or fields.keys() != _FIELD_TYPES.keys():
        return None
    for name, types in _FIELD_TYPES.items():
        value = fields[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return None
    return CachedCall(**fields)


def read_journal(data: bytes, path: Path) -> list[CachedCall]:
    """The calls in a journal's bytes: a last line without its newline (the process was killed
    while writing it) is skipped silently, any other line that is not a cached call with a
    warning (a machine crash can leave such lines, the journal not being fsynced)."""
    lines = data.split(b"\n")
    torn = lines.pop()  # empty when the file ends with a newline
    if torn:
        log.info("chat journal %s: skipped its last line, cut short by the kill", path)
    calls = []
    for number, line in enumerate(lines, start=1):
        call = _call_from_line(line)
        if call is None:
            log.warning("chat journal %s: line %d is not a cached call, skipped", path, number)
        else:
            calls.append(call)
    return calls


def load_left_journals(conn: duckdb.DuckDBPyConnection, warehouse: WarehouseLocation) -> int:
    """Store in ``conn`` (``warehouse``'s) the answers of every journal its batch left behind
    (killed), deleting each once stored; journals of batches still running are not touched.
    Returns how many answers were read."""
    directory = journal_directory(warehouse)
    loaded = 0
    for path in sorted(directory.glob("*.jsonl")):
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue  # loaded by another batch meanwhile
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its batch is alive
            if not _still_at(fd, path):
                continue
            with os.fdopen(os.dup(fd), "rb") as journal:
                calls = read_journal(journal.read(), path)
            store_calls(conn, calls)
            loaded += len(calls)
            path.unlink()
            log.info("chat journal %s: %d answers stored in the warehouse", path, len(calls))
        finally:
            os.close(fd)
    return loaded
