"""The run model: CLI/API runs are ordinary Dagster runs submitted to the instance's queue; a
killed run reads failed with its reason, gives back its pool slot, and a re-run reproduces the
report."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from eval_pipelines import api, runs
from eval_pipelines.instance import DUCKDB_POOL, dagster_instance

VARIANTS = [{"name": "baseline"}, {"name": "five", "config": {"candidates": 5}}]


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_started_run_whose_process_is_gone_is_failed_and_its_slot_freed(workdir: Path) -> None:
    instance = dagster_instance()
    run = instance.add_run(
        dg.DagsterRun(
            job_name="holdout_eval",
            status=dg.DagsterRunStatus.STARTED,
            tags={runs.KIND_TAG: "holdout", runs.PARTITION_TAG: "x-e0001-s1"},
        )
    )
    pid = _dead_pid()
    from dagster._core.events import EngineEventData

    instance.report_engine_event(
        f"Started process for run (pid: {pid}).", run, EngineEventData.in_process(pid)
    )
    storage = instance.event_log_storage
    storage.claim_concurrency_slot(DUCKDB_POOL, run.run_id, "holdout_sample")
    assert storage.get_concurrency_info(DUCKDB_POOL).active_run_ids == {run.run_id}

    assert runs.reap_dead_runs(instance) == [run.run_id]
    reloaded = instance.get_run_by_id(run.run_id)
    assert reloaded is not None and reloaded.status == dg.DagsterRunStatus.FAILURE
    state = runs.run_state(instance, reloaded)
    assert state.state == "failed" and f"pid {pid}" in (state.reason or "")
    assert storage.get_concurrency_info(DUCKDB_POOL).active_run_ids == set()
    assert runs.reap_dead_runs(instance) == []  # nothing left to do


def _worker_pid(instance: dg.DagsterInstance, run_id: str, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
            data = record.dagster_event.engine_event_data if record.dagster_event else None
            if data is not None and "pid" in data.metadata:
                return int(str(data.metadata["pid"].value))
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} never reported its process")


def _wait_for(predicate, timeout: float = 120) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.3)


def test_kill_9_reads_failed_frees_the_slot_and_a_rerun_reproduces_the_report(
    small_case: str,
) -> None:
    reference = api.start_holdout_eval(
        small_case, VARIANTS, sample_size=40, seed=6, launch="inline"
    )
    expected = api.get_holdout_eval(small_case, reference["evalId"])["report"]

    # Hold the warehouse so the submitted run blocks in its first step, inside the pool.
    holder = duckdb.connect(os.environ["EVAL_PIPELINES_WAREHOUSE"])
    try:
        started = api.start_holdout_eval(small_case, VARIANTS, sample_size=40, seed=6)
        instance = dagster_instance()
        run = instance.get_run_by_id(started["runId"])
        assert run is not None and run.remote_job_origin is not None  # has its job origin
        assert run.remote_job_origin.location_name == runs.LOCATION_NAME
        pid = _worker_pid(instance, started["runId"])
        _wait_for(
            lambda: (
                instance.event_log_storage.get_concurrency_info(DUCKDB_POOL).active_run_ids
                == {started["runId"]}
            )
        )
        os.kill(pid, signal.SIGKILL)
    finally:
        holder.close()

    _wait_for(lambda: api.get_holdout_eval(small_case, started["evalId"])["status"] == "failed")
    status = api.get_holdout_eval(small_case, started["evalId"])
    assert status["run"]["state"] == "failed"
    # Whoever notices first words it: the code server that launched the run, or the reaper.
    reason = status["run"]["reason"]
    assert "signal 9 (SIGKILL)" in reason or "was killed or crashed" in reason, reason
    assert instance.event_log_storage.get_concurrency_info(DUCKDB_POOL).active_run_ids == set()

    again = api.rerun_holdout_eval(small_case, started["evalId"])
    final = api.wait_for_eval(small_case, started["evalId"], timeout=240, run_id=again["runId"])
    assert final["status"] == "complete"
    report = final["report"]
    assert report["sample"]["sampleHash"] == expected["sample"]["sampleHash"]
    assert [v["score"] for v in report["variants"]] == [v["score"] for v in expected["variants"]]
    assert report["comparisons"] == expected["comparisons"]


def test_terminating_a_cli_started_run_reads_canceled(small_case: str) -> None:
    holder = duckdb.connect(os.environ["EVAL_PIPELINES_WAREHOUSE"])
    try:
        started = api.start_holdout_eval(small_case, VARIANTS, sample_size=20, seed=2)
        instance = dagster_instance()
        _wait_for(  # the first step has started (and waits for the lock)
            lambda: any(instance.all_logs(started["runId"], of_type=dg.DagsterEventType.STEP_START))
        )
        # What the UI's Terminate button does: ask the run launcher (through the code server
        # recorded on the run) to stop it.
        assert instance.run_launcher.terminate(started["runId"])
        _wait_for(
            lambda: (
                instance.get_run_by_id(started["runId"]).status  # type: ignore[union-attr]
                == dg.DagsterRunStatus.CANCELED
            )
        )
    finally:
        holder.close()
    status = api.get_holdout_eval(small_case, started["evalId"])
    assert status["run"]["state"] == "canceled"
    assert status["run"]["reason"].startswith("canceled")
    with pytest.raises(api.EvalFailed, match="canceled"):
        api.wait_for_eval(small_case, started["evalId"], timeout=30)
