"""User modules run as their files are now: the hash of a module's file, and importing it
afresh when the file changed since this process imported it (as a new process would), or,
in a step worker, when it is not the file the run's process has. Shared by the ``python``
workflow node and plug-ins, so both pin and run the same code the same way."""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

HASH_LENGTH = 16

_IMPORTED: dict[str, str] = {}  # module name -> hash of the file this process imported


def file_hash(module: ModuleType) -> str:
    """The first :data:`HASH_LENGTH` hex digits of the sha256 of the module's file (a module
    without a file, a built-in, is pinned by the Python version). Raises ``OSError`` when
    the file cannot be read."""
    path = getattr(module, "__file__", None)
    if path is None:
        content = f"built-in module of Python {sys.version}".encode()
    else:
        content = Path(path).read_bytes()
    return hashlib.sha256(content).hexdigest()[:HASH_LENGTH]


def forget_if_edited(module_name: str, hash_of: Callable[[ModuleType], str]) -> None:
    """Drop the module from ``sys.modules`` when its file changed since it was imported
    here, so the next import reads it again. ``hash_of`` is the caller's :func:`file_hash`
    (each caller words an unreadable file its own way)."""
    loaded = sys.modules.get(module_name)
    if loaded is not None and module_name in _IMPORTED:
        if hash_of(loaded) != _IMPORTED[module_name]:
            del sys.modules[module_name]
            importlib.invalidate_caches()


def remember_import(module_name: str, hash_of: Callable[[ModuleType], str]) -> str:
    """Record the hash of the file the module was just imported from, and return it."""
    _IMPORTED[module_name] = hash_of(sys.modules[module_name])
    return _IMPORTED[module_name]


@dataclass(frozen=True)
class Identity:
    """Which file a module was imported from (its real path; None for a built-in) and the
    :func:`file_hash` of that file."""

    file: str | None
    sha256: str

    def where(self) -> str:
        return f"{self.file or 'a built-in module'} (sha256 {self.sha256})"


def forget_unless(module_name: str, expected: Identity) -> None:
    """Drop the module from ``sys.modules`` unless it was imported from ``expected``: the
    same file, with the same hash when it was imported (the hash now, for a module this
    process imported some other way), so the next import finds the module afresh."""
    loaded = sys.modules.get(module_name)
    if loaded is None:
        return
    imported = _IMPORTED.get(module_name)
    if imported is None:
        try:
            imported = file_hash(loaded)
        except OSError:
            imported = ""
    if Identity(real_path(loaded), imported) != expected:
        del sys.modules[module_name]
        importlib.invalidate_caches()


def real_path(module: ModuleType) -> str | None:
    """The real path of the module's file (symbolic links resolved); None for a built-in."""
    path = getattr(module, "__file__", None)
    return None if path is None else os.path.realpath(path)
