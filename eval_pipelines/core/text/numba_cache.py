"""Where numba keeps the compiled kernels: a per-user cache folder unless told otherwise.

Without a cache folder numba writes next to the package (often read-only, or wiped with the
virtual environment) and every new process compiles the kernels again (about 7 s). Importing
this module, which the kernel modules do before defining their kernels, points numba at
``$NUMBA_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/eval_pipelines/numba`` (default
``~/.cache/eval_pipelines/numba``). The kernel modules are imported lazily, at first use, so
loading the Dagster definitions reads no environment and compiles nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from numba.core import config


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/eval_pipelines/numba``, or ``~/.cache/eval_pipelines/numba``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "eval_pipelines" / "numba"


def configure() -> str:
    """Set numba's cache folder unless ``NUMBA_CACHE_DIR`` already chose one; returns it."""
    if not config.CACHE_DIR:  # type: ignore[attr-defined]
        folder = default_cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        config.CACHE_DIR = str(folder)  # type: ignore[attr-defined]
    return str(config.CACHE_DIR)  # type: ignore[attr-defined]
