"""Measure what opening the PostgreSQL warehouse costs a process (issue 30, section 5).

Run from the repository root::

    nice .venv/bin/python benchmarks/warehouse_connect.py [--connects 50] [--workdir DIR]

Starts a PostgreSQL server from the installed wheel on 127.0.0.1 and a database owned by its own
role, then times ``--connects`` rounds of ``warehouse.connect`` plus one small query
(``SELECT count(*) FROM cases``) in this process, read-only and read-write in turn: the first
round (it creates the warehouse: the extension loaded, the database attached, the schema
created) and the median of the others. For comparison, the same rounds on a DuckDB file.

Prints ``name: value`` lines.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from figures import line

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_pipelines.postgres_local.server import stop  # noqa: E402
from eval_pipelines.settings import (  # noqa: E402
    WAREHOUSE_PASSWORD_ENV,
    WarehouseLocation,
    parse_warehouse,
)
from eval_pipelines.storage import warehouse  # noqa: E402
from eval_pipelines_tests.helpers.postgres import create_database, start_server  # noqa: E402


def rounds(location: WarehouseLocation, count: int) -> list[float]:
    """Seconds of each connect + one small query, in this process: the first creates the
    warehouse, the others alternate read-only and read-write connections."""
    seconds = []
    for index in range(count):
        began = time.perf_counter()
        with warehouse.connect(location, read_only=index % 2 == 1, create=index == 0) as conn:
            conn.execute("SELECT count(*) FROM cases").fetchall()
        seconds.append(time.perf_counter() - began)
    return seconds


def report(name: str, seconds: list[float]) -> None:
    line(f"{name}: first connect + query (s)", seconds[0])
    line(f"{name}: median of the next {len(seconds) - 1} (s)", statistics.median(seconds[1:]))
    line(f"{name}: total of {len(seconds)} (s)", sum(seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connects", type=int, default=50)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    root = args.workdir or Path(tempfile.mkdtemp(prefix="warehouse-connect-"))
    line("load average (1 min)", os.getloadavg()[0])
    report("DuckDB file", rounds(root / "warehouse.duckdb", args.connects))
    server = start_server(root / "postgres")
    try:
        database = create_database(server, "bench_connect", own_role=True)
        os.environ[WAREHOUSE_PASSWORD_ENV] = database.password
        report("PostgreSQL", rounds(parse_warehouse(database.url), args.connects))
    finally:
        stop(server.data_dir, mode="immediate")
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
