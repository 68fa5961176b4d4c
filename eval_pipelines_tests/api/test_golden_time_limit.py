"""A template regex that never finishes cannot hang a golden run, nor outlive a canceled one:
the demo set plus a fourth invoice whose text ends in 40 ``a`` and a ``!``, scored by a
variant of the demo workflow whose template also extracts ``reference: (a+)+$`` (about 2^40
backtracking steps on that document, a few on the others), with a per-step time limit.

Real DuckDB warehouse, real Dagster runs of ``golden_gate``: executed in-process, and
submitted (dispatcher, code server, run worker process), as the sensor's gating runs are.
Before the fix, that submitted run froze in ``re`` (it holds the GIL), Terminate timed out
with "User code server request timed out due to taking longer than 60 seconds" and the run
worker kept spinning with its golden run ``running``."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from eval_pipelines_tests.helpers.golden_demo import (
    WORKFLOW,
    regex_variant,
    seed_with_hanging_case,
)
from eval_pipelines_tests.helpers.stuck_runs import (
    execute_and_terminate_once_stuck,
    gone,
    killed_and_the_rest_idle,
    submitted_run_stuck,
    wait_for,
)


def test_a_hanging_regex_fails_its_case_after_the_time_limit_and_the_run_completes(
    golden_home: Path,
) -> None:
    from eval_pipelines.api import golden

    revision = seed_with_hanging_case(golden_home, time_limit=2)

    report = golden.run_and_report("inv")

    assert (report.status, report.revision) == ("completed", revision)
    statuses = {c: s.status for c, s in report.cases.items()}
    assert statuses == {
        "case-0001": "passed",
        "case-0002": "passed",
        "case-0003": "passed",
        "case-0004": "errored",
    }
    assert report.cases["case-0004"].why.startswith("no output: node invoice: timed out after 2 s")
    # The other three documents were scored in full (33 labelled values, counted by hand in
    # api/test_golden.py); the timed-out case is outside the scores, and the gate blocks it.
    assert report.score.to_json()["fieldAccuracy"] == {"correct": 33, "n": 33, "value": 1.0}
    assert report.gate.passed is False
    assert "1 case(s) produced no output (case-0004: node invoice: timed out after 2 s" in (
        report.gate.reason
    )
    # A time-out is not cached (a busy machine can time out a step that finishes next time):
    # the next run executes that step again and serves the three others from cache.
    again = golden.run_and_report("inv")
    assert again.charged.to_json() == {"executedSteps": 1, "cachedSteps": 3, "costUnits": 1.0}
    assert "served from cache" not in again.cases["case-0004"].why


def test_terminating_a_run_stuck_in_a_regex_cancels_it_stops_the_worker_and_the_next_run_works(
    golden_home: Path,
) -> None:
    from eval_pipelines import runs
    from eval_pipelines.api import golden
    from eval_pipelines.core.workflows import step_worker
    from eval_pipelines.storage import golden as golden_store
    from eval_pipelines.storage.warehouse import connect

    # A limit far beyond the test: only Terminate can end this step.
    revision = seed_with_hanging_case(golden_home, time_limit=600)
    instance = dg.DagsterInstance.get()
    run = runs.create_inline_run(instance, runs.kind_of("golden"), revision)
    assert run is not None
    state, stuck = execute_and_terminate_once_stuck(instance, run)

    assert state.state == "canceled"
    with connect(Path("warehouse.duckdb"), read_only=True) as conn:
        (stopped,) = golden_store.runs_of_dagster_run(conn, run.run_id)
        results = {r.case_id: r for r in golden_store.results_of_run(conn, stopped.golden_run_id)}
    # The golden run is closed, not left running; the hanging case was not reached.
    assert stopped.status == "stopped"
    assert (results["case-0004"].ran, results["case-0004"].skip_reason) == (
        False,
        "the run stopped before this case",
    )
    assert stuck and step_worker.busy_pids() == []
    assert killed_and_the_rest_idle(
        stuck
    )  # the worker stuck in the regex was killed, not left spinning

    # The process is not wedged: the next run of another revision completes.
    from eval_pipelines.api import workflows

    fast = workflows.save_workflow(WORKFLOW, regex_variant(golden_home, time_limit=2))
    after = golden.run_and_report("inv", revision=fast.revision)
    assert after.status == "completed"
    assert after.cases["case-0004"].status == "errored"


def test_terminating_a_submitted_run_stuck_in_a_regex_stops_its_process_and_the_next_run_runs(
    golden_home: Path,
) -> None:
    """The path the sensor's gating runs take: submitted, started by the dispatcher in a run
    worker process of its own, terminated as the UI does (through the code server)."""
    from eval_pipelines.api import golden, workflows
    from eval_pipelines.runs.instance import dagster_instance
    from eval_pipelines.storage import golden as golden_store
    from eval_pipelines.storage.warehouse import connect

    revision = seed_with_hanging_case(golden_home, time_limit=600)
    started = golden.run_set("inv", revision=revision)
    instance = dagster_instance()
    run_id = started.run_id
    worker_pid, hung = submitted_run_stuck(instance, run_id)
    assert instance.run_launcher.terminate(run_id)
    wait_for(
        lambda: (
            instance.get_run_by_id(run_id).status  # type: ignore[union-attr]
            == dg.DagsterRunStatus.CANCELED
        )
    )

    # The run's process and its worker stopped: nothing is left spinning.
    wait_for(lambda: gone(worker_pid) and all(gone(p) for p in hung))
    with connect(Path("warehouse.duckdb"), read_only=True) as conn:
        (stopped,) = golden_store.runs_of_dagster_run(conn, run_id)
    assert stopped.status == "stopped"
    # The next submitted run, through the same dispatcher and code server, completes.
    fast = workflows.save_workflow(WORKFLOW, regex_variant(golden_home, time_limit=2))
    after = golden.run_and_report("inv", revision=fast.revision, timeout=300)
    assert after.status == "completed"
    assert after.cases["case-0004"].why.startswith("no output: node invoice: timed out after 2 s")
