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
