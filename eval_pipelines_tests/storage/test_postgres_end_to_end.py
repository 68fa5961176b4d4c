"""End to end with the warehouse in PostgreSQL: a holdout evaluation materialized through
Dagster stores the report the same evaluation stores in a DuckDB file, field by field (the
golden and lift APIs' own PostgreSQL runs sit in api/test_golden.py and api/test_lift.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipelines import api, settings
from eval_pipelines.storage.holdout_evaluations import StoredReport, load_report
from eval_pipelines.storage.warehouse import connect
from eval_pipelines_tests.helpers.holdout_runs import assert_same_report
from eval_pipelines_tests.helpers.postgres import ScratchDatabase, point_warehouse_at

VARIANTS = [{"name": "baseline"}, {"name": "k5", "config": {"candidates": 5}}]


def _evaluate(case_files: dict[str, Path]) -> StoredReport:
    api.create_case(
        "small",
        api.CaseSource(case_files["records"], tree_path=case_files["tree"], target_depth=[3, 4]),
    )
    eval_id = api.start_holdout_eval(
        "small", VARIANTS, api.HoldoutOptions(sample_size=120, seed=4), wait=True
    ).eval_id
    with connect(settings.warehouse_location(), read_only=True) as conn:
        stored = load_report(conn, eval_id)
    assert stored is not None
    return stored


def test_a_holdout_report_on_postgresql_equals_the_duckdb_files(
    workdir: Path,
    postgres_database: ScratchDatabase,
    small_case_files: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EVAL_PIPELINES_WAREHOUSE", str(workdir / "warehouse.duckdb"))
    on_file = _evaluate(small_case_files)
    point_warehouse_at(postgres_database, monkeypatch)
    monkeypatch.setenv("EVAL_PIPELINES_INDEX_DIR", str(workdir / "indexes-postgres"))
    on_postgres = _evaluate(small_case_files)
    assert_same_report(on_file, on_postgres)
