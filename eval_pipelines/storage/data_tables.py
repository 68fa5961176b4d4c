"""Data tables: every loaded version of each table, and the head naming the current one.

A version is the content hash of the table's columns, key, links and rows in order
(:func:`~eval_pipelines.core.queries.table_schema.table_version`); loading identical content
again reuses it. Each version's rows live in a DuckDB table of their own, named from the
version's hex digits only (``data_rows_<16 hex>``), with ``__position`` giving the row order.
Versions are never deleted: an evaluation keeps reading the version it resolved to.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import duckdb
import polars as pl

from eval_pipelines.core.errors import InputError, NotFoundError
from eval_pipelines.core.queries.source import Source
from eval_pipelines.core.queries.table_schema import table_columns, table_version
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage.frames import INCOMING

TABLE_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
TABLE_NAME_RULE = (
    "a table name is 1-63 characters: a lowercase letter, then lowercase letters, digits or '_'"
)
POSITION = "__position"
CASE_COLUMNS = ("record_key", "text", "label")
_STORAGE_TABLE = re.compile(r"^data_rows_[0-9a-f]{16,64}$")
_INFO_COLUMNS = (
    "name, version, n_rows, columns_json, key_column, links_json, source, storage_table, created_at"
)


@dataclass(frozen=True)
class TableInfo:
    """One stored version of a data table."""

    name: str
    version: str
    n_rows: int
    columns: tuple[tuple[str, str], ...]  # (name, kind) in table order
    key: str | None
    links: dict[str, str]
    source: str | None
    storage_table: str
    created_at: datetime

    def kind_of(self, column: str) -> str | None:
        return dict(self.columns).get(column)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def check_table_name(name: str) -> str:
    """Refuse a name a query's ``from`` could not use unambiguously."""
    if not isinstance(name, str) or not TABLE_NAME_PATTERN.fullmatch(name):
        raise InputError("table", name, TABLE_NAME_RULE)
    return name


def missing_link_target(column: str, table: str) -> InputError:
    """The refusal of a link to a table that is not loaded."""
    return InputError(
        "links",
        f"{column}={table}",
        f"no table named {table!r}; load it first (with `key` naming its key column)",
    )


def _info(row: tuple[Any, ...]) -> TableInfo:
    return TableInfo(
        name=row[0],
        version=row[1],
        n_rows=int(row[2]),
        columns=tuple((name, kind) for name, kind in json.loads(row[3])),
        key=row[4],
        links=dict(json.loads(row[5])),
        source=row[6],
        storage_table=row[7],
        created_at=row[8],
    )


def _head_version(conn: duckdb.DuckDBPyConnection, name: str) -> str | None:
    row = conn.execute("SELECT version FROM data_table_heads WHERE name = ?", [name]).fetchone()
    return str(row[0]) if row else None


def _not_found(name: str) -> NotFoundError:
    return NotFoundError(f"no table named {name!r}; `eval-pipelines table list` lists tables")


def table_exists(conn: duckdb.DuckDBPyConnection, name: str) -> bool:
    return _head_version(conn, name) is not None


def table_info(conn: duckdb.DuckDBPyConnection, name: str, version: str | None = None) -> TableInfo:
    """A table at its current version, or at ``version`` (the full hex or a unique prefix)."""
    if version is None:
        version = _head_version(conn, name)
        if version is None:
            raise _not_found(name)
    rows = conn.execute(
        f"SELECT {_INFO_COLUMNS} FROM data_tables WHERE name = ? AND starts_with(version, ?) "
        "ORDER BY created_at",
        [name, version],
    ).fetchall()
    if not rows:
        if not table_exists(conn, name):
            raise _not_found(name)
        raise NotFoundError(
            f"table {name!r} has no version {version!r}; `eval-pipelines table show {name}` "
            "lists its versions"
        )
    exact = [row for row in rows if row[1] == version]
    if len(rows) > 1 and not exact:
        raise InputError(
            "version", version, f"matches {len(rows)} versions of {name!r}; give more digits"
        )
    return _info((exact or rows)[0])


def list_tables(conn: duckdb.DuckDBPyConnection) -> list[TableInfo]:
    """Every table at its current version, by name."""
    rows = conn.execute(
        "SELECT t.name, t.version, t.n_rows, t.columns_json, t.key_column, t.links_json, "
        "t.source, t.storage_table, t.created_at FROM data_tables t "
        "JOIN data_table_heads h ON h.name = t.name AND h.version = t.version ORDER BY t.name"
    ).fetchall()
    return [_info(row) for row in rows]


def list_versions(conn: duckdb.DuckDBPyConnection, name: str) -> list[TableInfo]:
    """Every stored version of a table, oldest first."""
    rows = conn.execute(
        f"SELECT {_INFO_COLUMNS} FROM data_tables WHERE name = ? ORDER BY created_at, version",
        [name],
    ).fetchall()
    if not rows:
        raise _not_found(name)
    return [_info(row) for row in rows]


def head_version(conn: duckdb.DuckDBPyConnection, name: str) -> str:
    """The version the table's head names."""
    version = _head_version(conn, name)
    if version is None:
        raise _not_found(name)
    return version


def _check_links(
    conn: duckdb.DuckDBPyConnection,
    name: str,
    columns: Mapping[str, str],
    key: str | None,
    links: Mapping[str, str],
) -> None:
    """Each link names a loaded table with a key of the link column's kind (or this table)."""
    for column, target in links.items():
        link = f"{column}={target}"
        if target == name:
            target_key, target_kind = key, columns.get(key) if key else None
        else:
            if not table_exists(conn, target):
                raise missing_link_target(column, target)
            linked = table_info(conn, target)
            target_key = linked.key
            target_kind = linked.kind_of(target_key) if target_key else None
        if target_key is None:
            raise InputError(
                "links",
                link,
                f"table {target!r} has no key column; load it with `key` naming the column "
                "its rows are identified by",
            )
        if target_kind != columns[column]:
            raise InputError(
                "links",
                link,
                f"column {column!r} is {columns[column]} but {target}.{target_key} (the key) "
                f"is {target_kind}; their values could never match",
            )


def _storage_table_for(conn: duckdb.DuckDBPyConnection, version: str) -> str:
    """``data_rows_<16 hex>``; the full digest in the (astronomically unlikely) case that the
    short name already holds another version's rows."""
    short = f"data_rows_{version[:16]}"
    taken = conn.execute(
        "SELECT count(*) FROM data_tables WHERE storage_table = ? AND version <> ?",
        [short, version],
    ).fetchone()
    return f"data_rows_{version}" if taken and taken[0] else short


def _has_storage_table(conn: duckdb.DuckDBPyConnection, storage_table: str) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [storage_table]
    ).fetchone()
    return bool(row and row[0])


def _write_rows(conn: duckdb.DuckDBPyConnection, storage_table: str, frame: pl.DataFrame) -> None:
    if not _STORAGE_TABLE.fullmatch(storage_table):  # built from hex digits only; never user input
        raise ValueError(f"not a storage table name: {storage_table!r}")
    rows = frame.with_row_index(POSITION).with_columns(pl.col(POSITION).cast(pl.Int64))
    conn.register(INCOMING, rows.to_arrow())
    try:
        conn.execute(f"CREATE TABLE {storage_table} AS SELECT * FROM {INCOMING}")
    finally:
        conn.unregister(INCOMING)


def save_table(
    conn: duckdb.DuckDBPyConnection,
    name: str,
    frame: pl.DataFrame,
    *,
    key: str | None = None,
    links: Mapping[str, str] | None = None,
    source: str | None = None,
) -> tuple[TableInfo, bool]:
    """Store this content as a version of ``name`` (unless stored already) and move the head.

    ``frame`` is a validated table
    (:func:`~eval_pipelines.core.queries.table_schema.validate_table`). Call inside a
    transaction: a refusal (a name a case has, a link to a missing or keyless table or to a
    key of another kind) then leaves nothing behind. Returns the version and whether it is new.
    """
    check_table_name(name)
    links = dict(sorted((links or {}).items()))
    if cases_store.case_exists(conn, name):
        raise InputError(
            "table",
            name,
            "a case has this name and a query's `from` would be ambiguous; choose another name",
        )
    columns = table_columns(frame)
    _check_links(conn, name, dict(columns), key, links)
    version = table_version(frame, key=key, links=links)
    row = conn.execute(
        f"SELECT {_INFO_COLUMNS} FROM data_tables WHERE name = ? AND version = ?",
        [name, version],
    ).fetchone()
    new = row is None
    now = _now()
    if row is None:
        storage_table = _storage_table_for(conn, version)
        if not _has_storage_table(conn, storage_table):  # another name may hold equal content
            _write_rows(conn, storage_table, frame)
        info = TableInfo(
            name=name,
            version=version,
            n_rows=frame.height,
            columns=columns,
            key=key,
            links=links,
            source=source,
            storage_table=storage_table,
            created_at=now,
        )
        conn.execute(
            f"INSERT INTO data_tables ({_INFO_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                info.name,
                info.version,
                info.n_rows,
                json.dumps([list(column) for column in info.columns]),
                info.key,
                json.dumps(info.links),
                info.source,
                info.storage_table,
                info.created_at,
            ],
        )
    else:
        info = _info(row)
    conn.execute(
        "INSERT INTO data_table_heads (name, version, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET version = excluded.version, "
        "updated_at = excluded.updated_at",
        [name, version, now],
    )
    return info, new


def read_rows(conn: duckdb.DuckDBPyConnection, info: TableInfo) -> pl.DataFrame:
    """A stored version's rows in position order, without ``__position``."""
    if not _STORAGE_TABLE.fullmatch(info.storage_table):
        raise ValueError(f"not a storage table name: {info.storage_table!r}")
    return conn.execute(
        f"SELECT * EXCLUDE ({POSITION}) FROM {info.storage_table} ORDER BY {POSITION}"
    ).pl()


def read_table(
    conn: duckdb.DuckDBPyConnection, name: str, version: str | None = None
) -> pl.DataFrame:
    """A table's rows (current version, or ``version``) in position order."""
    return read_rows(conn, table_info(conn, name, version))


def _as_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _case_source(conn: duckdb.DuckDBPyConnection, case_id: str) -> Source:
    """A case's current records as a table: ``record_key, text, label`` and its metadata
    columns as strings (a number as its JSON text), ordered by ``record_key``.

    A records version does not depend on the records file's row order, so key order is the
    one order every load of that version shares. A metadata column named like one of the
    three is left out (the case's own column wins).
    """
    case = cases_store.load_case(conn, case_id)
    records = cases_store.load_records(conn, case_id, case.records_version)
    metadata_columns = [c for c in case.metadata_columns if c not in CASE_COLUMNS]
    parsed = [json.loads(text) for text in records.get_column("metadata").to_list()]
    metadata = pl.DataFrame(
        {c: [_as_text(item.get(c)) for item in parsed] for c in metadata_columns},
        schema={c: pl.String for c in metadata_columns},
        orient="col",
    )
    frame = pl.concat([records.select(CASE_COLUMNS), metadata], how="horizontal")
    return Source(
        name=case_id,
        version=case.records_version,
        kind="case",
        frame=frame,
        key="record_key",
        links={},
    )


def read_source(conn: duckdb.DuckDBPyConnection, name: str) -> Source:
    """What a query's ``from: name`` reads: a loaded table at its current version, else the
    case of that name at its current records version."""
    if table_exists(conn, name):
        info = table_info(conn, name)
        return Source(
            name=name,
            version=info.version,
            kind="table",
            frame=read_rows(conn, info),
            key=info.key,
            links=dict(info.links),
        )
    if cases_store.case_exists(conn, name):
        return _case_source(conn, name)
    raise NotFoundError(
        f"no table or case named {name!r}; `eval-pipelines table list` lists tables, "
        "`case list` cases"
    )


__all__ = [
    "POSITION",
    "TABLE_NAME_PATTERN",
    "TABLE_NAME_RULE",
    "TableInfo",
    "check_table_name",
    "head_version",
    "list_tables",
    "list_versions",
    "missing_link_target",
    "read_rows",
    "read_source",
    "read_table",
    "save_table",
    "table_exists",
    "table_info",
]
