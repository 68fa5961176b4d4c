"""User modules run as their files are now: the hash of a module's file, and importing it
afresh when the file changed since this process imported it (as a new process would). Shared
by the ``python`` workflow node and plug-ins, so both pin and run the same code the same way."""

from __future__ import annotations

import hashlib
import importlib
import sys
from collections.abc import Callable
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


def remember_import(module_name: str, hash_of: Callable[[ModuleType], str]) -> None:
    """Record the hash of the file the module was just imported from."""
    _IMPORTED[module_name] = hash_of(sys.modules[module_name])
