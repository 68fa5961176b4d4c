"""One run path (issue 20): every kind of run (holdout, golden, query, lift ingest, lift report)
is created from the job the code location serves, carries that location's origin and the
served job's snapshot (so the UI's Re-execute runs the same job, without its "may be
different" warning), and a command that waits executes its run in its own process, the same
way for every kind. Read back from the real DagsterInstance the API wrote to."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import pytest

from eval_pipelines import runs
from eval_pipelines.runs.instance import dagster_instance
from eval_pipelines_tests.helpers.lift_traffic import lever_split, write_log
from eval_pipelines_tests.helpers.query_tables import PREDICT, load_products

VARIANTS = [{"name": "baseline"}, {"name": "five", "config": {"candidates": 5}}]


@pytest.fixture(scope="module")
def served() -> dict[str, str]:
    """Each job's snapshot id as the UI's code server serves it (a real code server process
    loading ``eval_pipelines.definitions``, as ``make dev`` does)."""
    with dg.instance_for_test() as instance, runs.workspace(instance) as context:
        location = context.create_request_context().get_code_location(runs.LOCATION_NAME)
        (repository,) = location.get_repositories().values()
        return {job.name: job.identifying_job_snapshot_id for job in repository.get_all_jobs()}


def _check_reexecutable(run_id: str, job_name: str, served: dict[str, str]) -> dg.DagsterRun:
    run = dagster_instance().get_run_by_id(run_id)
    assert run is not None
    origin = run.remote_job_origin
    assert origin is not None, f"run {run_id} of {job_name} has no origin: the UI cannot re-run it"
    assert origin.location_name == runs.LOCATION_NAME
    assert origin.job_name == job_name
    assert run.job_code_origin is not None
    # What the UI compares to decide whether Re-execute runs the same job: the run's
    # snapshot's parent when it ran a subset, else the run's own (dagster-graphql's
    # parentPipelineSnapshotId, pipelineSnapshotId).
    instance = dagster_instance()
    assert run.job_snapshot_id is not None and instance.has_job_snapshot(run.job_snapshot_id)
    lineage = instance.get_job_snapshot(run.job_snapshot_id).lineage_snapshot
    snapshot_id = lineage.parent_snapshot_id if lineage is not None else run.job_snapshot_id
    assert snapshot_id == served[job_name]
    return run


def _executed_here(run_id: str) -> bool:
    """Executed by this process: never queued, and its process is this one."""
    instance = dagster_instance()
    events = {r.dagster_event.event_type for r in instance.all_logs(run_id) if r.dagster_event}
    return (
        dg.DagsterEventType.RUN_ENQUEUED not in events
        and runs.run_worker_pid(instance, run_id) == os.getpid()
    )


def test_a_waiting_holdout_run_executes_here_from_the_served_job(
    small_case: str, served: dict[str, str]
) -> None:
    from eval_pipelines import api

    started = api.start_holdout_eval(
        small_case, VARIANTS, api.HoldoutOptions(sample_size=20, seed=3), wait=True
    )
    assert started.status == "complete"
    _check_reexecutable(started.run_id, "holdout_eval", served)
    assert _executed_here(started.run_id)


def test_a_submitted_holdout_run_is_queued_from_the_served_job(
    small_case: str, served: dict[str, str]
) -> None:
    from eval_pipelines import api

    started = api.start_holdout_eval(
        small_case, VARIANTS, api.HoldoutOptions(sample_size=20, seed=4), wait=False
    )
    assert started.status in ("queued", "running")
    _check_reexecutable(started.run_id, "holdout_eval", served)


def test_a_golden_run_that_waits_executes_in_this_process(
    golden_home: Path, served: dict[str, str]
) -> None:
    from eval_pipelines.api import golden
    from eval_pipelines_tests.helpers.golden_demo import seed

    seed()
    report = golden.run_and_report("inv")
    assert report.status == "completed"
    _check_reexecutable(report.dagster_run_id, "golden_gate", served)
    # Before: submitted, then dequeued by the dispatcher into a code server and a run worker
    # (a breakpoint() in a stage never stopped the command).
    assert _executed_here(report.dagster_run_id)


def test_a_query_run_executes_here_from_the_served_job(
    workdir: Path, served: dict[str, str]
) -> None:
    from eval_pipelines import api

    load_products(workdir)
    answer = api.run_query(PREDICT)
    run_id = answer.evaluation.run_id
    assert run_id is not None
    _check_reexecutable(run_id, "evaluate_query_job", served)
    assert _executed_here(run_id)


def test_lift_runs_carry_their_origin_and_the_served_snapshot(
    workdir: Path, served: dict[str, str]
) -> None:
    from eval_pipelines.api import lift

    log = write_log(workdir / "week.jsonl", lever_split(), true_lift=0.08, seed=4)
    ingested = lift.ingest(log)
    assert ingested.new and len(ingested.days) >= 7
    # Before: execute_in_process, recorded without an origin and with its own snapshot.
    ingest_run = _check_reexecutable(ingested.run_id, "lift_ingest_job", served)
    assert ingest_run.run_config["ops"]["ingest_lift_log"]["config"]["path"] == str(log)
    assert _executed_here(ingested.run_id)
    report = lift.report()
    _check_reexecutable(report.run_id, "lift_report_job", served)
    assert _executed_here(report.run_id)
