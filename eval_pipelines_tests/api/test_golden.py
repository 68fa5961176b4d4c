"""Golden sets through the Python API, end to end: the demo workflow (invoice2data over the
three Harbour Lane Paper Co. invoices in ``data/demo/golden/``), a real DuckDB warehouse and
real Dagster runs of job ``golden_gate`` executed in-process (``wait=True``).

Hand count of the demo labels (every labelled value is one scored item; a key column's cells
are labelled cells too):

- hlp-1001: 4 header fields + 3 rows x 4 columns (sku, description, qty, unit_price) = 16
- hlp-1002: 4 header fields + 2 rows x 3 columns (sku, qty, unit_price; matched by sku) = 10
- hlp-1003: 4 header fields + 1 row x 3 columns (sku, qty, unit_price) = 7

33 items in all: 12 header values (3 per field) and 21 cells (sku 6, description 3, qty 6,
unit_price 6). Without the ``customer`` field, 33 - 3 = 30 remain.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipelines_tests.helpers.golden_demo import (
    ALL_FIELDS_PASS,
    DOCS,
    GOLDEN,
    WORKFLOW,
    WORKFLOW_FILE,
    renamed_variant,
    seed,
    without_customer_variant,
)


def field_rows(report: dict) -> list[tuple[str, int, int]]:
    return [(f["key"], f["scored"], f["correct"]) for f in report.score.to_json()["fields"]]


def test_first_run_pays_rerun_is_cached_and_activation_is_ledgered(golden_home: Path) -> None:
    from eval_pipelines.api import golden, workflows

    saved = workflows.save_workflow(WORKFLOW, WORKFLOW_FILE, saved_by="ana")
    revision = saved.revision
    assert saved == workflows.SavedWorkflowResult(WORKFLOW, revision, "extract", True)
    # Saving identical content again is the same revision, not a new one.
    assert workflows.save_workflow(WORKFLOW, WORKFLOW_FILE).new is False
    created = golden.create_set("inv", workflow=WORKFLOW, gate=True)
    assert (created.node, created.threshold, created.gate) == ("invoice", 1.0, True)
    added = [
        golden.add_golden_case(
            "inv", document=GOLDEN / f"{d}.txt", labels=GOLDEN / f"{d}.labels.json"
        )
        for d in DOCS
    ]
    assert [a.case_id for a in added] == ["case-0001", "case-0002", "case-0003"]
    assert [a.unmapped for a in added] == [(), (), ()]
    assert [a.key_columns for a in added] == [{}, {"line_items": ("sku",)}, {}]

    first = golden.run_and_report("inv")
    assert (first.status, first.revision, first.set_name) == ("completed", revision, "inv")
    assert first.score.to_json()["fieldAccuracy"] == {"correct": 33, "n": 33, "value": 1.0}
    assert {k: first.score.to_json()["passRate"][k] for k in ("passed", "n", "value")} == {
        "passed": 3,
        "n": 3,
        "value": "insufficient_evidence",  # 3 documents: fewer than 20
    }
    assert first.score.to_json()["counts"] == {
        "passed": 3,
        "failed": 0,
        "errored": 0,
        "skipped": 0,
        "disabled": 0,
    }
    assert first.score.to_json()["stale"] == {"fields": 0, "labels": 0}
    assert field_rows(first) == ALL_FIELDS_PASS
    assert {c: s.status for c, s in first.cases.items()} == {
        "case-0001": "passed",
        "case-0002": "passed",
        "case-0003": "passed",
    }
    assert [first.cases[c].scored for c in sorted(first.cases)] == [16, 10, 7]
    # A first run pays in full: one invoice2data step per document at cost 1.
    assert first.charged.to_json() == {"executedSteps": 3, "cachedSteps": 0, "costUnits": 3.0}

    second = golden.run_and_report("inv")
    assert second.golden_run_id != first.golden_run_id
    assert second.revision == revision
    assert second.score.to_json()["fieldAccuracy"] == {"correct": 33, "n": 33, "value": 1.0}
    # Same revision, same documents: every step is served from cache and costs nothing.
    assert second.charged.to_json() == {"executedSteps": 0, "cachedSteps": 3, "costUnits": 0.0}

    status = workflows.workflow_status(WORKFLOW)
    assert status.active_revision is None
    assert status.gate.state == "passed"
    assert status.gate.reason == "set inv: scored 1.000 (33/33) at or above threshold 1.0"

    activated = workflows.activate_workflow(WORKFLOW, revision, by="ana")
    assert activated.revision == revision and activated.activated_by == "ana"
    # The gate judges the newest completed run against the revision.
    assert activated.gate_runs == (second.golden_run_id,)
    ledger = workflows.activation_ledger(WORKFLOW)
    assert [(e.revision, e.activated_by, e.gate_runs) for e in ledger] == [
        (revision, "ana", (second.golden_run_id,))
    ]
    assert workflows.workflow_status(WORKFLOW).active_revision.revision == revision


def test_rename_keeps_labels_and_a_removed_field_is_stale_not_missed(
    golden_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines.api import golden, workflows
    from eval_pipelines.cli.main import main

    original = seed()
    renamed = workflows.save_workflow(WORKFLOW, renamed_variant(golden_home)).revision
    assert renamed != original  # a rename is a new revision...
    run = golden.run_and_report("inv")
    assert run.revision == renamed
    # ... whose labels stay attached to field id ``customer``: still 33/33.
    assert run.score.to_json()["fieldAccuracy"] == {"correct": 33, "n": 33, "value": 1.0}
    assert field_rows(run) == ALL_FIELDS_PASS
    assert run.score.to_json()["stale"] == {"fields": 0, "labels": 0}
    assert run.schema_drift == ()
    capsys.readouterr()
    assert main(["golden", "cases", "inv"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(c["caseId"], c["schemaDrift"]) for c in listed] == [
        ("case-0001", False),
        ("case-0002", False),
        ("case-0003", False),
    ]

    removed = workflows.save_workflow(WORKFLOW, without_customer_variant(golden_home)).revision
    run = golden.run_and_report("inv")
    assert run.revision == removed
    # The node's configuration did not change (only its schema), so every step is cached.
    assert run.charged.to_json() == {"executedSteps": 0, "cachedSteps": 3, "costUnits": 0.0}
    # 3 customer labels are stale: listed, counted, never scored as misses; 30/30 remain.
    assert run.score.to_json()["fieldAccuracy"] == {"correct": 30, "n": 30, "value": 1.0}
    assert run.score.to_json()["stale"] == {"fields": 1, "labels": 3}
    assert run.score.to_json()["counts"]["passed"] == 3
    customer = [f for f in run.score.to_json()["fields"] if f["key"] == "customer"]
    assert customer == [
        {
            "key": "customer",
            "scored": 0,
            "correct": 0,
            "accuracy": None,
            "stale": True,
            "staleLabels": 3,
        }
    ]
    assert [run.cases[c].stale for c in sorted(run.cases)] == [("customer",)] * 3
    assert [run.cases[c].scored for c in sorted(run.cases)] == [15, 9, 6]
    assert run.schema_drift == ("case-0001", "case-0002", "case-0003")
    capsys.readouterr()
    assert main(["golden", "cases", "inv"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(c["caseId"], c["schemaDrift"]) for c in listed] == [
        ("case-0001", True),
        ("case-0002", True),
        ("case-0003", True),
    ]
    # The labels themselves are kept (a stale label is a signal to fix the set).
    assert [c["labels"]["customer"] for c in listed] == [
        "Corrib Print Studio",
        "Salthill Primary School",
        "Eyre Square Books",
    ]


def test_disabled_case_is_left_out_and_a_deleted_case_leaves_every_run(
    golden_home: Path,
) -> None:
    from eval_pipelines.api import golden

    seed()
    before = golden.run_and_report("inv")
    assert sorted(before.cases) == ["case-0001", "case-0002", "case-0003"]

    disabled = golden.set_golden_case_enabled("inv", "case-0002", False)
    assert disabled.enabled is False
    run = golden.run_and_report("inv")
    # case-0002 (10 items) is left out: 33 - 10 = 23 items over 2 cases.
    assert sorted(run.cases) == ["case-0001", "case-0003"]
    assert run.score.to_json()["fieldAccuracy"] == {"correct": 23, "n": 23, "value": 1.0}
    assert (run.score.to_json()["passRate"]["passed"], run.score.to_json()["passRate"]["n"]) == (
        2,
        2,
    )
    assert run.charged.to_json() == {"executedSteps": 0, "cachedSteps": 2, "costUnits": 0.0}
    kept = {c.case_id: c for c in golden.list_golden_cases("inv")}
    assert kept["case-0002"].enabled is False
    assert kept["case-0002"].labels["invoice_number"] == "HLP-1002"  # labels kept
    assert kept["case-0002"].key_columns == {"line_items": ("sku",)}

    deleted = golden.delete_golden_case("inv", "case-0002", yes=True)
    # Its one result (from the first run; the second never ran it) goes with it.
    assert deleted.to_json() == {
        "set": "inv",
        "caseId": "case-0002",
        "deleted": True,
        "resultsDeleted": 1,
    }
    earlier = golden.run_report(before.golden_run_id)
    assert sorted(earlier.cases) == ["case-0001", "case-0003"]
    assert earlier.score.to_json()["fieldAccuracy"] == {"correct": 23, "n": 23, "value": 1.0}
    assert [c.case_id for c in golden.list_golden_cases("inv")] == ["case-0001", "case-0003"]
    # Case ids are never reused.
    again = golden.add_golden_case(
        "inv", document=GOLDEN / "hlp-1002.txt", labels=GOLDEN / "hlp-1002.labels.json"
    )
    assert again.case_id == "case-0004"


def test_the_ledger_keeps_the_decision_and_the_active_revision_is_not_activated_twice(
    golden_home: Path,
) -> None:
    from eval_pipelines.api import golden, workflows
    from eval_pipelines.core.errors import ConflictError

    revision = seed()
    golden.run_and_report("inv")
    workflows.activate_workflow(WORKFLOW, revision, by="ana")
    with pytest.raises(ConflictError, match="already the active revision"):
        workflows.activate_workflow(WORKFLOW, revision, by="bo")
    # Deleting a case changes its past runs' scores (001), never what the ledger recorded.
    golden.delete_golden_case("inv", "case-0003", yes=True)
    (entry,) = workflows.activation_ledger(WORKFLOW)
    assert entry.activated_by == "ana"
    assert entry.gate_decision["passed"] is True
    assert entry.gate_decision["sets"][0]["reason"] == (
        "set inv: scored 1.000 (33/33) at or above threshold 1.0"
    )


def test_a_case_is_never_seeded_from_a_run_whose_document_was_deleted(
    golden_home: Path,
) -> None:
    from eval_pipelines.api import golden, workflows
    from eval_pipelines.core.errors import NotFoundError

    seed()
    run = workflows.run_workflow(WORKFLOW, GOLDEN / "hlp-1003.txt")
    workflows.approve_run(run.test_run_id, run.outputs["invoice"], by="ana")
    golden.delete_golden_case("inv", "case-0003", yes=True)  # the only case on that document
    workflows.delete_document(run.document_id)
    with pytest.raises(NotFoundError, match="no such document"):
        golden.add_golden_case_from_run("inv", run.test_run_id)
    assert [c.case_id for c in golden.list_golden_cases("inv")] == ["case-0001", "case-0002"]


def test_a_python_function_changed_to_drop_a_field_is_gated_again_not_served_from_cache(
    golden_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eval_pipelines.api import golden, workflows
    from eval_pipelines_tests.helpers.user_code import (
        DROPS_CUSTOMER,
        KEEPS_CUSTOMER,
        WORKFLOW_YAML,
        write_user_module,
    )

    code = golden_home / "user_code"
    code.mkdir()
    write_user_module(code, monkeypatch, KEEPS_CUSTOMER)
    workflow_file = golden_home / "fields.yaml"
    workflow_file.write_text(WORKFLOW_YAML, encoding="utf-8")
    document = golden_home / "inv-1.txt"
    document.write_text("Invoice INV-1\nBill to: Acme\n", encoding="utf-8")
    labels = golden_home / "inv-1.labels.json"
    labels.write_text(json.dumps({"number": "INV-1", "customer": "Acme"}), encoding="utf-8")
    first = workflows.save_workflow("fields", workflow_file).revision
    golden.create_set("fields-gate", workflow="fields", gate=True)
    golden.add_golden_case("fields-gate", document=document, labels=labels)
    passed = golden.run_and_report("fields-gate")
    assert passed.score.to_json()["fieldAccuracy"] == {
        "correct": 2,
        "n": 2,
        "value": "insufficient_evidence",
    }

    # The same workflow file, the function edited to drop ``customer``.
    write_user_module(code, monkeypatch, DROPS_CUSTOMER)
    saved = workflows.save_workflow("fields", workflow_file)

    assert saved.new is True and saved.revision != first
    rerun = golden.run_and_report("fields-gate")
    assert rerun.revision == saved.revision
    # The step ran with the new code (no cached output of the old code was reused) ...
    assert rerun.charged.to_json() == {"executedSteps": 1, "cachedSteps": 0, "costUnits": 1.0}
    assert rerun.score.to_json()["fieldAccuracy"] == {
        "correct": 1,
        "n": 2,
        "value": "insufficient_evidence",
    }
    # ... and the gate refuses the new revision.
    status = workflows.workflow_status("fields")
    assert status.gate.state == "blocked"
    assert "scored 1/2 below threshold 1.0" in status.gate.reason


def test_the_key_matched_twin_of_a_positional_case_is_a_case_of_its_own(
    golden_home: Path,
) -> None:
    from eval_pipelines.api import golden, workflows

    workflows.save_workflow(WORKFLOW, WORKFLOW_FILE)
    golden.create_set("inv", workflow=WORKFLOW)
    keyed = json.loads((GOLDEN / "hlp-1002.labels.json").read_text(encoding="utf-8"))
    positional = golden_home / "positional.labels.json"
    positional.write_text(
        json.dumps({**keyed, "line_items": keyed["line_items"]["rows"]}), encoding="utf-8"
    )
    first = golden.add_golden_case("inv", document=GOLDEN / "hlp-1002.txt", labels=positional)
    assert (first.case_id, first.added, first.key_columns) == ("case-0001", True, {})
    # Same document, same labels, rows matched by sku instead of by position: it scores
    # differently (the labels list CR-020 first, the document PA-101), so it is another case.
    twin = golden.add_golden_case(
        "inv", document=GOLDEN / "hlp-1002.txt", labels=GOLDEN / "hlp-1002.labels.json"
    )
    assert (twin.case_id, twin.added, twin.key_columns) == (
        "case-0002",
        True,
        {"line_items": ("sku",)},
    )
    again = golden.add_golden_case(
        "inv", document=GOLDEN / "hlp-1002.txt", labels=GOLDEN / "hlp-1002.labels.json"
    )
    assert (again.case_id, again.added) == ("case-0002", False)


def test_a_failed_step_is_served_from_cache_like_a_success_and_says_so(
    golden_home: Path,
) -> None:
    from eval_pipelines.api import golden, workflows
    from eval_pipelines_tests.helpers.golden_demo import broken_variant

    seed()
    letter = golden_home / "letter.txt"
    letter.write_text("Dear customer, thank you for your order.\n", encoding="utf-8")
    golden.add_golden_case("inv", document=letter, labels={"invoice_number": "HLP-9999"})
    first = golden.run_and_report("inv")
    # Four documents, one invoice2data step each; the letter matches no template.
    assert first.charged.to_json() == {"executedSteps": 4, "cachedSteps": 0, "costUnits": 4.0}
    why = first.cases["case-0004"].why
    assert why.startswith("no output: node invoice: ") and "cache" not in why

    second = golden.run_and_report("inv")
    # The failed step is not charged again: its outcome is cached, keyed like a success.
    assert second.charged.to_json() == {"executedSteps": 0, "cachedSteps": 4, "costUnits": 0.0}
    assert second.cases["case-0004"].status == "errored"
    assert second.cases["case-0004"].why == (
        f"{why} (served from cache: this step failed the same way on an earlier run; a "
        "changed configuration runs it again)"
    )
    # A changed node configuration runs every step again, the failed one too.
    workflows.save_workflow(WORKFLOW, broken_variant(golden_home))
    third = golden.run_and_report("inv")
    assert third.charged.to_json() == {"executedSteps": 4, "cachedSteps": 0, "costUnits": 4.0}
    assert third.cases["case-0004"].why == why


def test_steps_executed_counts_steps_not_cases(golden_home: Path) -> None:
    from eval_pipelines.api import golden

    seed()
    # A second case on hlp-1001: the document runs once, its one step is charged once.
    golden.add_golden_case("inv", document=GOLDEN / "hlp-1001.txt", labels={"total": 530.62})
    first = golden.run_and_report("inv")
    assert len(first.cases) == 4
    assert first.charged.to_json() == {"executedSteps": 3, "cachedSteps": 0, "costUnits": 3.0}
    second = golden.run_and_report("inv")
    assert second.charged.to_json() == {"executedSteps": 0, "cachedSteps": 3, "costUnits": 0.0}


def test_a_golden_run_on_postgresql_decides_its_gate_once(
    postgres_workdir: Path, golden_home: Path
) -> None:
    """The same two runs of a gating set on a PostgreSQL warehouse: the gate passed from the
    newest, the activation ledgered."""
    test_first_run_pays_rerun_is_cached_and_activation_is_ledgered(golden_home)
