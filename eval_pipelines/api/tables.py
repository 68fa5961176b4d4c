"""Data tables for evaluate queries: load a file as a versioned table, list, show.

A file is read and validated before the warehouse is opened; the write is one transaction,
so a refused load (bad column, duplicate key, a link to a table that is not loaded, a name a
case has) leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eval_pipelines.api._shared import resolve_warehouse
from eval_pipelines.core.errors import InputError, NotFoundError
from eval_pipelines.core.evaluate.table_schema import read_table_file, validate_table
from eval_pipelines.storage import data_tables as data_tables_store
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, connect, transaction


def _info_json(info: data_tables_store.TableInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "version": info.version,
        "rows": info.n_rows,
        "columns": [{"name": name, "kind": kind} for name, kind in info.columns],
        "key": info.key,
        "links": dict(info.links),
    }


def load_table(
    name: str,
    path: Path | str,
    *,
    key: str | None = None,
    links: Mapping[str, str] | None = None,
    warehouse: Path | str | None = None,
) -> dict[str, Any]:
    """Load a Parquet, CSV, JSON Lines or JSON-array file as the current version of ``name``.

    Returns ``{name, version, rows, columns: [{name, kind}], key, links, new}``; ``new`` is
    False when identical content (same columns, key, links and rows in the same order) was
    loaded before, whose version is then reused and made current again.
    """
    data_tables_store.check_table_name(name)
    links = dict(links or {})
    for column, target in links.items():
        if not isinstance(target, str) or not data_tables_store.TABLE_NAME_PATTERN.fullmatch(
            target
        ):
            raise InputError("--link", f"{column}={target}", data_tables_store.TABLE_NAME_RULE)
    frame = validate_table(read_table_file(Path(path)), key=key, links=links)
    warehouse_path = resolve_warehouse(warehouse)
    if not warehouse_path.exists():  # no warehouse, no tables: refuse before creating one
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
    return _info_json(info) | {"new": new}


def list_tables(*, warehouse: Path | str | None = None) -> list[dict[str, Any]]:
    """Every table at its current version (none before the warehouse exists)."""
    path = resolve_warehouse(warehouse)
    if not path.exists():
        return []
    with connect(path, read_only=True, wait_seconds=CLI_WAIT_SECONDS) as conn:
        return [
            _info_json(info) | {"source": info.source, "createdAt": info.created_at.isoformat()}
            for info in data_tables_store.list_tables(conn)
        ]


def show_table(
    name: str,
    *,
    version: str | None = None,
    limit: int = 5,
    warehouse: Path | str | None = None,
) -> dict[str, Any]:
    """A table at its current version (or ``version``, a unique prefix will do): its columns,
    every stored version, and its first ``limit`` rows."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InputError("--limit", limit, "must be a whole number >= 0")
    path = resolve_warehouse(warehouse)
    if not path.exists():
        raise NotFoundError(
            f"no table named {name!r}: the warehouse {path} does not exist yet "
            "(load one with `eval-pipelines table load NAME --file PATH`)"
        )
    with connect(path, read_only=True, wait_seconds=CLI_WAIT_SECONDS) as conn:
        info = data_tables_store.table_info(conn, name, version)
        head = data_tables_store.head_version(conn, name)
        versions = data_tables_store.list_versions(conn, name)
        rows = data_tables_store.read_rows(conn, info).head(limit)
    return _info_json(info) | {
        "current": info.version == head,
        "source": info.source,
        "createdAt": info.created_at.isoformat(),
        "versions": [
            {
                "version": v.version,
                "rows": v.n_rows,
                "createdAt": v.created_at.isoformat(),
                "current": v.version == head,
            }
            for v in versions
        ],
        "firstRows": rows.to_dicts(),
    }
