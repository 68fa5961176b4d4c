"""``gate_decision``, the one rule behind `workflow activate`, `workflow status` and the
`activation_gate` check, on stored golden runs: not run, below threshold, mixed revisions,
a run that did not complete, the newest completed run deciding."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from eval_pipelines.api import golden, workflows
from eval_pipelines.stages.golden import gate_decision, run_golden_sets
from eval_pipelines.storage import golden as golden_storage
from eval_pipelines.storage.warehouse import connect, transaction
from eval_pipelines_tests.golden_demo import WORKFLOW, broken_variant, seed, workflow_variant


@pytest.fixture
def revision(golden_home: Path) -> str:
    """The demo workflow saved, with a gating set ``gate`` of its three documents."""
    return seed("gate")


def _open(read_only: bool = False):  # noqa: ANN202
    return connect(Path("warehouse.duckdb"), read_only=read_only)


def test_not_run_then_passed(revision: str) -> None:
    with _open(read_only=True) as conn:
        before = gate_decision(conn, revision)
    assert not before.passed
    assert before.reason == f"set gate has not been run against revision {revision}"
    (outcome,) = run_golden_sets(_open, revision)
    with _open(read_only=True) as conn:
        after = gate_decision(conn, revision)
    assert after.passed and after.sets[0].golden_run_id == outcome.golden_run_id


def test_a_run_whose_cases_scored_another_revision_is_refused_as_mixed(revision: str) -> None:
    (outcome,) = run_golden_sets(_open, revision)
    with _open() as conn, transaction(conn):
        results = golden_storage.results_of_run(conn, outcome.golden_run_id)
        conn.execute("DELETE FROM golden_results WHERE golden_run_id = ?", [outcome.golden_run_id])
        # One case's output came from another revision (as a merged or resumed run would).
        mixed = [replace(results[0], revision="0123456789ab"), *results[1:]]
        golden_storage.finish_run(
            conn,
            outcome.golden_run_id,
            [("gate", r) for r in mixed],
            status="completed",
            cost_units=0.0,
        )
    with _open(read_only=True) as conn:
        gate = gate_decision(conn, revision)
    assert not gate.passed
    assert "mixed revisions (cases case-0001 scored another revision)" in gate.reason


def test_only_completed_runs_count_and_the_newest_decides(revision: str, workdir: Path) -> None:
    (first,) = run_golden_sets(_open, revision)
    with _open() as conn, transaction(conn):
        conn.execute(
            "UPDATE golden_runs SET status = 'stopped' WHERE golden_run_id = ?",
            [first.golden_run_id],
        )
    with _open(read_only=True) as conn:
        assert gate_decision(conn, revision).reason == (
            f"set gate has not been run against revision {revision} (its newest run there is "
            "stopped)"
        )
    (second,) = run_golden_sets(_open, revision)
    with _open(read_only=True) as conn:
        gate = gate_decision(conn, revision)
    assert gate.passed and gate.sets[0].golden_run_id == second.golden_run_id


def test_a_threshold_below_one_lets_a_partial_score_pass(revision: str, workdir: Path) -> None:
    worse = workflows.save_workflow(WORKFLOW, broken_variant(workdir))["revision"]
    golden.create_set("lenient", workflow=WORKFLOW, threshold=0.9, gate=True)
    with _open() as conn, transaction(conn):
        for case in golden_storage.list_cases(conn, "gate"):
            golden_storage.add_case(conn, replace(case, set_name="lenient"))
    run_golden_sets(_open, worse)
    with _open(read_only=True) as conn:
        gate = gate_decision(conn, worse)
    verdicts = {s.set_name: (s.passed, s.reason) for s in gate.sets}
    # 30 of 33 values right: 0.909 passes 0.9 and fails 1.0.
    assert verdicts == {
        "gate": (
            False,
            "set gate: scored 0.909 (30/33) below threshold 1.0 (misses: customer 0/3)",
        ),
        "lenient": (True, "set lenient: scored 0.909 (30/33) at or above threshold 0.9"),
    }
    assert (
        not gate.passed
        and gate.reason
        == "set gate: scored 0.909 (30/33) below threshold 1.0 (misses: customer 0/3)"
    )


def test_a_stopped_run_records_unreached_cases_as_skipped_and_never_opens_the_gate(
    revision: str,
) -> None:
    calls = iter([False])  # the first document starts, then the run is stopped

    def should_stop() -> bool:
        return next(calls, True)

    (outcome,) = run_golden_sets(_open, revision, should_stop=should_stop)
    assert (outcome.cases, outcome.skipped) == (3, 2)
    from eval_pipelines.stages.golden import score_run

    with _open(read_only=True) as conn:
        scored = score_run(conn, outcome.golden_run_id)
        gate = gate_decision(conn, revision)
    assert scored.run.status == "stopped"
    statuses = sorted(c.status for c in scored.cases.values())
    assert statuses == ["passed", "skipped", "skipped"]
    # Skipped cases leave the pass rate: 1 passed of 1 scored.
    assert (scored.score.passed, scored.score.pass_rate_n, scored.score.skipped) == (1, 1, 2)
    assert "has not been run against revision" in gate.reason


def test_a_revision_that_extracts_nothing_from_a_golden_document_is_blocked(
    revision: str, workdir: Path
) -> None:
    # Only invoice HLP-1001's number matches: the other two documents lose a required field
    # and produce no output. 001 leaves such errored cases out of the scores (the remaining
    # case scores 16/16); the gate must not let the revision through on that.
    narrow = workflow_variant(
        workdir, "narrow", r"Invoice no\.\s+(HLP-\d+)", r"Invoice no\.\s+(HLP-1001)"
    )
    worse = workflows.save_workflow(WORKFLOW, narrow)["revision"]
    (outcome,) = run_golden_sets(_open, worse)
    from eval_pipelines.stages.golden import score_run

    with _open(read_only=True) as conn:
        scored = score_run(conn, outcome.golden_run_id)
        gate = gate_decision(conn, worse)
    assert (scored.score.field_correct, scored.score.field_scored) == (16, 16)
    assert scored.score.errored == 2
    assert not gate.passed
    assert gate.reason.startswith("set gate: 2 case(s) produced no output (case-0002: node invoice")
