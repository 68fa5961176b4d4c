"""Where numba keeps the compiled kernels: a per-user cache folder unless told otherwise.

Without a cache folder numba writes next to the package (often read-only, or wiped with the
virtual environment) and every new process compiles the kernels again (docs/benchmarks.md,
"Holdout, `make bench`": the cold and the warm text index build). Importing
this module, which the kernel modules do before defining their kernels, points numba at
``$NUMBA_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/eval_pipelines/numba/<sources>`` (default
``~/.cache/eval_pipelines/numba/<sources>``). The kernel modules are imported lazily, at first
use, so loading the Dagster definitions reads no environment and compiles nothing.

``<sources>`` is a hash of every module that defines kernels. numba checks a cached kernel
against the source of its own file only, not of the kernels it calls: after an upgrade that
changed :mod:`eval_pipelines.core.text.topk_heap` alone, the search kernels would keep running the
old heap from the cache. A new folder per version of the sources makes that impossible (the
first process of a new version compiles again; ``make install`` does it).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from numba.core import config

_CORE = Path(__file__).resolve().parents[1]
KERNEL_MODULES = (
    "text/topk_heap.py",
    "text/search_kernels.py",
    "text/pruned_search.py",
    "text/row_scores.py",
    "text/vectorize.py",
    "embeddings/dense.py",
    "embeddings/ann.py",
)


def sources_fingerprint() -> str:
    """A short hash of the kernel modules' sources."""
    digest = hashlib.sha256()
    for name in KERNEL_MODULES:
        digest.update(name.encode())
        digest.update((_CORE / name).read_bytes())
    return digest.hexdigest()[:16]


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/eval_pipelines/numba/<sources>``, or the same under ``~/.cache``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "eval_pipelines" / "numba" / sources_fingerprint()


def configure() -> str:
    """Set numba's cache folder unless ``NUMBA_CACHE_DIR`` already chose one; returns it."""
    if not config.CACHE_DIR:  # type: ignore[attr-defined]
        folder = default_cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        config.CACHE_DIR = str(folder)  # type: ignore[attr-defined]
    return str(config.CACHE_DIR)  # type: ignore[attr-defined]
