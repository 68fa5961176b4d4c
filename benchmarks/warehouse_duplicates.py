"""Two writers ingesting the same lift requests at once, each in its own process: does the
backend keep one row per request id?

Each writer opens a transaction, reads ``lift_events`` (so its snapshot predates the other's
commit, as two ingests started together on two machines would), waits for the other, inserts
the requests it does not see stored (the anti-join an idempotent ingest needs where no
constraint exists), waits for the other's insert (a bounded wait: the other may be blocked by a
unique index until this one commits), then commits. Reported: which writers committed, the
first line of each refusal, the rows stored and how many are duplicates.
"""

from __future__ import annotations

import io
import multiprocessing
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import psycopg2
from warehouse_candidates import csv_for_copy, load_extensions

WRITERS = 2
# Long enough for both writers to reach the same point; a writer blocked by a unique index
# never arrives, and the other commits when the wait ends.
MEET_SECONDS = 5.0
INSERT_ANTI_JOIN = (
    "INSERT INTO lift_events ({columns}) SELECT {columns} FROM {incoming} i WHERE NOT EXISTS "
    "(SELECT 1 FROM lift_events e WHERE e.workspace_id = i.workspace_id "
    "AND e.request_id = i.request_id)"
)
UNIQUE_REQUEST = (
    "CREATE UNIQUE INDEX lift_events_one_row_per_request ON lift_events (workspace_id, request_id)"
)


@dataclass(frozen=True)
class Race:
    """What two writers left behind: per writer ``committed`` or its refusal; rows stored and
    the duplicates among them (rows beyond one per request)."""

    label: str
    outcomes: tuple[str, ...]
    rows: int
    duplicates: int


def _meet(barrier: Any) -> None:
    try:
        barrier.wait(MEET_SECONDS)
    except threading.BrokenBarrierError:
        pass


def _duckdb_writer(attach: str, rows_file: str, barrier: Any) -> str:
    conn = duckdb.connect()
    try:
        load_extensions(conn)
        conn.execute(attach)
        conn.execute("USE target")
        columns = ", ".join(c for c in conn.execute("FROM lift_events LIMIT 0").pl().columns)
        conn.execute("BEGIN TRANSACTION")
        conn.execute("SELECT count(*) FROM lift_events").fetchone()
        _meet(barrier)
        incoming = f"read_parquet('{rows_file}')"
        conn.execute(INSERT_ANTI_JOIN.format(columns=columns, incoming=incoming))
        _meet(barrier)
        conn.execute("COMMIT")
        return "committed"
    except duckdb.Error as error:
        return "refused: " + str(error).splitlines()[0]
    finally:
        conn.close()


def _driver_writer(connect_kwargs: dict[str, Any], rows_file: str, barrier: Any) -> str:
    rows = pl.read_parquet(rows_file)
    conn = psycopg2.connect(**connect_kwargs)
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM lift_events")
            _meet(barrier)
            cursor.execute("CREATE TEMP TABLE incoming (LIKE lift_events) ON COMMIT DROP")
            cursor.copy_expert(
                f"COPY incoming ({', '.join(rows.columns)}) FROM STDIN (FORMAT csv, NULL '\\N')",
                io.BytesIO(csv_for_copy(rows.to_arrow())),
            )
            columns = ", ".join(rows.columns)
            cursor.execute(INSERT_ANTI_JOIN.format(columns=columns, incoming="incoming"))
            _meet(barrier)
        conn.commit()
        return "committed"
    except psycopg2.Error as error:
        return "refused: " + str(error).splitlines()[0]
    finally:
        conn.close()


def _writer(kind: str, target: Any, rows_file: str, barrier: Any, results: Any) -> None:
    if kind == "driver":
        results.put(_driver_writer(target, rows_file, barrier))
    else:
        results.put(_duckdb_writer(target, rows_file, barrier))


def race(label: str, kind: str, target: Any, rows_file: Path, count: Callable[[str], int]) -> Race:
    """Start :data:`WRITERS` processes writing ``rows_file``'s requests to ``target`` (an
    ATTACH statement naming the database ``target``, or psycopg2's connect arguments for
    ``kind="driver"``); ``count(sql)`` reads the result afterwards."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(WRITERS), context.Queue()
    writers = [
        context.Process(target=_writer, args=(kind, target, str(rows_file), barrier, results))
        for _ in range(WRITERS)
    ]
    for writer in writers:
        writer.start()
    outcomes = tuple(sorted(results.get(timeout=120) for _ in writers))
    for writer in writers:
        writer.join()
    rows = count("SELECT count(*) FROM lift_events")
    distinct = count(
        "SELECT count(*) FROM (SELECT DISTINCT workspace_id, request_id FROM lift_events)"
    )
    return Race(label, outcomes, rows, rows - distinct)
