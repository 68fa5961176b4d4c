"""The four warehouse candidates of issue 30, each able to take a fresh empty schema, replay a
workload step's transactions and run the report reads.

Three go through DuckDB and run the project's own SQL (``storage/``'s functions, its
``insert_frame`` and ``transaction``) on a connection whose default catalog is the target: the
DuckDB file, PostgreSQL attached with DuckDB's ``postgres`` extension, DuckLake with its catalog
in PostgreSQL and its Parquet files in a local folder. The fourth talks to PostgreSQL with
psycopg2: writes by ``COPY``, reads fetched by ``COPY ... TO STDOUT`` into polars, which does the
joins and aggregations the project's SQL does in DuckDB.

A workload step's transactions run on one connection and the report reads share one: opening
a connection (for ATTACH: loading the extension, attaching, reading the catalog) is measured on
its own (:meth:`DuckDBCandidate.open_once`), since the stages open one per asset and a shared
warehouse would keep them open. PostgreSQL clients read the password from ``PGPASSWORD``; no
conninfo here holds one.
"""

from __future__ import annotations

import io
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import duckdb_ext
import polars as pl
import psycopg2
import pyarrow as pa

from eval_pipelines.storage import golden as golden_store
from eval_pipelines.storage import holdout as holdout_store
from eval_pipelines.storage import lift as lift_store
from eval_pipelines.storage.frames import insert_frame
from eval_pipelines.storage.schema import migrate
from eval_pipelines.storage.warehouse import transaction

EXTENSIONS = Path(duckdb_ext.__path__[0]) / "extensions"


@dataclass(frozen=True)
class Write:
    """One table's rows in a transaction; ``replaced_by`` is the column whose values the
    transaction deletes first (the stage replaces those rows)."""

    table: str
    rows: pa.Table
    replaced_by: str | None


@dataclass(frozen=True)
class Transaction:
    """What one of a stage's transactions writes, table by table."""

    writes: tuple[Write, ...]
    # The lift ingest reads the file's requests back and recounts each day from the stored
    # rows inside its transaction: the idempotence check and the day cells it replaces.
    checks_requests: bool = False


@dataclass(frozen=True)
class Keys:
    """The ids the report reads ask for, taken from the captured rows."""

    eval_id: str
    case_id: str
    records_version: str
    golden_run_id: str


def quiet(conn: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """``conn`` without DuckDB's progress bar (it draws on stderr for the long scans)."""
    conn.execute("SET enable_progress_bar = false")
    return conn


def load_extensions(conn: duckdb.DuckDBPyConnection) -> None:
    """The postgres and ducklake extensions from the installed wheels: DuckDB cannot download
    one at run time on these machines."""
    quiet(conn)
    conn.execute(f"SET extension_directory = '{EXTENSIONS}'")
    conn.execute("LOAD postgres_scanner")
    conn.execute("LOAD ducklake")


def migrate_through_attach(conn: duckdb.DuckDBPyConnection) -> None:
    """The numbered migrations on the attached PostgreSQL database (the default catalog of
    ``conn``), with the project's own dialect step (storage/schema.py)."""
    (catalog,) = conn.execute("SELECT current_database()").fetchone() or ("",)
    migrate(conn, postgres_catalog=catalog)


def _distinct(rows: pa.Table, column: str) -> list[Any]:
    return pl.from_arrow(rows.select([column])).to_series().unique().to_list()  # type: ignore[union-attr]


def _requests(txn: Transaction) -> pl.DataFrame:
    (events,) = [w.rows for w in txn.writes if w.table == "lift_events"]
    return pl.from_arrow(events.select(["workspace_id", "request_id"]))  # type: ignore[return-value]


def _days(txn: Transaction) -> list[Any]:
    (events,) = [w.rows for w in txn.writes if w.table == "lift_events"]
    return sorted(_distinct(events, "day"))


class DuckDBCandidate(ABC):
    """A candidate reached through DuckDB: ``connect`` yields a connection whose default
    catalog is the warehouse."""

    name: str

    @abstractmethod
    def prepare(self, rep: str) -> None:
        """Make a fresh, empty warehouse with every table (``rep`` names it)."""

    @abstractmethod
    def connect(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]: ...

    def open_once(self) -> None:
        """Open a connection and read one table (ATTACH reads the catalog lazily)."""
        with self.connect() as conn:
            conn.execute("SELECT count(*) FROM cases").fetchone()

    def write(self, conn: duckdb.DuckDBPyConnection, txn: Transaction) -> None:
        with transaction(conn):
            if txn.checks_requests:
                lift_store.stored_requests(conn, _requests(txn))
                for day in _days(txn):
                    lift_store.events(conn, day=day)
            for write in txn.writes:
                if write.replaced_by is not None:
                    for value in _distinct(write.rows, write.replaced_by):
                        conn.execute(
                            f"DELETE FROM {write.table} WHERE {write.replaced_by} = ?", [value]
                        )
                columns = ", ".join(write.rows.column_names)
                insert_frame(
                    conn,
                    f"INSERT INTO {write.table} ({columns}) SELECT {columns} FROM incoming_frame",
                    pl.from_arrow(write.rows),  # type: ignore[arg-type]
                )

    def reads(self, conn: duckdb.DuckDBPyConnection, keys: Keys) -> dict[str, Callable[[], int]]:
        """The report stages' heaviest reads, through the storage modules' own SQL; each
        returns how many rows (or the count) it read."""

        def run(read: Callable[[duckdb.DuckDBPyConnection], Any]) -> Callable[[], int]:
            def once() -> int:
                result = read(conn)
                return result if isinstance(result, int) else len(result)

            return once

        return {
            "predictions": run(lambda c: holdout_store.load_predictions(c, keys.eval_id)),
            "sample_labels": run(
                lambda c: holdout_store.sample_labels(
                    c, keys.eval_id, keys.case_id, keys.records_version
                )
            ),
            "evidence_inside_leave_out": run(
                lambda c: holdout_store.evidence_inside_leave_out(c, keys.eval_id)
            ),
            "lift_events": run(lambda c: lift_store.events(c)),
            "golden_results": run(lambda c: golden_store.results_of_run(c, keys.golden_run_id)),
        }

    def scalar(self, sql: str) -> int:
        with self.connect() as conn:
            row = conn.execute(sql).fetchone()
        return int(row[0]) if row else 0


class DuckDBFile(DuckDBCandidate):
    name = "duckdb_file"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def prepare(self, rep: str) -> None:
        self.path = self.folder / f"warehouse-{rep}.duckdb"
        self.path.unlink(missing_ok=True)
        conn = duckdb.connect(str(self.path))
        migrate(conn)
        conn.close()

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        conn = quiet(duckdb.connect(str(self.path)))
        try:
            yield conn
        finally:
            conn.close()


class PostgresAttach(DuckDBCandidate):
    name = "postgres_attach"

    def __init__(self, new_database: Callable[[str], str]) -> None:
        self.new_database = new_database

    def prepare(self, rep: str) -> None:
        self.conninfo = self.new_database(f"attach_{rep}")
        with self.connect() as conn:
            migrate_through_attach(conn)

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        conn = duckdb.connect()
        try:
            load_extensions(conn)
            conn.execute(f"ATTACH '{self.conninfo}' AS wh (TYPE postgres)")
            conn.execute("USE wh")
            yield conn
        finally:
            conn.close()


class DuckLake(DuckDBCandidate):
    """Tables created from the migrated schema of an empty DuckDB file, without the primary keys
    and unique constraints DuckLake does not support."""

    name = "ducklake"

    def __init__(self, new_database: Callable[[str], str], folder: Path) -> None:
        self.new_database = new_database
        self.folder = folder

    def prepare(self, rep: str) -> None:
        self.conninfo = self.new_database(f"lake_{rep}")
        self.data_path = self.folder / f"lake-{rep}"
        self.data_path.mkdir(parents=True, exist_ok=True)
        schema = self.folder / f"lake-schema-{rep}.duckdb"
        schema.unlink(missing_ok=True)
        source = duckdb.connect(str(schema))
        migrate(source)
        source.close()
        with self.connect() as conn:
            conn.execute(f"ATTACH '{schema}' AS schema_source (READ_ONLY)")
            tables = conn.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = 'schema_source'"
            ).fetchall()
            for (table,) in tables:
                conn.execute(
                    f"CREATE TABLE {table} AS SELECT * FROM schema_source.main.{table} LIMIT 0"
                )

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        conn = duckdb.connect()
        try:
            load_extensions(conn)
            conn.execute(
                f"ATTACH 'ducklake:postgres:{self.conninfo}' AS lake "
                f"(DATA_PATH '{self.data_path}/')"
            )
            conn.execute("USE lake")
            yield conn
        finally:
            conn.close()


def csv_for_copy(rows: pa.Table) -> bytes:
    """CSV that PostgreSQL's COPY reads: nulls as ``\\N``, bytes as ``\\x`` hex (bytea)."""
    frame: pl.DataFrame = pl.from_arrow(rows)  # type: ignore[assignment]
    frame = frame.with_columns(
        (pl.lit("\\x") + pl.col(name).bin.encode("hex")).alias(name)
        for name, dtype in frame.schema.items()
        if dtype == pl.Binary
    )
    nested = [name for name, dtype in frame.schema.items() if dtype.is_nested()]
    if nested:
        raise ValueError(f"columns {nested}: the driver's COPY path writes flat columns only")
    return frame.write_csv(null_value="\\N", include_header=False).encode()


class PostgresDriver:
    """psycopg2: COPY for the writes, ``COPY (SELECT ...) TO STDOUT`` into polars for the
    reads, the project's joins and aggregations rewritten in polars. The schema is the one the
    migrations create through ATTACH (a driver would still need it)."""

    name = "postgres_driver"

    def __init__(self, new_database: Callable[[str], str], connect_kwargs: dict[str, Any]) -> None:
        self.new_database = new_database
        self.connect_kwargs = connect_kwargs

    def prepare(self, rep: str) -> None:
        self.conninfo = self.new_database(f"driver_{rep}")
        conn = duckdb.connect()
        load_extensions(conn)
        conn.execute(f"ATTACH '{self.conninfo}' AS wh (TYPE postgres)")
        conn.execute("USE wh")
        migrate_through_attach(conn)
        conn.close()
        self.database = f"driver_{rep}"

    @contextmanager
    def connect(self) -> Iterator[Any]:
        conn = psycopg2.connect(dbname=self.database, **self.connect_kwargs)
        try:
            yield conn
        finally:
            conn.close()

    def _frame(self, cursor: Any, sql: str, params: list[Any]) -> pl.DataFrame:
        """Rows of a query as a polars frame (COPY takes no parameters: psycopg2 quotes them
        into the statement)."""
        buffer = io.BytesIO()
        query = cursor.mogrify(sql, params).decode()
        cursor.copy_expert(f"COPY ({query}) TO STDOUT (FORMAT csv, HEADER)", buffer)
        buffer.seek(0)
        return pl.read_csv(buffer, infer_schema_length=None)

    def open_once(self) -> None:
        with self.connect() as conn, conn.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM cases")
            cursor.fetchone()

    def write(self, conn: Any, txn: Transaction) -> None:
        with conn.cursor() as cursor:
            if txn.checks_requests:
                requests = _requests(txn)
                cursor.execute(
                    "SELECT e.request_id, e.line, f.path, e.ts, e.outcome FROM lift_events e "
                    "LEFT JOIN lift_files f ON f.file_id = e.file_id "
                    "WHERE e.workspace_id = ANY(%s) AND e.request_id = ANY(%s)",
                    [
                        requests.get_column("workspace_id").unique().to_list(),
                        requests.get_column("request_id").to_list(),
                    ],
                )
                cursor.fetchall()
                for day in _days(txn):
                    self._day_events(cursor, day)
            for write in txn.writes:
                if write.replaced_by is not None:
                    for value in _distinct(write.rows, write.replaced_by):
                        cursor.execute(
                            f"DELETE FROM {write.table} WHERE {write.replaced_by} = %s", [value]
                        )
                columns = ", ".join(write.rows.column_names)
                cursor.copy_expert(
                    f"COPY {write.table} ({columns}) FROM STDIN (FORMAT csv, NULL '\\N')",
                    io.BytesIO(csv_for_copy(write.rows)),
                )
            conn.commit()

    def _day_events(self, cursor: Any, day: Any) -> pl.DataFrame:
        """``lift_store.events(day=...)`` rewritten: PostgreSQL has no QUALIFY; the first copy
        of each content in (file, line) order is kept in polars."""
        frame = self._frame(
            cursor,
            f"SELECT {lift_store.EVENT_COLUMNS} FROM lift_events "
            + ("WHERE day = %s" if day is not None else ""),
            [day] if day is not None else [],
        )
        content = [
            "request_id",
            "ts",
            "workspace_id",
            "cluster",
            "exposure_arm",
            "exposure_epoch",
            "claim_type",
            "situation_class",
            "source",
            "outcome",
            "artifact_key",
            "candidate",
            "baseline_head",
            "app_config",
        ]
        return (
            frame.sort("file_id", "line")
            .unique(subset=content, keep="first", maintain_order=True)
            .sort("ts", "file_id", "line")
        )

    def reads(self, conn: Any, keys: Keys) -> dict[str, Callable[[], int]]:
        def run(read: Callable[[Any], Any]) -> Callable[[], int]:
            def once() -> int:
                with conn.cursor() as cursor:
                    result = read(cursor)
                conn.rollback()  # ends the read's transaction, as a closed connection would
                return result if isinstance(result, int) else len(result)

            return once

        def predictions(cursor: Any) -> pl.DataFrame:
            return self._frame(
                cursor,
                "SELECT variant, record_key, code, confidence, route, candidates, "
                "requested_candidates, effective_candidates, memo_applied, error, tokens "
                "FROM predictions WHERE eval_id = %s",
                [keys.eval_id],
            ).sort("variant", "record_key")

        def sample_labels(cursor: Any) -> pl.DataFrame:
            sample = self._frame(
                cursor, "SELECT record_key FROM holdout_samples WHERE eval_id = %s", [keys.eval_id]
            )
            records = self._frame(
                cursor,
                "SELECT record_key, label, label_node FROM records "
                "WHERE case_id = %s AND records_version = %s",
                [keys.case_id, keys.records_version],
            )
            return sample.join(records, on="record_key")

        def evidence_inside_leave_out(cursor: Any) -> int:
            candidates = self._frame(
                cursor,
                "SELECT sample_key, evidence_key FROM candidates WHERE eval_id = %s",
                [keys.eval_id],
            )
            left_out = self._frame(
                cursor,
                "SELECT sample_key, excluded_key AS evidence_key FROM leave_out WHERE eval_id = %s",
                [keys.eval_id],
            )
            itself = candidates.filter(pl.col("sample_key") == pl.col("evidence_key")).height
            held = candidates.filter(pl.col("sample_key") != pl.col("evidence_key")).join(
                left_out.unique(), on=["sample_key", "evidence_key"], how="semi"
            )
            return itself + held.height

        def golden_results(cursor: Any) -> pl.DataFrame:
            return self._frame(
                cursor,
                "SELECT * FROM golden_results WHERE golden_run_id = %s ORDER BY case_id",
                [keys.golden_run_id],
            )

        return {
            "predictions": run(predictions),
            "sample_labels": run(sample_labels),
            "evidence_inside_leave_out": run(evidence_inside_leave_out),
            "lift_events": run(lambda cursor: self._day_events(cursor, None)),
            "golden_results": run(golden_results),
        }

    def scalar(self, sql: str) -> int:
        with self.connect() as conn, conn.cursor() as cursor:
            cursor.execute(sql)
            row = cursor.fetchone()
        return int(row[0]) if row else 0
