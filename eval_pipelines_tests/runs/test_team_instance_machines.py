"""Two "machines" on the team's instance: two OS processes with their own working folder and
their own ``DAGSTER_HOME`` holding the same ``deploy/team/dagster.yaml``, reaching PostgreSQL
over TCP (the warehouse stays one DuckDB file both name). A run submitted on one is waited on
by the other (``eval status --wait``), and the ``duckdb`` pool's slots are the same for both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from eval_pipelines_tests.helpers.postgres import ScratchDatabase
from eval_pipelines_tests.helpers.team_instance import install_team_config, team_environment

CLI = [sys.executable, "-m", "eval_pipelines.cli.main"]
SLOTS = (
    "from eval_pipelines.runs.instance import dagster_instance; "
    "info = dagster_instance().event_log_storage.get_concurrency_info('duckdb'); "
    "print(info.slot_count, [slot.run_id for slot in info.claimed_slots])"
)


def _machine(workdir: Path, name: str, database: ScratchDatabase) -> tuple[Path, dict[str, str]]:
    """A working folder with its own ``DAGSTER_HOME``, and the environment it runs in."""
    folder = workdir / name
    home = folder / "dagster_home"
    install_team_config(home)
    environ = dict(os.environ, DAGSTER_HOME=str(home), **team_environment(database))
    return folder, environ


def _run(folder: Path, environ: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=folder, env=environ, capture_output=True, text=True, timeout=300
    )


def test_a_run_submitted_on_one_machine_is_waited_on_by_the_other(
    workdir: Path,
    small_case: str,
    postgres_database: ScratchDatabase,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from eval_pipelines.defs.pools import DUCKDB_POOL
    from eval_pipelines.runs.dispatcher import stop_dispatcher

    first, first_env = _machine(workdir, "machine_a", postgres_database)
    second, second_env = _machine(workdir, "machine_b", postgres_database)
    variants = first / "variants.json"
    variants.write_text(json.dumps([{"name": "baseline"}, {"name": "five", "config": {}}]))
    try:
        submitted = _run(
            first, first_env, *CLI, "eval", "holdout", small_case,
            "--variants-file", str(variants), "--sample-size", "30", "--seed", "8", "--json",
        )  # fmt: skip
        assert submitted.returncode == 0, submitted.stderr
        started = json.loads(submitted.stdout)
        waited = _run(
            second, second_env, *CLI, "eval", "status", small_case, started["evalId"],
            "--wait", "--json", "--timeout", "240",
        )  # fmt: skip
        assert waited.returncode == 0, waited.stderr
        status = json.loads(waited.stdout)
        assert (status["runId"], status["status"]) == (started["runId"], "complete")
        # One dispatcher for both machines dequeued it (each CLI may have started one: the
        # second gives way to the first's lock in the shared database).
        logs = [
            folder / "dagster_home" / "eval_pipelines_dispatcher.log" for folder in (first, second)
        ]
        text = "".join(log.read_text() for log in logs if log.exists())
        assert text.count("started (pid") == 1, text

        # A slot of the pool claimed through the first machine's instance is taken for the
        # second machine too.
        monkeypatch.setenv("DAGSTER_HOME", first_env["DAGSTER_HOME"])
        for name, value in team_environment(postgres_database).items():
            monkeypatch.setenv(name, value)
        from eval_pipelines.runs.instance import dagster_instance

        instance = dagster_instance()
        holder = instance.add_run(dg.DagsterRun(job_name="holdout_eval"))
        storage = instance.event_log_storage
        assert storage.claim_concurrency_slot(DUCKDB_POOL, holder.run_id, "eval_report").is_claimed
        seen = _run(second, second_env, sys.executable, "-c", SLOTS)
        assert seen.returncode == 0, seen.stderr
        assert seen.stdout.split(" ", 1) == ["1", f"['{holder.run_id}']\n"]
        storage.free_concurrency_slots_for_run(holder.run_id)
        seen = _run(second, second_env, sys.executable, "-c", SLOTS)
        assert seen.stdout == "1 []\n", seen.stderr
    finally:
        for folder in (first, second):
            stop_dispatcher(folder / "dagster_home" / "eval_pipelines_dispatcher.lock")
