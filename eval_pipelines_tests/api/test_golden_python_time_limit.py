"""A ``python`` node whose function never returns cannot hang a golden run: the step runs in
a worker process with the node's ``time_limit`` and fails that case after it, and
terminating the run kills the step under way. Before the fix the function ran in a thread of
the run's process: the pool waited for it for good and the run never finished.

A user module written into the test's folder (as a user's own code on ``sys.path``) loops
forever on the document that says ``LOOP``; real DuckDB warehouse, real Dagster runs of
``golden_gate`` executed in-process."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from eval_pipelines_tests.helpers.stuck_runs import (
    execute_and_terminate_once_stuck,
    killed_and_the_rest_idle,
)
from eval_pipelines_tests.helpers.user_code import MODULE, write_user_module

LOOPS_ON_ONE = """
def fields(document, upstream, *, options):
    if "LOOP" in document.text:
        while True:
            pass
    return {"number": document.text.split()[1], "customer": "Acme"}
"""


def workflow_yaml(time_limit: float) -> str:
    return f"""\
kind: extract
nodes:
  - id: fields
    type: python
    function: "{MODULE}:fields"
    time_limit: {time_limit:g}
    schema:
      fields:
        - {{id: number, name: Number, source: number}}
        - {{id: customer, name: Customer, source: customer}}
"""


def seed(folder: Path, monkeypatch: pytest.MonkeyPatch, *, time_limit: float) -> str:
    """Set ``fields-gate`` (gating) with INV-1, INV-2 and the looping INV-3; returns the
    revision."""
    from eval_pipelines.api import golden, workflows

    code = folder / "user_code"
    code.mkdir(exist_ok=True)
    write_user_module(code, monkeypatch, LOOPS_ON_ONE)
    workflow_file = folder / "fields.yaml"
    workflow_file.write_text(workflow_yaml(time_limit), encoding="utf-8")
    revision = workflows.save_workflow("fields", workflow_file).revision
    golden.create_set("fields-gate", workflow="fields", gate=True)
    for number, extra in (("INV-1", ""), ("INV-2", ""), ("INV-3", "LOOP\n")):
        document = folder / f"{number}.txt"
        document.write_text(f"Invoice {number}\nBill to: Acme\n{extra}", encoding="utf-8")
        labels = folder / f"{number}.labels.json"
        labels.write_text(f'{{"number": "{number}", "customer": "Acme"}}', encoding="utf-8")
        golden.add_golden_case("fields-gate", document=document, labels=labels)
    return str(revision)


def test_a_python_function_that_loops_forever_fails_its_case_after_the_time_limit(
    golden_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eval_pipelines.api import golden

    revision = seed(golden_home, monkeypatch, time_limit=2)

    report = golden.run_and_report("fields-gate")

    assert (report.status, report.revision) == ("completed", revision)
    assert {c: s.status for c, s in report.cases.items()} == {
        "case-0001": "passed",
        "case-0002": "passed",
        "case-0003": "errored",
    }
    assert report.cases["case-0003"].why.startswith("no output: node fields: timed out after 2 s")
    assert "user_fields:fields did not return" in report.cases["case-0003"].why
    # The two other documents were scored in full (2 fields each); the gate blocks.
    assert report.score.to_json()["fieldAccuracy"] == {
        "correct": 4,
        "n": 4,
        "value": "insufficient_evidence",  # fewer than 20 values
    }
    assert report.gate.passed is False
    assert "1 case(s) produced no output (case-0003: node fields: timed out after 2 s" in (
        report.gate.reason
    )
    # Not cached: the next run executes that step again, the two others come from cache.
    again = golden.run_and_report("fields-gate")
    assert again.charged.to_json() == {"executedSteps": 1, "cachedSteps": 2, "costUnits": 1.0}
    assert again.cases["case-0003"].why.startswith("no output: node fields: timed out after 2 s")


def test_the_limit_is_part_of_the_revision_only_when_given(
    golden_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    from eval_pipelines.core.workflows.definition import parse_workflow
    from eval_pipelines_tests.helpers.user_code import WORKFLOW_YAML

    write_user_module(golden_home, monkeypatch, LOOPS_ON_ONE)
    without = parse_workflow(yaml.safe_load(WORKFLOW_YAML), name="w", base_dir=golden_home)
    limited = parse_workflow(yaml.safe_load(workflow_yaml(5)), name="w", base_dir=golden_home)
    assert "time_limit" not in without.nodes[0].config
    assert limited.nodes[0].config["time_limit"] == 5.0
    assert limited.nodes[0].config["source"] == without.nodes[0].config["source"]


def test_terminating_a_run_stuck_in_a_python_function_cancels_it_and_kills_the_worker(
    golden_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eval_pipelines import runs
    from eval_pipelines.core.workflows import step_worker
    from eval_pipelines.storage import golden as golden_store
    from eval_pipelines.storage.warehouse import connect

    revision = seed(golden_home, monkeypatch, time_limit=600)  # only Terminate ends it
    instance = dg.DagsterInstance.get()
    run = runs.create_inline_run(instance, runs.kind_of("golden"), revision)
    assert run is not None
    state, stuck = execute_and_terminate_once_stuck(instance, run)  # inside INV-3's step

    assert state.state == "canceled"
    with connect(Path("warehouse.duckdb"), read_only=True) as conn:
        (stopped,) = golden_store.runs_of_dagster_run(conn, run.run_id)
        results = {r.case_id: r for r in golden_store.results_of_run(conn, stopped.golden_run_id)}
    assert stopped.status == "stopped"
    assert (results["case-0003"].ran, results["case-0003"].skip_reason) == (
        False,
        "the run stopped before this case",
    )
    assert stuck and step_worker.busy_pids() == []
    assert killed_and_the_rest_idle(
        stuck
    )  # the worker looping in the function was killed, not left spinning


def refuses_uncached() -> None:
    from eval_pipelines.core.workflows.nodes import NodeFailed

    raise NodeFailed("the environment, not the document", cacheable=False)


def test_a_failure_that_must_not_be_cached_stays_so_across_the_worker() -> None:
    """A python step's import failing in the worker says nothing about the document: it must
    run again next time, as it did when the step ran in the run's process."""
    from eval_pipelines.core.workflows.nodes import NodeFailed
    from eval_pipelines.core.workflows.step_worker import run_step

    with pytest.raises(NodeFailed) as raised:
        run_step(refuses_uncached, seconds=60)
    assert (str(raised.value), raised.value.cacheable) == (
        "the environment, not the document",
        False,
    )


def test_a_function_of_main_is_refused_when_saved(golden_home: Path) -> None:
    from eval_pipelines.core.errors import InputError
    from eval_pipelines.core.workflows.python_node import PythonNode

    with pytest.raises(InputError) as raised:
        PythonNode().prepare({"function": "__main__:fields"}, "nodes[0]", golden_home)
    assert raised.value.field == "nodes[0].function"
    assert "cannot be imported by the step's worker process" in raised.value.rule
