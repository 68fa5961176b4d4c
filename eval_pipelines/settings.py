"""Where things live. Read at call time (never at import), so tests and users can override."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias
from urllib.parse import unquote, urlsplit

WAREHOUSE_ENV = "EVAL_PIPELINES_WAREHOUSE"
INDEX_DIR_ENV = "EVAL_PIPELINES_INDEX_DIR"
THREADS_ENV = "EVAL_PIPELINES_THREADS"
WORKFLOWS_DIR_ENV = "EVAL_PIPELINES_WORKFLOWS_DIR"
LIFT_INBOX_ENV = "EVAL_PIPELINES_LIFT_INBOX"
DEFAULT_LIFT_INBOX = Path("data") / "lift" / "inbox"
DEFAULT_WAREHOUSE = Path("data") / "warehouse.duckdb"
DEFAULT_WORKFLOWS_DIR = Path("data") / "workflows"
# The password of a PostgreSQL warehouse: never in the URL, so never in a stored setting.
WAREHOUSE_PASSWORD_ENV = "EVAL_PIPELINES_WAREHOUSE_PASSWORD"
# A PostgreSQL warehouse's per-machine folder for chat answers not yet stored
# (stages/chat_journal.py); a DuckDB file keeps it beside itself.
CHAT_JOURNAL_DIR_ENV = "EVAL_PIPELINES_CHAT_JOURNAL_DIR"
CHAT_JOURNAL_SUFFIX = ".chat-journal"
POSTGRES_SCHEMES = ("postgresql", "postgres")
DEFAULT_POSTGRES_PORT = 5432


class SettingError(ValueError):
    """A setting holds a value its rule refuses; the message is one line naming both."""

    def __init__(self, setting: str, value: str, rule: str) -> None:
        super().__init__(f"{setting}={value!r}: {rule}")
        self.setting = setting


@dataclass(frozen=True)
class PostgresWarehouse:
    """A warehouse in a PostgreSQL database, reached over TCP as ``user``; its password is read
    from :data:`WAREHOUSE_PASSWORD_ENV` when a connection opens, never kept here."""

    host: str
    port: int
    database: str
    user: str

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.database}"

    def __str__(self) -> str:
        return self.url


# Where the warehouse lives: a DuckDB file (the default, one writer at a time) or a PostgreSQL
# database that several machines write at once.
WarehouseLocation: TypeAlias = Path | PostgresWarehouse


def parse_warehouse(text: str | Path, setting: str = WAREHOUSE_ENV) -> WarehouseLocation:
    """A DuckDB file path, or a ``postgresql://user@host:port/db`` URL (``postgres://`` too).
    A URL carrying a password is refused: the password goes in :data:`WAREHOUSE_PASSWORD_ENV`."""
    if isinstance(text, Path) or "://" not in text:
        return Path(text).absolute()
    parts = urlsplit(text)
    if parts.scheme not in POSTGRES_SCHEMES:
        raise SettingError(
            setting, text, "give a DuckDB file's path or a postgresql://user@host:port/db URL"
        )
    if parts.password is not None:
        shown = text.replace(f":{parts.password}@", ":***@")
        raise SettingError(
            setting,
            shown,
            f"the URL must not carry a password: put it in ${WAREHOUSE_PASSWORD_ENV} instead",
        )
    database = unquote(parts.path.lstrip("/"))
    try:
        port = parts.port or DEFAULT_POSTGRES_PORT
    except ValueError:
        raise SettingError(setting, text, "the port must be a number from 1 to 65535") from None
    if not parts.hostname or not parts.username or not database or "/" in database:
        raise SettingError(
            setting,
            text,
            "a PostgreSQL URL names user, host and database: postgresql://user@host:port/db",
        )
    if parts.query or parts.fragment:
        raise SettingError(setting, text, "a PostgreSQL URL takes no ?options or #fragment")
    return PostgresWarehouse(parts.hostname, port, database, unquote(parts.username))


def warehouse_location() -> WarehouseLocation:
    """The warehouse: ``$EVAL_PIPELINES_WAREHOUSE`` (a DuckDB file's path or a PostgreSQL URL)
    or ``data/warehouse.duckdb``."""
    return parse_warehouse(os.environ.get(WAREHOUSE_ENV) or str(DEFAULT_WAREHOUSE))


def single_writer(warehouse: WarehouseLocation | None = None) -> bool:
    """Whether the warehouse (default: the configured one) takes one writer at a time: a DuckDB
    file does (the ``duckdb`` pool of limit 1 serialises its runs), PostgreSQL does not."""
    return isinstance(warehouse if warehouse is not None else warehouse_location(), Path)


def index_dir(warehouse: WarehouseLocation) -> Path:
    """Neighbour-index cache: ``$EVAL_PIPELINES_INDEX_DIR``, or ``indexes/`` beside a DuckDB
    warehouse (a PostgreSQL warehouse has no folder: the setting is required)."""
    configured = os.environ.get(INDEX_DIR_ENV)
    if configured:
        return Path(configured).absolute()
    if isinstance(warehouse, PostgresWarehouse):
        raise SettingError(
            INDEX_DIR_ENV,
            "",
            f"a PostgreSQL warehouse ({warehouse}) needs ${INDEX_DIR_ENV}: "
            "the folder every machine reads the text indexes from",
        )
    return warehouse.parent / "indexes"


def chat_journal_dir(warehouse: WarehouseLocation) -> Path:
    """The folder of chat answers received but not yet stored: beside a DuckDB file; for a
    PostgreSQL warehouse ``$EVAL_PIPELINES_CHAT_JOURNAL_DIR``, else ``chat-journal/`` in the
    shared folder (``$EVAL_PIPELINES_SHARED_DIR``, when it is a folder), else
    ``data/chat-journal``. In the shared folder, a run re-executed on another machine stores
    the answers a killed worker had received instead of paying for them again; a bucket holds
    no journal (appends and locks need a file system), so it stays on each machine."""
    if isinstance(warehouse, PostgresWarehouse):
        configured = os.environ.get(CHAT_JOURNAL_DIR_ENV)
        shared = shared_dir()
        if configured:
            folder = Path(configured)
        elif shared and "://" not in shared:
            folder = Path(shared) / "chat-journal"
        else:
            folder = Path("data") / "chat-journal"
        return folder.absolute() / f"{warehouse.host}-{warehouse.port}-{warehouse.database}"
    resolved = warehouse.resolve()
    return resolved.with_name(resolved.name + CHAT_JOURNAL_SUFFIX)


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
