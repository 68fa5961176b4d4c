"""``gate_decision``, the one rule behind `workflow activate`, `workflow status` and the
`activation_gate` check, on stored golden runs: not run, below threshold, mixed revisions,
a run that did not complete, the newest completed run deciding."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from eval_pipelines.api import golden, workflows
from eval_pipelines.api._golden_state import gate_decision  # counting runs as activation does
from eval_pipelines.stages.golden import run_golden_sets
from eval_pipelines.storage import golden as golden_store
from eval_pipelines.storage.warehouse import connect, transaction
from eval_pipelines_tests.helpers.golden_demo import (
    GOLDEN,
    WORKFLOW,
    broken_variant,
    seed,
    workflow_variant,
)


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
        results = golden_store.results_of_run(conn, outcome.golden_run_id)
        conn.execute("DELETE FROM golden_results WHERE golden_run_id = ?", [outcome.golden_run_id])
        # One case's output came from another revision (as a merged or resumed run would).
        mixed = [replace(results[0], revision="0123456789ab"), *results[1:]]
        golden_store.finish_run(
            conn,
            outcome.golden_run_id,
            [("gate", r) for r in mixed],
            status="completed",
            cost_units=0.0,
            executed_steps=0,
            cached_steps=0,
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
    worse = workflows.save_workflow(WORKFLOW, broken_variant(workdir)).revision
    golden.create_set("lenient", workflow=WORKFLOW, threshold=0.9, gate=True)
    with _open() as conn, transaction(conn):
        for case in golden_store.list_cases(conn, "gate"):
            golden_store.add_case(conn, replace(case, set_name="lenient"))
    run_golden_sets(_open, worse)
    with _open(read_only=True) as conn:
        gate = gate_decision(conn, worse)
    verdicts = {s.set_name: (s.passed, s.reason) for s in gate.sets}
    # 30 of 33 values right: 0.909 passes 0.9 and fails 1.0.
    assert verdicts == {
        "gate": (
            False,
            "set gate: scored 0.909 (30/33) below threshold 1.0 (misses: customer 3 of 3 wrong)",
        ),
        "lenient": (True, "set lenient: scored 0.909 (30/33) at or above threshold 0.9"),
    }
    assert (
        not gate.passed
        and gate.reason
        == "set gate: scored 0.909 (30/33) below threshold 1.0 (misses: customer 3 of 3 wrong)"
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
    worse = workflows.save_workflow(WORKFLOW, narrow).revision
    (outcome,) = run_golden_sets(_open, worse)
    from eval_pipelines.stages.golden import score_run

    with _open(read_only=True) as conn:
        scored = score_run(conn, outcome.golden_run_id)
        gate = gate_decision(conn, worse)
    assert (scored.score.field_correct, scored.score.field_scored) == (16, 16)
    assert scored.score.errored == 2
    assert not gate.passed
    assert gate.reason.startswith("set gate: 2 case(s) produced no output (case-0002: node invoice")


def _invented_rows_labels(folder: Path) -> Path:
    """hlp-1001 labelled with two of its three rows: the extraction's third row is invented."""
    labels = json.loads((GOLDEN / "hlp-1001.labels.json").read_text(encoding="utf-8"))
    labels["line_items"] = labels["line_items"][:2]
    path = folder / "two_rows.labels.json"
    path.write_text(json.dumps(labels), encoding="utf-8")
    return path


def _not_an_invoice(folder: Path) -> tuple[Path, Path]:
    """A document the template does not match (no output) and a label for it."""
    document = folder / "letter.txt"
    document.write_text("Dear customer, thank you for your order.\n", encoding="utf-8")
    labels = folder / "letter.labels.json"
    labels.write_text(json.dumps({"invoice_number": "HLP-9999"}), encoding="utf-8")
    return document, labels


def test_cases_added_while_the_run_ran_are_not_covered_and_block(
    revision: str, workdir: Path
) -> None:
    # The run reads the set's cases, then a user adds three more while it runs (the
    # sensor's run started while a new set was being filled in).
    added: list[str] = []

    def log(line: str) -> None:
        if line.startswith("running") and not added:
            for doc in ("hlp-1002", "hlp-1003", "hlp-1001"):
                labels = GOLDEN / f"{doc}.labels.json"
                if doc == "hlp-1001":
                    labels = _invented_rows_labels(workdir)
                document = GOLDEN / f"{doc}.txt"
                added.append(
                    golden.add_golden_case("late", document=document, labels=labels).case_id
                )

    golden.create_set("late", workflow=WORKFLOW, gate=True)
    golden.add_golden_case(
        "late", document=GOLDEN / "hlp-1001.txt", labels=GOLDEN / "hlp-1001.labels.json"
    )
    outcomes = run_golden_sets(_open, revision, log=log)
    assert {o.set_name: o.cases for o in outcomes} == {"gate": 3, "late": 1}
    assert added == ["case-0002", "case-0003", "case-0004"]
    with _open(read_only=True) as conn:
        gate = gate_decision(conn, revision)
    verdicts = {s.set_name: s for s in gate.sets}
    assert verdicts["gate"].passed
    late = verdicts["late"]
    run_id = next(o.golden_run_id for o in outcomes if o.set_name == "late")
    assert not late.passed and not gate.passed
    assert late.reason == (
        f"set late: run {run_id} does not cover 3 of its 4 enabled case(s) (case-0002, "
        "case-0003, case-0004: added or enabled since it ran); re-run the set against this "
        f"revision (eval-pipelines golden run late --revision {revision})"
    )
    # The re-run covers them all, and the invented row now costs the set its pass:
    # 16 + 10 + 7 values, plus case-0004's 4 header values and 2 rows x 4 cells, all right,
    # and one miss for the invented third row: 45 of 46.
    run_golden_sets(_open, revision, set_names=["late"])
    with _open(read_only=True) as conn:
        rerun = {s.set_name: s for s in gate_decision(conn, revision).sets}["late"]
    assert (rerun.passed, rerun.reason) == (
        False,
        "set late: scored 0.978 (45/46) below threshold 1.0 (misses: line_items 1 of 1 wrong)",
    )


def test_cases_added_after_a_passing_run_block_until_the_set_is_rerun(
    revision: str, workdir: Path
) -> None:
    run_golden_sets(_open, revision)
    with _open(read_only=True) as conn:
        assert gate_decision(conn, revision).passed
    golden.add_golden_case(
        "gate", document=GOLDEN / "hlp-1001.txt", labels=_invented_rows_labels(workdir)
    )
    letter, letter_labels = _not_an_invoice(workdir)
    golden.add_golden_case("gate", document=letter, labels=letter_labels)
    with _open(read_only=True) as conn:
        gate = gate_decision(conn, revision)
    assert not gate.passed
    assert "does not cover 2 of its 5 enabled case(s) (case-0004, case-0005: added or " in (
        gate.reason
    )
    run_golden_sets(_open, revision)
    with _open(read_only=True) as conn:
        gate = gate_decision(conn, revision)
    assert not gate.passed
    assert gate.reason.startswith("set gate: 1 case(s) produced no output (case-0005: ")


def test_a_case_enabled_again_since_the_run_blocks_and_one_disabled_since_is_left_out(
    revision: str,
) -> None:
    golden.set_golden_case_enabled("gate", "case-0003", False)
    (first,) = run_golden_sets(_open, revision)
    assert first.cases == 2
    golden.set_golden_case_enabled("gate", "case-0003", True)
    with _open(read_only=True) as conn:
        gate = gate_decision(conn, revision)
    assert not gate.passed
    assert "does not cover 1 of its 3 enabled case(s) (case-0003: added or enabled" in gate.reason
    (second,) = run_golden_sets(_open, revision)
    golden.set_golden_case_enabled("gate", "case-0001", False)
    with _open(read_only=True) as conn:
        gate = gate_decision(conn, revision)
    # The set as it is now: case-0002 and case-0003 (10 + 7 values); case-0001's result in
    # the run is left out, and the reason says so.
    assert gate.passed and gate.sets[0].golden_run_id == second.golden_run_id
    assert gate.reason == (
        "set gate: scored 17/17 at or above threshold 1.0 (case-0001 disabled since "
        "the run, left out)"
    )
