"""Where things live. Read at call time (never at import), so tests and users can override."""

from __future__ import annotations

import os
from pathlib import Path

WAREHOUSE_ENV = "EVAL_PIPELINES_WAREHOUSE"
INDEX_DIR_ENV = "EVAL_PIPELINES_INDEX_DIR"
THREADS_ENV = "EVAL_PIPELINES_THREADS"
WORKFLOWS_DIR_ENV = "EVAL_PIPELINES_WORKFLOWS_DIR"
LIFT_INBOX_ENV = "EVAL_PIPELINES_LIFT_INBOX"
DEFAULT_LIFT_INBOX = Path("data") / "lift" / "inbox"
DEFAULT_WAREHOUSE = Path("data") / "warehouse.duckdb"
DEFAULT_WORKFLOWS_DIR = Path("data") / "workflows"


def warehouse_path() -> Path:
    """The DuckDB file: ``$EVAL_PIPELINES_WAREHOUSE`` or ``data/warehouse.duckdb``."""
    return Path(os.environ.get(WAREHOUSE_ENV) or DEFAULT_WAREHOUSE).absolute()


def index_dir(warehouse: Path) -> Path:
    """Neighbour-index cache: ``$EVAL_PIPELINES_INDEX_DIR`` or ``indexes/`` beside the warehouse."""
    configured = os.environ.get(INDEX_DIR_ENV)
    return Path(configured).absolute() if configured else warehouse.parent / "indexes"


def thread_count() -> int:
    """Threads for numeric kernels: ``$EVAL_PIPELINES_THREADS`` or all cores."""
    configured = os.environ.get(THREADS_ENV)
    return max(1, int(configured)) if configured else max(1, os.cpu_count() or 1)


def workflows_dir() -> Path:
    """Committed workflow files: ``$EVAL_PIPELINES_WORKFLOWS_DIR`` or ``data/workflows``."""
    return Path(os.environ.get(WORKFLOWS_DIR_ENV) or DEFAULT_WORKFLOWS_DIR).absolute()


def lift_inbox() -> Path:
    """The folder the lift sensor watches for log files: ``$EVAL_PIPELINES_LIFT_INBOX`` or
    ``data/lift/inbox``."""
    return Path(os.environ.get(LIFT_INBOX_ENV) or DEFAULT_LIFT_INBOX).absolute()


SHARED_DIR_ENV = "EVAL_PIPELINES_SHARED_DIR"
SHARED_CACHE_ENV = "EVAL_PIPELINES_SHARED_CACHE"


def shared_dir() -> str | None:
    """Where runs on every machine find the index files and step payloads:
    ``$EVAL_PIPELINES_SHARED_DIR``, a folder or ``s3://bucket/prefix``; None (the default):
    indexes beside the warehouse and payloads in the instance's folder, as on one machine."""
    return os.environ.get(SHARED_DIR_ENV) or None


def shared_cache_dir() -> Path:
    """This machine's copies of index files kept on S3: ``$EVAL_PIPELINES_SHARED_CACHE`` or
    ``eval_pipelines/shared`` in the user's cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``)."""
    configured = os.environ.get(SHARED_CACHE_ENV)
    if configured:
        return Path(configured).absolute()
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home).absolute() / "eval_pipelines" / "shared"
