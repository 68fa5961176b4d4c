"""Every machine of a team's deployment names the same warehouse: the first one's is recorded
in the shared instance with the ``duckdb`` pool's limit, and a machine naming another (a DuckDB
file, or another URL) is refused at start in one line, exit code 2, with nothing written (the
limit and the record unchanged, no warehouse file). No false alarm: the same URL from a second
machine passes, and on the local default instance a user switches their warehouse freely."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from eval_pipelines.defs.pools import DUCKDB_POOL, SHARED_WAREHOUSE_POOL_LIMIT
from eval_pipelines.postgres_local.server import LocalPostgres
from eval_pipelines.runs.deployment_warehouse import A_DUCKDB_FILE, RECORD_KEY, SAME_WAREHOUSE_RULE
from eval_pipelines_tests.helpers.cli_calls import cli, refused
from eval_pipelines_tests.helpers.postgres import (
    ScratchDatabase,
    create_database,
    point_warehouse_at,
)
from eval_pipelines_tests.helpers.team_instance import install_team_config, use_team_instance

SETUP = (sys.executable, "-m", "eval_pipelines.runs.instance")


def _warehouse(server: LocalPostgres) -> ScratchDatabase:
    return create_database(server, "w" + secrets.token_hex(6), own_role=True)


def _first_machine_set_up(
    server: LocalPostgres,
    instance: ScratchDatabase,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> ScratchDatabase:
    """The team's instance in ``instance``, set up by a first machine whose warehouse is a new
    database of ``server`` (returned): recorded with the pool's limit."""
    from eval_pipelines.runs.instance import main

    use_team_instance(instance, monkeypatch)
    deployment = _warehouse(server)
    point_warehouse_at(deployment, monkeypatch)
    assert main() == 0, capsys.readouterr().err
    assert _recorded_and_limit() == (deployment.url, SHARED_WAREHOUSE_POOL_LIMIT)
    return deployment


def _recorded_and_limit() -> tuple[str | None, int]:
    with dg.DagsterInstance.get() as instance:
        recorded = instance.run_storage.get_cursor_values({RECORD_KEY}).get(RECORD_KEY)
        limit = instance.event_log_storage.get_concurrency_info(DUCKDB_POOL).slot_count
    return recorded, limit


def _setup_on_another_machine(workdir: Path, name: str) -> subprocess.CompletedProcess[str]:
    """The instance setup run by another machine: its own folder and ``DAGSTER_HOME`` (the same
    ``dagster.yaml``), this test's environment otherwise."""
    home = workdir / name / "dagster_home"
    install_team_config(home)
    environ = dict(os.environ, DAGSTER_HOME=str(home))
    return subprocess.run(
        SETUP, cwd=home.parent, env=environ, capture_output=True, text=True, timeout=300
    )


def test_a_machine_naming_another_warehouse_is_refused(
    workdir: Path,
    postgres_server: LocalPostgres,
    postgres_database: ScratchDatabase,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from eval_pipelines.runs.instance import main

    home = Path(os.environ["DAGSTER_HOME"])
    deployment = _first_machine_set_up(postgres_server, postgres_database, monkeypatch, capsys)

    file = workdir / "own.duckdb"
    other = _warehouse(postgres_server)
    for setting, named in ((str(file), A_DUCKDB_FILE), (other.url, other.url)):
        monkeypatch.setenv("EVAL_PIPELINES_WAREHOUSE", setting)
        if setting == other.url:
            monkeypatch.setenv("EVAL_PIPELINES_WAREHOUSE_PASSWORD", other.password)
        capsys.readouterr()
        assert main() == 2
        out, err = capsys.readouterr()
        line = refused(capsys, "eval", "status", "small", "small-e0001-s1")
        assert out == "" and err == f"error: {line}\n", (out, err)
        assert line == (
            f"EVAL_PIPELINES_WAREHOUSE={named!r}: this deployment's duckdb pool limit was set "
            f"for {deployment.url}: {SAME_WAREHOUSE_RULE}"
        )
        assert other.password not in line and deployment.password not in line
        assert _recorded_and_limit() == (deployment.url, SHARED_WAREHOUSE_POOL_LIMIT)
        assert not file.exists()
        assert sorted(p.name for p in home.iterdir()) == ["dagster.yaml"]

    refused_elsewhere = _setup_on_another_machine(workdir, "machine_b")
    assert refused_elsewhere.returncode == 2, refused_elsewhere.stderr
    assert SAME_WAREHOUSE_RULE in refused_elsewhere.stderr


def test_the_same_url_from_a_second_machine_passes(
    workdir: Path,
    postgres_server: LocalPostgres,
    postgres_database: ScratchDatabase,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    deployment = _first_machine_set_up(postgres_server, postgres_database, monkeypatch, capsys)
    second = _setup_on_another_machine(workdir, "machine_b")
    assert second.returncode == 0, second.stderr
    assert f"pool {DUCKDB_POOL} limit {SHARED_WAREHOUSE_POOL_LIMIT}" in second.stdout
    code, _, err = cli(capsys, "eval", "status", "small", "small-e0001-s1")
    assert SAME_WAREHOUSE_RULE not in err and code == 2  # refused for the unknown case only
    assert _recorded_and_limit() == (deployment.url, SHARED_WAREHOUSE_POOL_LIMIT)


def test_a_single_user_switches_their_warehouse_freely_on_the_local_instance(
    workdir: Path,
    postgres_database: ScratchDatabase,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from eval_pipelines.runs.instance import main

    for switch in range(2):
        monkeypatch.setenv("EVAL_PIPELINES_WAREHOUSE", str(workdir / "warehouse.duckdb"))
        assert main() == 0, capsys.readouterr().err
        assert "(local storage)" in capsys.readouterr().out
        point_warehouse_at(postgres_database, monkeypatch)
        assert main() == 0, capsys.readouterr().err
        code, _, err = cli(capsys, "eval", "status", "small", "small-e0001-s1")
        assert SAME_WAREHOUSE_RULE not in err and code == 2, (switch, err)
    assert _recorded_and_limit()[0] is None
