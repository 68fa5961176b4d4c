"""The run model: CLI/API runs are ordinary Dagster runs, submitted to the instance's queue or
executed by the process that creates them; a killed run reads failed with its reason, gives
back its pool slot, and a re-run reproduces the report; a run executed here takes a run slot,
waits for the pool like any run, and ends canceled when terminated or interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import dagster as dg
import pytest
import yaml

from eval_pipelines import api, runs
from eval_pipelines.cli.main import main
from eval_pipelines.defs.pools import DUCKDB_POOL
from eval_pipelines.runs.dispatcher import stop_dispatcher
from eval_pipelines.runs.instance import (
    INSTANCE_CONFIG,
    MAX_CONCURRENT_RUNS,
    dagster_instance,
    set_pool_limit,
)
from eval_pipelines.storage.warehouse import connect
from eval_pipelines_tests.helpers.stuck_runs import interrupt_once_materialized

VARIANTS = [{"name": "baseline"}, {"name": "five", "config": {"candidates": 5}}]


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


# A run executed by the CLI that created it is starting until Dagster starts it: that CLI can
# die in between too.
@pytest.mark.parametrize("status", [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING])
def test_a_started_run_whose_process_is_gone_is_failed_and_its_slot_freed(
    workdir: Path, status: dg.DagsterRunStatus
) -> None:
    instance = dagster_instance()
    run = instance.add_run(
        dg.DagsterRun(
            job_name="holdout_eval",
            status=status,
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


def _hold_warehouse() -> ExitStack:
    """This process's connection to the warehouse, held until ``close()``."""
    stack = ExitStack()
    stack.enter_context(connect(Path(os.environ["EVAL_PIPELINES_WAREHOUSE"])))
    return stack


def _wait_for(predicate, timeout: float = 120) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.3)


def test_kill_9_reads_failed_frees_the_slot_and_a_rerun_reproduces_the_report(
    small_case: str,
) -> None:
    reference = api.start_holdout_eval(
        small_case, VARIANTS, api.HoldoutOptions(sample_size=40, seed=6), wait=True
    )
    expected = api.get_holdout_eval(small_case, reference.eval_id).report

    # Hold the warehouse so the submitted run blocks in its first step, inside the pool. It is
    # held through connect(), as the package holds it: a bare duckdb.connect in this process
    # is unknown to connect(), whose header check would then drop its lock.
    holder = _hold_warehouse()
    try:
        started = api.start_holdout_eval(
            small_case, VARIANTS, api.HoldoutOptions(sample_size=40, seed=6)
        )
        instance = dagster_instance()
        run = instance.get_run_by_id(started.run_id)
        assert run is not None and run.remote_job_origin is not None  # has its job origin
        assert run.remote_job_origin.location_name == runs.LOCATION_NAME
        pid = _worker_pid(instance, started.run_id)
        _wait_for(
            lambda: (
                instance.event_log_storage.get_concurrency_info(DUCKDB_POOL).active_run_ids
                == {started.run_id}
            )
        )
        os.kill(pid, signal.SIGKILL)
    finally:
        holder.close()

    _wait_for(lambda: api.get_holdout_eval(small_case, started.eval_id).status == "failed")
    status = api.get_holdout_eval(small_case, started.eval_id)
    assert status.run.state == "failed"
    # Whoever notices first words it: the code server that launched the run, or the reaper.
    reason = status.run.reason
    assert "signal 9 (SIGKILL)" in reason or "was killed or crashed" in reason, reason
    assert instance.event_log_storage.get_concurrency_info(DUCKDB_POOL).active_run_ids == set()

    again = api.rerun_holdout_eval(small_case, started.eval_id)
    final = api.wait_for_eval(small_case, started.eval_id, timeout=240, run_id=again.run_id)
    assert final.status == "complete"
    report = final.report
    assert report["sample"]["sampleHash"] == expected["sample"]["sampleHash"]
    assert [v["score"] for v in report["variants"]] == [v["score"] for v in expected["variants"]]
    assert report["comparisons"] == expected["comparisons"]


def test_terminating_a_cli_started_run_reads_canceled(small_case: str) -> None:
    holder = _hold_warehouse()
    try:
        started = api.start_holdout_eval(
            small_case, VARIANTS, api.HoldoutOptions(sample_size=20, seed=2)
        )
        instance = dagster_instance()
        _wait_for(  # the first step has started (and waits for the lock)
            lambda: any(instance.all_logs(started.run_id, of_type=dg.DagsterEventType.STEP_START))
        )
        # What the UI's Terminate button does: ask the run launcher (through the code server
        # recorded on the run) to stop it.
        assert instance.run_launcher.terminate(started.run_id)
        _wait_for(
            lambda: (
                instance.get_run_by_id(started.run_id).status  # type: ignore[union-attr]
                == dg.DagsterRunStatus.CANCELED
            )
        )
    finally:
        holder.close()
    status = api.get_holdout_eval(small_case, started.eval_id)
    assert status.run.state == "canceled"
    assert status.run.reason.startswith("canceled")
    with pytest.raises(api.EvalFailed, match="canceled"):
        api.wait_for_eval(small_case, started.eval_id, timeout=30)


# --- Runs executed by the process that creates them (``inline``, ``eval holdout --wait``) ---


@pytest.fixture
def instance(workdir: Path) -> Iterator[dg.DagsterInstance]:
    """A throwaway instance configured as the project configures its own (run queue with
    ``max_concurrent_runs``, the ``duckdb`` pool with its limit); ``$DAGSTER_HOME`` points at it
    while the test runs, so the API and the CLI use it too."""
    with dg.instance_for_test(overrides=yaml.safe_load(INSTANCE_CONFIG)) as test_instance:
        set_pool_limit(test_instance)
        yield test_instance
        stop_dispatcher(Path(test_instance.root_directory) / "eval_pipelines_dispatcher.lock")


def _registered(case: str, seed: int = 1) -> str:
    """A registered evaluation (spec written, no run yet) of the small case."""
    return api.start_holdout_eval(
        case, VARIANTS, api.HoldoutOptions(sample_size=20, seed=seed), register_only=True
    ).eval_id


def _other_run(instance: dg.DagsterInstance, status: dg.DagsterRunStatus) -> dg.DagsterRun:
    """A run of another evaluation in the given state (its process is not watched: no pid)."""
    return instance.add_run(
        dg.DagsterRun(
            job_name="holdout_eval",
            status=status,
            tags={runs.KIND_TAG: "holdout", runs.PARTITION_TAG: "other-e0001-s1"},
            remote_job_origin=runs.job_origin("holdout_eval"),
        )
    )


def _logged(instance: dg.DagsterInstance, run_id: str, words: str) -> bool:
    return any(words in record.user_message for record in instance.all_logs(run_id))


def test_an_inline_run_is_recorded_like_a_submitted_run(
    small_case: str, instance: dg.DagsterInstance
) -> None:
    eval_id = _registered(small_case)
    kind = runs.kind_of("holdout")
    run = runs.create_inline_run(instance, kind, eval_id, tags={"team": "a"})
    assert run is not None and run.status == dg.DagsterRunStatus.STARTING
    # The UI re-executes and terminates a run through the origin of its code location.
    assert run.remote_job_origin is not None
    assert run.remote_job_origin.location_name == runs.LOCATION_NAME
    assert run.remote_job_origin.job_name == kind.job_name
    assert run.job_code_origin is not None
    assert {k: run.tags[k] for k in (runs.PARTITION_TAG, runs.EVAL_TAG, runs.KIND_TAG)} == {
        runs.PARTITION_TAG: eval_id,
        runs.EVAL_TAG: eval_id,
        runs.KIND_TAG: "holdout",
    }
    assert run.tags["team"] == "a" and run.tags[runs.LAUNCHED_BY_TAG] == "eval-pipelines"
    assert instance.has_dynamic_partition(kind.partitions, eval_id)
    # Its process is named before it starts, so the reaper can tell when it is gone.
    assert runs.run_worker_pid(instance, run.run_id) == os.getpid()

    state = runs.execute_run_here(instance, run)

    assert state.state == "succeeded"
    assert api.get_holdout_eval(small_case, eval_id).status == "complete"
    events = {r.dagster_event.event_type for r in instance.all_logs(run.run_id) if r.dagster_event}
    # Never queued, never handed to a run process: started and ended here.
    assert dg.DagsterEventType.RUN_ENQUEUED not in events
    assert {dg.DagsterEventType.RUN_START, dg.DagsterEventType.RUN_SUCCESS} <= events
    assert not (Path(instance.root_directory) / "eval_pipelines_dispatcher.log").exists()


def test_a_report_written_by_a_run_interrupted_before_its_step_succeeded_does_not_count(
    small_case: str, instance: dg.DagsterInstance
) -> None:
    # The interrupt (SIGINT, as Ctrl-C and the UI's Terminate send it) reaches eval_report after
    # the step committed its report and before the step succeeded: the run ends canceled, and
    # the report it left must not read complete.
    eval_id = _registered(small_case)
    run = runs.create_inline_run(instance, runs.kind_of("holdout"), eval_id)
    assert run is not None

    with pytest.raises(runs.RunInterrupted):
        runs.execute_run_here(instance, run, on_event=interrupt_once_materialized("eval_report"))

    with connect(Path("warehouse.duckdb"), read_only=True) as conn:
        (written_by,) = conn.execute(
            "SELECT run_id FROM eval_reports WHERE eval_id = ?", [eval_id]
        ).fetchone()
    assert written_by == run.run_id  # the rows were written before the interrupt
    status = api.get_holdout_eval(small_case, eval_id)
    assert (status.status, status.run.state) == ("canceled", "canceled")
    assert status.report is None and status.report_markdown is None
    with pytest.raises(api.EvalFailed, match="canceled"):
        api.wait_for_eval(small_case, eval_id, timeout=30)
    assert [e.complete for e in api.list_evals(small_case)] == [False]

    # A run that completes writes the report that counts.
    again = runs.create_inline_run(instance, runs.kind_of("holdout"), eval_id)
    assert again is not None and runs.execute_run_here(instance, again).state == "succeeded"
    assert api.get_holdout_eval(small_case, eval_id).status == "complete"
    assert [e.complete for e in api.list_evals(small_case)] == [True]


def test_a_golden_run_stored_by_a_step_interrupted_before_it_succeeded_never_opens_the_gate(
    golden_home: Path, instance: dg.DagsterInstance, capsys: pytest.CaptureFixture[str]
) -> None:
    # golden_run stores the set's golden run as completed before the step ends; an interrupt
    # in between leaves a canceled Dagster run whose golden run read completed and, before,
    # opened the gate: `workflow activate` passed on it.
    from eval_pipelines.api import golden, workflows
    from eval_pipelines.defs.golden import SETS_TAG
    from eval_pipelines.storage import golden as golden_store
    from eval_pipelines_tests.helpers.golden_demo import WORKFLOW, seed

    revision = seed()
    run = runs.create_inline_run(instance, runs.kind_of("golden"), revision, tags={SETS_TAG: "inv"})
    assert run is not None

    with pytest.raises(runs.RunInterrupted):
        runs.execute_run_here(instance, run, on_event=interrupt_once_materialized("golden_run"))

    with connect(Path("warehouse.duckdb"), read_only=True) as conn:
        (stored,) = golden_store.runs_of_dagster_run(conn, run.run_id)
    assert stored.status == "completed"  # stored before the interrupt, as it was
    assert runs.run_state(instance, instance.get_run_by_id(run.run_id)).state == "canceled"
    why = (
        f"set inv has not been run against revision {revision} (its newest run there is "
        f"{stored.golden_run_id}, stored as completed by Dagster run {run.run_id} whose "
        "golden_run step did not succeed, so it does not count)"
    )
    status = workflows.workflow_status(WORKFLOW)
    assert (status.gate.state, status.gate.reason) == ("blocked", why)
    with pytest.raises(workflows.ActivationRefused) as refused:
        workflows.activate_workflow(WORKFLOW, revision, by="ana")
    assert str(refused.value).endswith(why)
    assert golden.trend("inv").points == ()  # no point from a run that does not count
    # Its report says so, read by golden run or by Dagster run, in JSON and in the CLI's lines.
    report = golden.run_report(stored.golden_run_id)
    assert (report.status, report.counts) == ("completed", False)
    assert report.reason is not None and "does not count" in report.reason
    assert report.to_json()["counts"] is False
    assert golden.golden_runs_of(run.run_id) == (report,)
    assert main(["golden", "report", stored.golden_run_id]) == 0
    first, second = capsys.readouterr().out.splitlines()[:2]
    assert first.endswith(f"revision {revision} (completed, does not count)")
    assert second.strip() == report.reason

    # A run whose step succeeds counts: the gate opens.
    again = golden.run_and_report("inv")
    assert again.gate is not None and again.gate.passed
    assert again.counts and golden.run_report(again.golden_run_id).counts
    assert [p.golden_run_id for p in golden.trend("inv").points] == [again.golden_run_id]
    assert workflows.activate_workflow(WORKFLOW, revision, by="ana").revision == revision


def test_an_inline_run_waits_for_the_duckdb_pool_slot(
    small_case: str, instance: dg.DagsterInstance
) -> None:
    """Two processes never write the warehouse at once: a run executed here claims the
    instance's ``duckdb`` pool slot for its writing steps like any run."""
    eval_id = _registered(small_case)
    writer = _other_run(instance, dg.DagsterRunStatus.STARTED)
    storage = instance.event_log_storage
    assert storage.claim_concurrency_slot(DUCKDB_POOL, writer.run_id, "holdout_sample").is_claimed
    run = runs.create_inline_run(instance, runs.kind_of("holdout"), eval_id)
    assert run is not None
    started_while_held: list[object] = []

    def release_when_blocked() -> None:
        _wait_for(lambda: _logged(instance, run.run_id, "blocked by limit for pool duckdb"))
        started_while_held.extend(
            instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_START)
        )
        storage.free_concurrency_slots_for_run(writer.run_id)

    releaser = threading.Thread(target=release_when_blocked)
    releaser.start()
    state = runs.execute_run_here(instance, run)
    releaser.join()

    assert started_while_held == []  # no step ran while the other run held the slot
    assert state.state == "succeeded"
    assert storage.get_concurrency_info(DUCKDB_POOL).active_run_ids == set()


@pytest.mark.parametrize("blocker", ["run slots taken", "a run queued", "a daemon dequeues"])
def test_auto_runs_here_only_when_the_queue_would_start_it_now(
    small_case: str, instance: dg.DagsterInstance, blocker: str
) -> None:
    eval_id = _registered(small_case)
    kind = runs.kind_of("holdout")
    if blocker == "run slots taken":
        for _ in range(MAX_CONCURRENT_RUNS):
            _other_run(instance, dg.DagsterRunStatus.STARTED)
    elif blocker == "a run queued":
        _other_run(instance, dg.DagsterRunStatus.QUEUED)
    else:
        from dagster._daemon.types import DaemonHeartbeat

        instance.add_daemon_heartbeat(
            DaemonHeartbeat(time.time(), "QUEUED_RUN_COORDINATOR", "a daemon", None)
        )
    assert not runs.run_slot_free(instance)
    assert runs.create_inline_run(instance, kind, eval_id, only_if_slot_free=True) is None
    assert instance.get_runs_count(dg.RunsFilter(tags={runs.PARTITION_TAG: eval_id})) == 0


def test_a_run_starting_here_takes_a_run_slot_at_once(
    small_case: str, instance: dg.DagsterInstance
) -> None:
    """The look at the free slots and the run's record are one step: the run counts against
    ``max_concurrent_runs`` before it executes, so the next start sees the slots taken."""
    kind = runs.kind_of("holdout")
    starting = [
        runs.create_inline_run(
            instance, kind, _registered(small_case, seed), only_if_slot_free=True
        )
        for seed in range(1, MAX_CONCURRENT_RUNS + 1)
    ]
    assert all(run is not None for run in starting)
    late = _registered(small_case, 99)
    assert runs.create_inline_run(instance, kind, late, only_if_slot_free=True) is None
    # A submitted run waits in the queue for them: the dispatcher counts them as active.
    submitted = api.start_holdout_eval(
        small_case, VARIANTS, api.HoldoutOptions(sample_size=20, seed=98)
    )
    assert submitted.status == "queued"
    for run in starting:
        assert run is not None
        assert runs.execute_run_here(instance, run).state == "succeeded"
    final = api.wait_for_eval(small_case, submitted.eval_id, timeout=240)
    assert final.status == "complete"


def _hold_warehouse_lock() -> subprocess.Popen[str]:
    """Another process holding the warehouse's write lock: a step opening it waits (DuckDB
    lets a process share its own lock, so it has to be another process)."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True);"
            " time.sleep(300)",
            os.environ["EVAL_PIPELINES_WAREHOUSE"],
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def _interrupt_once_waiting(
    instance: dg.DagsterInstance, run_id: str, interrupt: Callable[[], object]
) -> threading.Thread:
    """Call ``interrupt`` once the run's first step has started (and waits for the lock)."""

    def wait_then_interrupt() -> None:
        _wait_for(lambda: any(instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)))
        time.sleep(0.3)  # inside the step's wait for the lock
        interrupt()

    thread = threading.Thread(target=wait_then_interrupt)
    thread.start()
    return thread


def test_terminating_an_inline_run_from_the_ui_cancels_it(
    small_case: str, instance: dg.DagsterInstance
) -> None:
    eval_id = _registered(small_case)
    run = runs.create_inline_run(instance, runs.kind_of("holdout"), eval_id)
    assert run is not None
    asked: list[bool] = []
    holder = _hold_warehouse_lock()
    try:
        # What the UI's Terminate button does; no code server serves this run, so the
        # launcher can only mark it canceling (and says it could not send the request).
        terminator = _interrupt_once_waiting(
            instance, run.run_id, lambda: asked.append(instance.run_launcher.terminate(run.run_id))
        )
        state = runs.execute_run_here(instance, run)
        terminator.join()
    finally:
        holder.kill()
        holder.wait()
    assert asked == [False]
    assert state.state == "canceled" and (state.reason or "").startswith("canceled")
    assert instance.event_log_storage.get_concurrency_info(DUCKDB_POOL).active_run_ids == set()
    status = api.get_holdout_eval(small_case, eval_id)
    assert status.run.state == "canceled"


def test_an_interrupt_cancels_an_inline_run_and_says_so(
    small_case: str, instance: dg.DagsterInstance
) -> None:
    eval_id = _registered(small_case)
    run = runs.create_inline_run(instance, runs.kind_of("holdout"), eval_id)
    assert run is not None
    holder = _hold_warehouse_lock()
    try:
        # Ctrl-C: SIGINT to this process while the run's first step waits.
        interrupter = _interrupt_once_waiting(
            instance, run.run_id, lambda: os.kill(os.getpid(), signal.SIGINT)
        )
        with pytest.raises(runs.RunInterrupted) as interrupted:
            runs.execute_run_here(instance, run)
        interrupter.join()
    finally:
        holder.kill()
        holder.wait()
    assert interrupted.value.state.state == "canceled"  # canceled, not failed
    reloaded = instance.get_run_by_id(run.run_id)
    assert reloaded is not None and reloaded.status == dg.DagsterRunStatus.CANCELED
    assert instance.event_log_storage.get_concurrency_info(DUCKDB_POOL).active_run_ids == set()
