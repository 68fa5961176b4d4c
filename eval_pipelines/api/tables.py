"""Data tables for evaluate queries: load a file as a versioned table, list, show.

A file is read and validated before the warehouse is opened; the write is one transaction,
so a refused load (bad column, duplicate key, a link to a table that is not loaded, a name a
case has) leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from eval_pipelines.api._shared import resolve_warehouse
from eval_pipelines.core.errors import InputError, NotFoundError
from eval_pipelines.core.queries.table_schema import read_table_file, validate_table
from eval_pipelines.core.results import JsonResult
from eval_pipelines.storage import data_tables as data_tables_store
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, connect, transaction
from eval_pipelines.storage.warehouse import exists as warehouse_exists

__all__ = [
    "LoadedTable",
    "ListedTable",
    "ShownTable",
    "TableColumn",
    "TableSummary",
    "TableVersion",
    "list_tables",
    "load_table",
    "show_table",
]


@dataclass(frozen=True)
class TableColumn(JsonResult):
    """A column of a table and its query kind (string, integer, float, boolean, string_list)."""

    name: str
    kind: str


@dataclass(frozen=True)
class TableSummary(JsonResult):
    """What every table result starts with: name, version, rows, columns, key and links."""

    name: str
    version: str
    rows: int
    columns: tuple[TableColumn, ...]
    key: str | None
    links: Mapping[str, str]


@dataclass(frozen=True)
class LoadedTable(TableSummary):
    """A loaded table; ``new`` is False when identical content was loaded before."""

    new: bool


@dataclass(frozen=True)
class ListedTable(TableSummary):
    """A table at its current version; ``created_at`` is ISO 8601 (UTC)."""

    source: str | None
    created_at: str


@dataclass(frozen=True)
class TableVersion(JsonResult):
    """One stored version of a table."""

    version: str
    rows: int
    created_at: str
    current: bool


@dataclass(frozen=True)
class ShownTable(TableSummary):
    """A table at one version, every stored version, and its first rows (column -> value)."""

    current: bool
    source: str | None
    created_at: str
    versions: tuple[TableVersion, ...]
    first_rows: tuple[Mapping[str, object], ...]


def _columns(info: data_tables_store.TableInfo) -> tuple[TableColumn, ...]:
    return tuple(TableColumn(name, kind) for name, kind in info.columns)


def load_table(
    name: str,
    path: Path | str,
    *,
    key: str | None = None,
    links: Mapping[str, str] | None = None,
    warehouse: Path | str | None = None,
) -> LoadedTable:
    """Load a Parquet, CSV, JSON Lines or JSON-array file as the current version of ``name``.

    ``new`` is False when identical content (same columns, key, links and rows in the same
    order) was loaded before, whose version is then reused and made current again.
    """
    data_tables_store.check_table_name(name)
    links = dict(links or {})
    for column, target in links.items():
        if not isinstance(target, str) or not data_tables_store.TABLE_NAME_PATTERN.fullmatch(
            target
        ):
            raise InputError("links", f"{column}={target}", data_tables_store.TABLE_NAME_RULE)
    frame = validate_table(read_table_file(Path(path)), key=key, links=links)
    warehouse_path = resolve_warehouse(warehouse)
    if not warehouse_exists(warehouse_path):  # no warehouse, no tables: refuse before creating one
        for column, target in links.items():
            if target != name:
                raise data_tables_store.missing_link_target(column, target)
    with (
        connect(warehouse_path, create=True, wait_seconds=CLI_WAIT_SECONDS) as conn,
        transaction(conn),
    ):
        info, new = data_tables_store.save_table(
            conn, name, frame, key=key, links=links, source=str(path)
        )
    return LoadedTable(
        name=info.name,
        version=info.version,
        rows=info.n_rows,
        columns=_columns(info),
        key=info.key,
        links=dict(info.links),
        new=new,
    )


def list_tables(*, warehouse: Path | str | None = None) -> tuple[ListedTable, ...]:
    """Every table at its current version, by name (none before the warehouse exists)."""
    path = resolve_warehouse(warehouse)
    if not warehouse_exists(path):
        return ()
    with connect(path, read_only=True, wait_seconds=CLI_WAIT_SECONDS) as conn:
        return tuple(
            ListedTable(
                name=info.name,
                version=info.version,
                rows=info.n_rows,
                columns=_columns(info),
                key=info.key,
                links=dict(info.links),
                source=info.source,
                created_at=info.created_at.isoformat(),
            )
            for info in data_tables_store.list_tables(conn)
        )


def show_table(
    name: str,
    *,
    version: str | None = None,
    limit: int = 5,
    warehouse: Path | str | None = None,
) -> ShownTable:
    """A table at its current version (or ``version``, a unique prefix will do): its columns,
    every stored version, and its first ``limit`` rows."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InputError("limit", limit, "must be a whole number >= 0")
    path = resolve_warehouse(warehouse)
    if not warehouse_exists(path):
        raise NotFoundError(
            f"no table named {name!r}: the warehouse {path} does not exist yet "
            "(load one with `eval-pipelines table load NAME --file PATH`)"
        )
    with connect(path, read_only=True, wait_seconds=CLI_WAIT_SECONDS) as conn:
        info = data_tables_store.table_info(conn, name, version)
        head = data_tables_store.head_version(conn, name)
        versions = data_tables_store.list_versions(conn, name)
        rows = data_tables_store.read_rows(conn, info).head(limit)
    return ShownTable(
        name=info.name,
        version=info.version,
        rows=info.n_rows,
        columns=_columns(info),
        key=info.key,
        links=dict(info.links),
        current=info.version == head,
        source=info.source,
        created_at=info.created_at.isoformat(),
        versions=tuple(
            TableVersion(
                version=v.version,
                rows=v.n_rows,
                created_at=v.created_at.isoformat(),
                current=v.version == head,
            )
            for v in versions
        ),
        first_rows=tuple(rows.to_dicts()),
    )
