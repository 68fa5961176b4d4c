"""The project on the reference deployment's Dagster instance (``deploy/team/dagster.yaml``, its
storage in a real PostgreSQL server reached over TCP; the warehouse stays a DuckDB file):
``eval holdout --wait``, ``eval status``, a submitted run started by the CLI's dispatcher,
``golden run``, the workflow sensor and the lift inbox sensor work unchanged, and the
``duckdb`` pool's limit is set in the shared storage from the warehouse setting.

Each test has its own instance database and its own ``DAGSTER_HOME`` holding a copy of the
team's file.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
import pytest

from eval_pipelines_tests.helpers.cli_calls import cli
from eval_pipelines_tests.helpers.postgres import ScratchDatabase, create_database
from eval_pipelines_tests.helpers.team_instance import instance_tables, use_team_instance

if TYPE_CHECKING:
    from eval_pipelines.postgres_local.server import LocalPostgres

CLI = [sys.executable, "-m", "eval_pipelines.cli.main"]


@pytest.fixture
def team_database(postgres_server: LocalPostgres) -> ScratchDatabase:
    """The test's instance database, owned by its own role (the least the docs ask). One per
    test: a deployment's machines all name one warehouse, and each test has its own."""
    return create_database(postgres_server, "team" + secrets.token_hex(5), own_role=True)


@pytest.fixture
def team_home(
    workdir: Path, team_database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """This test's ``DAGSTER_HOME`` with the team's ``dagster.yaml``, its variables set."""
    yield use_team_instance(team_database, monkeypatch)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=os.environ.copy(), timeout=300
    )


def _variants(folder: Path) -> Path:
    path = folder / "variants.json"
    path.write_text(json.dumps([{"name": "baseline"}, {"name": "five", "config": {}}]))
    return path


def _holdout(case: str, variants: Path, seed: int, *flags: str) -> list[str]:
    return [
        "eval",
        "holdout",
        case,
        "--variants-file",
        str(variants),
        "--sample-size",
        "30",
        "--seed",
        str(seed),
        "--json",
        *flags,
    ]


def test_holdout_wait_and_status_keep_their_runs_in_postgres(
    team_home: Path, team_database: ScratchDatabase, small_case: str
) -> None:
    from eval_pipelines.defs.pools import DUCKDB_POOL
    from eval_pipelines.runs.instance import dagster_instance

    done = _cli(*_holdout(small_case, _variants(team_home.parent), 5, "--wait"))
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["status"] == "complete"
    shown = _cli("eval", "status", small_case, status["evalId"], "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["runId"] == status["runId"]
    instance = dagster_instance()
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    run = instance.get_run_by_id(status["runId"])
    assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS
    # The runs and the pool's limit live in PostgreSQL, nothing in a local SQLite file.
    assert {"runs", "event_logs", "concurrency_slots"} <= instance_tables(team_database)
    assert not list(team_home.rglob("*.db"))
    info = instance.event_log_storage.get_concurrency_info(DUCKDB_POOL)
    assert (info.slot_count, info.using_default_limit) == (1, False)


def test_a_submitted_run_is_started_by_the_dispatcher_and_waited_on(
    team_home: Path, small_case: str
) -> None:
    submitted = _cli(*_holdout(small_case, _variants(team_home.parent), 6))
    assert submitted.returncode == 0, submitted.stderr
    eval_id = json.loads(submitted.stdout)["evalId"]
    waited = _cli("eval", "status", small_case, eval_id, "--wait", "--json", "--timeout", "240")
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout)["status"] == "complete"
    # Dequeued by the CLI's dispatcher (no daemon here), through the shared run queue.
    log = (team_home / "eval_pipelines_dispatcher.log").read_text()
    assert "started (pid" in log


def test_the_pool_limit_follows_the_deployments_warehouse(
    team_home: Path, team_database: ScratchDatabase
) -> None:
    from eval_pipelines.defs.pools import DUCKDB_POOL, SHARED_WAREHOUSE_POOL_LIMIT
    from eval_pipelines.runs.deployment_warehouse import SAME_WAREHOUSE_RULE

    shared = dict(os.environ, EVAL_PIPELINES_WAREHOUSE=team_database.url)
    shared["EVAL_PIPELINES_WAREHOUSE_PASSWORD"] = team_database.password
    setup = [sys.executable, "-m", "eval_pipelines.runs.instance"]
    out = subprocess.run(setup, capture_output=True, text=True, env=shared, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.endswith(f"pool duckdb limit {SHARED_WAREHOUSE_POOL_LIMIT}\n")
    # Read as stored (this process's own first use would set the limit of its own setting).
    storage = dg.DagsterInstance.get().event_log_storage
    assert storage.get_concurrency_info(DUCKDB_POOL).slot_count == SHARED_WAREHOUSE_POOL_LIMIT
    # A DuckDB file now would reset the limit for every machine: refused, the limit and the
    # team's file kept as they were.
    kept = (team_home / "dagster.yaml").read_text()
    file = dict(os.environ, EVAL_PIPELINES_WAREHOUSE=str(team_home.parent / "own.duckdb"))
    out = subprocess.run(setup, capture_output=True, text=True, env=file, timeout=120)
    assert out.returncode == 2 and SAME_WAREHOUSE_RULE in out.stderr, out.stderr
    assert storage.get_concurrency_info(DUCKDB_POOL).slot_count == SHARED_WAREHOUSE_POOL_LIMIT
    assert (team_home / "dagster.yaml").read_text() == kept


def test_golden_run_gates_a_revision(
    team_home: Path, golden_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines.runs.instance import dagster_instance
    from eval_pipelines_tests.helpers.golden_demo import seed

    seed()
    code, out, err = cli(capsys, "golden", "run", "inv", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["status"] == "completed" and report["gate"]["passed"] is True
    run = dagster_instance().get_run_by_id(report["dagsterRunId"])
    assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS


def test_the_workflow_sensor_ticks_on_the_team_instance(team_home: Path, golden_home: Path) -> None:
    from eval_pipelines.defs.golden_automation import workflow_revision_sensor
    from eval_pipelines.defs.resources import WarehouseResource
    from eval_pipelines.runs.instance import dagster_instance
    from eval_pipelines_tests.helpers.golden_demo import WORKFLOW_FILE, seed

    seed()
    watched = Path(os.environ["EVAL_PIPELINES_WORKFLOWS_DIR"])
    (watched / WORKFLOW_FILE.name).write_text(
        WORKFLOW_FILE.read_text().replace(
            "description: Supplier invoices from Harbour Lane Paper Co.", "description: team"
        )
    )
    instance = dagster_instance()
    with dg.build_sensor_context(
        instance=instance, resources={"warehouse": WarehouseResource()}
    ) as context:
        result = workflow_revision_sensor(context)
    assert isinstance(result, dg.SensorResult), result
    (request,) = result.run_requests or []
    for partitions in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(
            partitions.partitions_def_name, list(partitions.partition_keys)
        )
    assert request.partition_key in instance.get_dynamic_partitions("workflow_revisions")


def test_the_lift_inbox_sensor_ticks_on_the_team_instance(
    team_home: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eval_pipelines import settings
    from eval_pipelines.core.lift.assignment import LiftConfig
    from eval_pipelines.defs.lift import lift_log_sensor
    from eval_pipelines.runs.instance import dagster_instance
    from eval_pipelines_tests.helpers.lift_traffic import write_log

    inbox = workdir / "inbox"
    inbox.mkdir()
    monkeypatch.setenv(settings.LIFT_INBOX_ENV, str(inbox))
    log = write_log(inbox / "day.jsonl", LiftConfig("ws", "e1", 0.10), true_lift=0.0, days=1)
    with dg.build_sensor_context(instance=dagster_instance()) as context:
        result = lift_log_sensor(context)
    assert isinstance(result, dg.SensorResult), result
    (request,) = result.run_requests or []
    assert request.run_config["ops"]["ingest_lift_log"]["config"]["path"] == str(log)


def test_a_process_keeps_its_instance_connections_pooled(
    team_home: Path, team_database: ScratchDatabase, postgres_server: LocalPostgres
) -> None:
    # dagster-postgres logs in again for every storage call unless the engines are pooled; the
    # project's instance pools them, so a burst of storage calls opens a few sessions, not one
    # per call.
    from eval_pipelines.runs.instance import dagster_instance
    from eval_pipelines_tests.helpers.postgres import superuser

    def sessions_opened() -> int:
        with superuser(postgres_server) as conn, conn.cursor() as cursor:
            cursor.execute(
                "SELECT COALESCE(SUM(sessions), 0) FROM pg_stat_database WHERE datname = %s",
                [team_database.name],
            )
            return int(cursor.fetchone()[0])

    instance = dagster_instance()
    try:
        before = sessions_opened()
        for _ in range(50):
            instance.get_runs(limit=1)
            instance.get_run_records(limit=1)
        assert sessions_opened() - before <= 3
    finally:
        instance.dispose()
