"""The workload the warehouse backends are measured on, produced once by the project's own code
on a DuckDB file: the demo case loaded, a 5,000 x 2 holdout evaluation, a 30,000-request lift
ingest and a golden run of 200 documents.

After each step the file is copied; a table's rows written by a step are the rows of the copy
after it that the copy before it lacks (``EXCEPT ALL``). They are stored as Parquet, one file per
step and table, with their counts and the tables' final counts in ``workload.json``, for
``warehouse_backends.py`` to replay on each candidate.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "demo"
LIFT_REQUESTS = 30_000
# The demo week's simulation gives about 2.45 requests per conversation: 1,800 conversations a
# day for 7 days is a little over 30,000 requests, cut to exactly LIFT_REQUESTS lines.
LIFT_CONVERSATIONS_PER_DAY = 1_800
GOLDEN_DOCUMENTS = 200


@dataclass(frozen=True)
class Step:
    """One workload step: the tables of each of its transactions, as the stage writes them.

    ``replaced_by`` names the column whose value a transaction deletes before inserting (the
    stages replace an evaluation's or a day's rows); the transaction of the tables
    ``per_row`` is split into one transaction per row of them (``golden add-case`` stores one
    document and one case per command)."""

    name: str
    transactions: tuple[tuple[str, ...], ...]
    replaced_by: dict[str, str]
    per_row: tuple[str, ...] = ()


# Read from the stages' ``transaction(conn)`` blocks: case.py's load, defs/holdout.py's assets
# (each its own transaction), stages/lift_ingest.ingest_file, api/golden.add_golden_case and
# stages/golden.run_golden_sets (a start, then results and the finish together). A row a step
# updates (the case's evaluation count, the golden set's case count, the golden run's status)
# is captured as it ended: replayed once, by delete and insert where a column is named.
STEPS = (
    Step(
        "case_load",
        (("cases", "records", "tree_nodes", "records_versions", "tree_versions"),),
        {},
    ),
    Step(
        "holdout_5000x2",
        (
            ("evaluations", "cases"),
            ("holdout_samples",),
            ("leave_out", "candidates", "eval_retrievals"),
            ("predictions", "variant_runs", "variant_trials"),
            ("variant_scores", "variant_level_scores"),
            ("eval_reports", "leakage_gaps"),
        ),
        {
            "cases": "case_id",
            "holdout_samples": "eval_id",
            "leave_out": "eval_id",
            "candidates": "eval_id",
            "eval_retrievals": "eval_id",
            "predictions": "eval_id",
            "variant_runs": "eval_id",
            "variant_trials": "eval_id",
            "variant_scores": "eval_id",
            "variant_level_scores": "eval_id",
            "eval_reports": "eval_id",
        },
    ),
    Step("lift_settings", (("lift_settings", "lift_workspace_cases"),), {}),
    Step(
        "lift_ingest_30000",
        (("lift_files", "lift_events", "lift_day_cells"),),
        {"lift_day_cells": "day"},
    ),
    Step(
        "golden_add_200",
        (("workflow_revisions",), ("golden_sets",), ("documents", "golden_cases")),
        {},
        per_row=("documents", "golden_cases"),
    ),
    Step(
        "golden_run_200",
        (("golden_runs",), ("step_cache", "golden_results", "golden_runs")),
        {"golden_runs": "golden_run_id"},
    ),
)

ADD_GOLDEN_CASES = """
import random, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from golden import invoice
from eval_pipelines.api import golden, workflows
workflows.save_workflow("invoices", Path(sys.argv[2]))
golden.create_set("bench", workflow="invoices", gate=True)
rng, folder = random.Random(7), Path(sys.argv[3])
for i in range(int(sys.argv[4])):
    text, labels = invoice(2000 + i, rng)
    path = folder / f"inv-{i}.txt"
    path.write_text(text)
    golden.add_golden_case("bench", document=path, labels=labels)
"""

RUN_GOLDEN = """
import sys
from pathlib import Path
from eval_pipelines.stages.golden import run_golden_sets
from eval_pipelines.storage.warehouse import connect
from eval_pipelines.api import workflows
revision = workflows.workflow_status("invoices").newest_revision.revision
def open_warehouse(read_only=False):
    return connect(Path(sys.argv[1]), read_only=read_only)
(outcome,) = run_golden_sets(open_warehouse, revision)
print(outcome.golden_run_id)
"""


def _run(command: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{command} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


def _snapshot(warehouse: Path, folder: Path, name: str) -> None:
    """A copy of the warehouse as it is now (every process that wrote it has exited, so the
    file holds every commit), made under another name first so that a copy cut short is
    never taken for a step done."""
    partial = folder / f"{name}.partial"
    shutil.copyfile(warehouse, partial)
    partial.rename(folder / f"{name}.duckdb")


def _commands(work: Path, env: dict[str, str]) -> list[tuple[str, list[list[str]]]]:
    python, cli = sys.executable, [sys.executable, "-m", "eval_pipelines.cli.main"]
    week = work / "lift_week.jsonl"
    documents = work / "invoices"
    documents.mkdir(exist_ok=True)
    return [
        (
            "case_load",
            [
                [
                    *cli,
                    *("case", "create", "icd10cm"),
                    *("--records", str(DEMO / "icd10cm_records.parquet")),
                    *("--tree", str(DEMO / "icd10cm_tree.parquet")),
                    *("--target-depth", "3,4", "--replace"),
                ]
            ],
        ),
        (
            "holdout_5000x2",
            [
                [
                    *cli,
                    *("eval", "holdout", "icd10cm"),
                    *("--variants-file", str(DEMO / "variants.json")),
                    *("--config-file", str(DEMO / "config.json")),
                    *("--sample-size", "5000", "--seed", "7", "--group-field", "group_key"),
                    "--wait",
                ]
            ],
        ),
        (
            "lift_settings",
            [
                [
                    *cli,
                    *("lift", "settings", "--workspace", "demo-ws", "--fraction", "0.10"),
                    *("--lever", "five-nearest", "--case", "icd10cm"),
                ],
                [
                    *(python, "-m", "eval_pipelines.demo.lift_week", str(week)),
                    *("--conversations-per-day", str(LIFT_CONVERSATIONS_PER_DAY)),
                ],
            ],
        ),
        ("lift_ingest_30000", [[*cli, "lift", "ingest", str(week)]]),
        (
            "golden_add_200",
            [
                [
                    *(python, "-c", ADD_GOLDEN_CASES, str(ROOT / "benchmarks")),
                    str(ROOT / "data" / "workflows" / "supplier_invoices.yaml"),
                    *(str(documents), str(GOLDEN_DOCUMENTS)),
                ]
            ],
        ),
        ("golden_run_200", [[python, "-c", RUN_GOLDEN, env["EVAL_PIPELINES_WAREHOUSE"]]]),
    ]


def _cut_week(week: Path) -> None:
    lines = week.read_text(encoding="utf-8").splitlines(keepends=True)
    if len(lines) < LIFT_REQUESTS:
        raise SystemExit(f"{week}: {len(lines)} requests, fewer than {LIFT_REQUESTS}")
    week.write_text("".join(lines[:LIFT_REQUESTS]), encoding="utf-8")


def _written(before: Path | None, after: Path, out: Path) -> dict[str, int]:
    """Store the rows ``after`` holds that ``before`` lacks, per table; their counts."""
    conn = duckdb.connect()
    conn.execute(f"ATTACH '{after}' AS after_step (READ_ONLY)")
    tables = [
        row[0]
        for row in conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = 'after_step' "
            "ORDER BY table_name"
        ).fetchall()
    ]
    if before is not None:
        conn.execute(f"ATTACH '{before}' AS before_step (READ_ONLY)")
    counts = {}
    out.mkdir(parents=True, exist_ok=True)
    for table in tables:
        if table == "schema_version":
            continue
        sql = f"SELECT * FROM after_step.{table}"
        if before is not None:
            sql += f" EXCEPT ALL SELECT * FROM before_step.{table}"
        rows = conn.execute(sql).fetch_arrow_table()
        if rows.num_rows:
            conn.register("written_rows", rows)
            conn.execute(f"COPY written_rows TO '{out / table}.parquet' (FORMAT parquet)")
            conn.unregister("written_rows")
            counts[table] = rows.num_rows
    conn.close()
    return counts


def _table_counts(warehouse: Path) -> dict[str, int]:
    """Rows of every table the workload wrote to, as the capture left them."""
    conn = duckdb.connect(str(warehouse), read_only=True)
    tables = [
        row[0]
        for row in conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE table_name <> 'schema_version'"
        ).fetchall()
    ]
    counts = {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in tables}  # type: ignore[index]
    conn.close()
    return {table: rows for table, rows in counts.items() if rows}


def capture(work: Path) -> Path:
    """Run the workload in ``work`` and store its rows under ``work / "workload"``; returns that
    folder. Reuses a capture already there, and the steps an interrupted one completed."""
    out = work / "workload"
    if (out / "workload.json").exists():
        return out
    warehouse = work / "capture.duckdb"
    env = dict(
        os.environ,
        EVAL_PIPELINES_WAREHOUSE=str(warehouse),
        EVAL_PIPELINES_INDEX_DIR=str(work / "indexes"),
        EVAL_PIPELINES_WORKFLOWS_DIR=str(work / "workflows"),
        DAGSTER_HOME=str(work / "dagster"),
        NUMBA_CACHE_DIR=str(work / "numba-cache"),
    )
    (work / "dagster").mkdir(parents=True, exist_ok=True)
    snapshots = work / "snapshots"
    snapshots.mkdir(exist_ok=True)
    previous: Path | None = None
    manifest: dict[str, dict[str, int]] = {}
    for name, commands in _commands(work, env):
        snapshot = snapshots / f"{name}.duckdb"
        if not snapshot.exists():  # else an interrupted capture ran the step already
            for command in commands:
                _run(command, env)
            if name == "lift_settings":
                _cut_week(work / "lift_week.jsonl")
            _snapshot(warehouse, snapshots, name)
        manifest[name] = _written(previous, snapshot, out / name)
        previous = snapshot
    final = _table_counts(snapshot)
    (out / "workload.json").write_text(json.dumps({"steps": manifest, "final": final}, indent=1))
    return out
