"""``eval-pipelines warehouse copy``: a DuckDB warehouse file moved into an empty PostgreSQL
warehouse without loss, and refused (nothing written) into one that holds rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipelines import api
from eval_pipelines.api import lift
from eval_pipelines.storage.warehouse import connect
from eval_pipelines_tests.helpers.lift_traffic import LEVER, write_log
from eval_pipelines_tests.helpers.postgres import ScratchDatabase

TABLES = (
    "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database() "
    "AND table_schema = current_schema() AND table_name <> 'schema_version' ORDER BY 1"
)


def _contents(warehouse: Path | str) -> dict[str, list[tuple]]:
    with connect(warehouse, read_only=True) as conn:
        return {
            table: sorted(conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
            for (table,) in conn.execute(TABLES).fetchall()
        }


def _copy(file: Path, database: ScratchDatabase, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "eval_pipelines.cli.main",
            "warehouse",
            "copy",
            str(file),
            "--to",
            database.url,
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "EVAL_PIPELINES_WAREHOUSE_PASSWORD": database.password},
        timeout=600,
    )


def test_a_file_is_copied_whole_and_a_filled_target_is_refused(
    small_case: str,
    workdir: Path,
    postgres_database: ScratchDatabase,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api.start_holdout_eval(
        small_case, [{"name": "baseline"}], api.HoldoutOptions(sample_size=40), register_only=True
    )
    lift.ingest(write_log(workdir / "day.jsonl", LEVER, true_lift=0.0, days=1, seed=3))
    file = workdir / "warehouse.duckdb"
    done = _copy(file, postgres_database, workdir)
    assert done.returncode == 0, done.stderr
    expected = _contents(file)
    printed = json.loads(done.stdout)
    assert printed["target"] == postgres_database.url
    assert printed["copiedRows"] == {table: len(rows) for table, rows in expected.items()}
    monkeypatch.setenv("EVAL_PIPELINES_WAREHOUSE_PASSWORD", postgres_database.password)
    copied = _contents(postgres_database.url)
    assert sum(map(len, expected.values())) > 3000
    assert copied == expected
    again = _copy(file, postgres_database, workdir)
    assert again.returncode == 2
    assert "must be an empty warehouse" in again.stderr
    assert _contents(postgres_database.url) == copied
