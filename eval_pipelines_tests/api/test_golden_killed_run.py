"""A golden run whose process is killed (SIGKILL, the OOM killer) never closes its
``golden_runs`` row: before the fix it stayed ``running`` for good, and every report, the
gate's reason and ``workflow status`` went on calling it live. Now whatever reads golden runs
first closes a ``running`` row whose Dagster run is over, or gone, as ``failed`` with a reason
naming that run's state.

Real DuckDB warehouse, a real Dagster run of ``golden_gate`` submitted as the sensor's are
(dispatcher, run worker process), stuck in a step of the time-limit demo, its run worker
killed with SIGKILL; the CLI read in-process through its entry point."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import dagster as dg
import pytest

from eval_pipelines_tests.helpers.golden_demo import WORKFLOW, seed_with_hanging_case
from eval_pipelines_tests.helpers.stuck_runs import submitted_run_stuck, wait_for


def _cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    from eval_pipelines.cli.main import main

    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_a_golden_run_whose_process_was_killed_is_reported_failed_not_running(
    golden_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines import runs
    from eval_pipelines.api import golden
    from eval_pipelines.runs.instance import dagster_instance
    from eval_pipelines.storage import golden as golden_store
    from eval_pipelines.storage.warehouse import connect

    # A step limit far beyond the test: case-0004 is inside its step when the kill comes.
    revision = seed_with_hanging_case(golden_home, time_limit=600)
    started = golden.run_set("inv", revision=revision)
    instance = dagster_instance()
    run_id = started.run_id
    worker_pid, hung = submitted_run_stuck(instance, run_id)
    with connect(Path("warehouse.duckdb"), read_only=True) as conn:
        (live,) = golden_store.runs_of_dagster_run(conn, run_id)
    assert live.status == "running"

    os.kill(worker_pid, signal.SIGKILL)  # what the OOM killer does: no handler runs
    for pid in hung:  # its step worker would spin until its CPU limit
        os.kill(pid, signal.SIGKILL)
    # Dagster learns of the death (the code server reaps its child, or this project's
    # reaper finds the pid gone); the golden row, written by nobody since, is still running.
    wait_for(
        lambda: (
            runs.reap_dead_runs(instance) is not None and instance.get_run_by_id(run_id).is_finished  # type: ignore[union-attr]
        )
    )
    with connect(Path("warehouse.duckdb"), read_only=True) as conn:
        assert golden_store.load_run(conn, live.golden_run_id).status == "running"

    # ``golden report``: the row is closed as failed, naming the Dagster run's state.
    report = _cli_json(capsys, "golden", "report", live.golden_run_id, "--json")
    assert report["status"] == "failed"
    assert report["finishedAt"] is not None
    assert report["reason"].startswith(f"left running: its Dagster run {run_id} ended FAILURE")
    # Whoever noticed first words the death: the code server, or this project's reaper.
    assert any(
        words in report["reason"] for words in ("terminated by signal 9", "killed or crashed")
    ), report["reason"]
    assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE  # type: ignore[union-attr]
    with connect(Path("warehouse.duckdb"), read_only=True) as conn:
        assert golden_store.load_run(conn, live.golden_run_id).status == "failed"

    # The gate is not passed by it and says why, in ``workflow status`` and the API.
    status = _cli_json(capsys, "workflow", "status", WORKFLOW, "--json")
    assert status["gate"]["revision"] == revision
    assert status["gate"]["state"] == "blocked"
    assert (
        f"set inv has not been run against revision {revision} (its newest run there is "
        f"failed, left running: its Dagster run {run_id} ended FAILURE"
    ) in status["gate"]["reason"]
    (reported,) = golden.golden_runs_of(run_id)
    assert (reported.status, reported.reason) == ("failed", report["reason"])


def test_a_running_row_whose_dagster_run_is_gone_is_closed_and_a_live_one_is_kept(
    golden_home: Path,
) -> None:
    """A row whose Dagster run was deleted is closed; a row of a run still in progress in
    this process (an inline run) is left running."""
    from eval_pipelines import runs
    from eval_pipelines.api import golden
    from eval_pipelines.core.golden.run import GoldenRun
    from eval_pipelines.runs.instance import dagster_instance
    from eval_pipelines.storage import golden as golden_store
    from eval_pipelines.storage.warehouse import connect, transaction

    revision = seed_with_hanging_case(golden_home, time_limit=2)
    done = golden.run_and_report("inv")
    instance = dagster_instance()
    live = runs.create_inline_run(instance, runs.kind_of("golden"), revision)
    assert live is not None
    # ``live`` is created, not started: not over, so its row must be kept.
    with connect(Path("warehouse.duckdb")) as conn, transaction(conn):
        for name, dagster_run_id in (("g-gone", done.dagster_run_id), ("g-live", live.run_id)):
            golden_store.start_run(
                conn,
                GoldenRun(
                    name,
                    "inv",
                    WORKFLOW,
                    revision,
                    dagster_run_id,
                    "running",
                    golden_store._now(),
                    None,
                    0,
                    0,
                    0.0,
                    1.0,
                ),
            )
    instance.delete_run(done.dagster_run_id)

    assert golden.run_report("g-gone").status == "failed"
    with connect(Path("warehouse.duckdb"), read_only=True) as conn:
        gone = golden_store.load_run(conn, "g-gone")
        kept = golden_store.load_run(conn, "g-live")
    assert gone.reason == f"left running: its Dagster run {done.dagster_run_id} no longer exists"
    assert (kept.status, kept.reason) == ("running", None)
