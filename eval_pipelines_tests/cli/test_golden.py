"""``eval-pipelines workflow/golden/document ...`` driven in-process through
:func:`eval_pipelines.cli.main.main`, against a real DuckDB warehouse and real Dagster runs:
the activation gate's refusals, bad input (exit 2, one line, nothing written), cases seeded
from an approved review, compare and trend, and one ``golden run`` through the real queue.

Counts are hand-computed in :mod:`eval_pipelines_tests.api.test_golden` (33 labelled values
on the three demo invoices: 16 + 10 + 7).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import duckdb
import pytest

from eval_pipelines_tests.helpers.golden_demo import (
    GOLDEN,
    WORKFLOW,
    WORKFLOW_FILE,
    broken_variant,
    seed,
    without_customer_variant,
    workflow_variant,
)

TABLES = (
    "workflow_revisions",
    "workflow_activations",
    "golden_sets",
    "golden_cases",
    "golden_runs",
    "golden_results",
    "documents",
    "test_runs",
)


def cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    """Run the CLI in-process; returns (exit code, stdout, stderr) of this command only."""
    from eval_pipelines.cli.main import main

    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> Any:
    code, out, err = cli(capsys, *argv)
    assert code == 0, err
    return json.loads(out)


def refused(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> str:
    """The command exits 2 with exactly one line on stderr and nothing on stdout; returns
    that line without its ``error: `` prefix."""
    code, out, err = cli(capsys, *argv)
    assert code == 2, (argv, code, out, err)
    assert out == "", (argv, out)
    assert err.endswith("\n") and err.count("\n") == 1, (argv, err)
    assert err.startswith("error: "), (argv, err)
    return err[len("error: ") : -1]


def row_counts(warehouse: Path) -> dict[str, int]:
    conn = duckdb.connect(str(warehouse), read_only=True)
    try:
        counts = {}
        for table in TABLES:
            row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            assert row is not None
            counts[table] = int(row[0])
        return counts
    finally:
        conn.close()


def test_gate_refuses_with_the_reason_and_leaves_the_ledger_alone(
    golden_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines.api import golden

    good = seed()
    ledger = ["workflow", "ledger", WORKFLOW]
    assert cli_json(capsys, *ledger) == []

    reason = refused(capsys, "workflow", "activate", WORKFLOW, good, "--by", "ana")
    assert reason == (
        f"revision {good} of {WORKFLOW} cannot be activated: "
        f"set inv has not been run against revision {good}"
    )
    assert cli_json(capsys, *ledger) == []

    passing = golden.run_and_report("inv").to_json()
    activated = cli_json(capsys, "workflow", "activate", WORKFLOW, good, "--by", "ana")
    assert activated["gateRuns"] == [passing["goldenRunId"]]
    entries = cli_json(capsys, *ledger)
    assert [(e["revision"], e["activatedBy"], e["gateRuns"]) for e in entries] == [
        (good, "ana", [passing["goldenRunId"]])
    ]

    saved = cli_json(capsys, "workflow", "save", WORKFLOW, "--file", broken_variant(golden_home))
    broken = saved["revision"]
    assert saved["new"] is True and broken != good
    # Saving is never blocked; activating the unrun revision is.
    reason = refused(capsys, "workflow", "activate", WORKFLOW, broken, "--by", "ana")
    assert reason == (
        f"revision {broken} of {WORKFLOW} cannot be activated: "
        f"set inv has not been run against revision {broken}"
    )

    failing = golden.run_and_report("inv").to_json()
    assert failing["revision"] == broken
    # Only the 3 customer values miss ("Corrib" etc.): 30/33 = 0.90909..., shown as 0.909.
    assert failing["score"]["fieldAccuracy"] == {"correct": 30, "n": 33, "value": 30 / 33}
    assert failing["gate"]["passed"] is False  # what makes `golden run` exit 1
    assert [f for f in failing["score"]["fields"] if f["correct"] != f["scored"]] == [
        {
            "key": "customer",
            "scored": 3,
            "correct": 0,
            "accuracy": "insufficient_evidence",  # 3 values: fewer than 20
            "stale": False,
            "staleLabels": 0,
        }
    ]
    reason = refused(capsys, "workflow", "activate", WORKFLOW, broken, "--by", "ana")
    assert reason == (
        f"revision {broken} of {WORKFLOW} cannot be activated: "
        "set inv: scored 0.909 (30/33) below threshold 1.0 (misses: customer 3 of 3 wrong)"
    )
    code, out, _ = cli(capsys, "workflow", "status", WORKFLOW)
    assert code == 0
    assert out.splitlines()[1:] == [
        f"  active revision: {good} (by ana, {entries[0]['activatedAt']})",
        f"  newest revision: {broken}",
        f"  gate for {broken}: blocked: set inv: scored 0.909 (30/33) below threshold 1.0 "
        "(misses: customer 3 of 3 wrong)",
    ]

    other = cli_json(capsys, "workflow", "save", "other_invoices", "--file", WORKFLOW_FILE)
    reason = refused(capsys, "workflow", "activate", WORKFLOW, other["revision"], "--by", "ana")
    assert reason == (
        f"revision={other['revision']!r}: is a revision of workflow 'other_invoices', "
        f"not of {WORKFLOW!r}"
    )
    reason = refused(capsys, "workflow", "activate", WORKFLOW, "deadbeef0000", "--by", "ana")
    assert reason == "revision='deadbeef0000': no such revision (see 'workflow show NAME')"

    assert cli_json(capsys, *ledger) == entries


def test_bad_input_is_refused_with_one_line_and_writes_nothing(
    golden_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines.api import golden, workflows

    seed_one = workflows.save_workflow(WORKFLOW, WORKFLOW_FILE).revision
    golden.create_set("inv", workflow=WORKFLOW, gate=True)
    golden.add_golden_case(
        "inv", document=GOLDEN / "hlp-1001.txt", labels=GOLDEN / "hlp-1001.labels.json"
    )
    golden.run_and_report("inv")  # results exist, so a delete would show
    [document] = [d.to_json() for d in workflows.list_documents()]
    assert document["cases"] == 1

    # Relative paths (the test runs in its tmp folder) keep the messages short and exact.
    Path("bad.yaml").write_text("kind: extract\nnodes: [\n  - id: x\n", encoding="utf-8")
    workflow_variant(
        golden_home, "dup", "{id: total, name: Total due,", "{id: invoice_number, name: Total due,"
    )
    workflow_variant(
        golden_home,
        "regex",
        r"Total due:\s+EUR\s+([\d,]+\.\d\d)",
        r"Total due:\s+EUR\s+([\d,+\.\d\d)",
    )
    # A field without ``source`` (it used to default to the name, so a rename lost its values).
    workflow_variant(golden_home, "nosource", "type: number, source: amount}", "type: number}")
    Path("notjson.json").write_text("{'customer': 'x',}", encoding="utf-8")
    Path("nokey.json").write_text(
        json.dumps({"line_items": {"key": ["nope"], "rows": [{"sku": "PA-101", "qty": 40}]}}),
        encoding="utf-8",
    )
    doc2 = str(GOLDEN / "hlp-1002.txt")  # not stored yet: a stray write would add it

    cases = [
        (
            ["workflow", "save", WORKFLOW, "--file", "bad.yaml"],
            "--file='bad.yaml': is not valid YAML: expected the node content, but found '-' "
            "(line 3, column 3)",
        ),
        (
            ["workflow", "save", WORKFLOW, "--file", "dup.yaml"],
            "nodes[0].schema.fields[2].id='invoice_number': field ids must be unique; "
            "already used by nodes[0].schema.fields[0]",
        ),
        (
            ["workflow", "save", WORKFLOW, "--file", "regex.yaml"],
            "nodes[0].templates[0].fields.amount='Total due:\\\\s+EUR\\\\s+([\\\\d,+\\\\.\\\\d"
            "\\\\d)': does not compile (re module): unterminated character set at position 20",
        ),
        (
            ["workflow", "save", WORKFLOW, "--file", "nosource.yaml"],
            "nodes[0].schema.fields[2].source=None: name the key the node outputs for this "
            "value (e.g. source: amount); it is never taken from the display name, so renaming "
            "the field keeps its values",
        ),
        (
            ["golden", "add-case", "inv", "--document", doc2, "--labels", "notjson.json"],
            "--labels='notjson.json': is not valid JSON: Expecting property name enclosed in "
            "double quotes (line 1)",
        ),
        (
            ["golden", "add-case", "inv", "--document", doc2, "--labels", "nokey.json"],
            "line_items.key='nope': not a column of table line_items "
            "(its columns: sku, description, qty, unit_price)",
        ),
        (
            ["golden", "create", "inv2", "--workflow", WORKFLOW, "--threshold", "0"],
            "--threshold=0.0: must be a number in (0, 1], e.g. 1.0 or 0.95",
        ),
        (
            ["golden", "create", "inv2", "--workflow", WORKFLOW, "--threshold", "1.5"],
            "--threshold=1.5: must be a number in (0, 1], e.g. 1.0 or 0.95",
        ),
        (
            ["golden", "run", "inv", "--revision", "deadbeef0000"],
            "--revision='deadbeef0000': no such revision (see 'workflow show NAME')",
        ),
        (
            # Used to escape as a DuckDB BinderException ("LIMIT/OFFSET cannot be negative").
            ["golden", "trend", "inv", "--last", "-1"],
            "--last=-1: must be a whole number of runs, at least 1",
        ),
        (
            ["document", "delete", document["documentId"]],
            f"document={document['documentId']!r}: is referenced by golden case(s) "
            "inv/case-0001; delete those cases first "
            "(eval-pipelines golden delete-case SET CASE --yes)",
        ),
        (
            ["golden", "delete-case", "inv", "case-0001"],
            "--yes=False: deleting a case deletes its results from every past run; confirm "
            "with --yes, or disable the case instead",
        ),
    ]
    warehouse = golden_home / "warehouse.duckdb"
    before = row_counts(warehouse)
    assert before == {
        "workflow_revisions": 1,
        "workflow_activations": 0,
        "golden_sets": 1,
        "golden_cases": 1,
        "golden_runs": 1,
        "golden_results": 1,
        "documents": 1,
        "test_runs": 0,
    }
    for argv, message in cases:
        assert refused(capsys, *argv) == message, argv
        assert row_counts(warehouse) == before, argv
    # Nothing changed behind the counts either.
    assert [c.enabled for c in golden.list_golden_cases("inv")] == [True]
    assert [r.newest_revision for r in workflows.list_workflows()] == [seed_one]


def test_add_run_seeds_a_case_from_the_approved_values(
    golden_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines.api import golden

    cli_json(capsys, "workflow", "save", WORKFLOW, "--file", WORKFLOW_FILE)
    cli_json(capsys, "golden", "create", "reviewed", "--workflow", WORKFLOW)
    run = cli_json(capsys, "workflow", "run", WORKFLOW, "--document", GOLDEN / "hlp-1001.txt")
    assert (run["executedSteps"], run["cachedSteps"], run["costUnits"]) == (1, 0, 1.0)
    assert run["outputs"]["invoice"]["customer"] == "Corrib Print Studio"
    run_id = run["testRunId"]

    warehouse = golden_home / "warehouse.duckdb"
    before = row_counts(warehouse)
    reason = refused(capsys, "golden", "add-run", "reviewed", run_id)
    assert reason == (
        f"run={run_id!r}: not approved; approve it first "
        "(eval-pipelines workflow approve RUN_ID --values FILE --by NAME)"
    )
    assert row_counts(warehouse) == before

    # The reviewer corrected the customer's name and added a value the schema has no field for.
    corrected = json.loads((GOLDEN / "hlp-1001.labels.json").read_text(encoding="utf-8"))
    corrected["customer"] = "Corrib Print Studio Ltd"
    corrected["po_number"] = "PO-4471"
    Path("corrected.json").write_text(json.dumps(corrected), encoding="utf-8")
    approved = cli_json(
        capsys, "workflow", "approve", run_id, "--values", "corrected.json", "--by", "ana"
    )
    assert approved["approved"]["by"] == "ana"
    assert approved["approved"]["node"] == "invoice"
    assert approved["approved"]["values"] == corrected

    code, out, err = cli(capsys, "golden", "add-run", "reviewed", run_id)
    assert code == 0
    assert err == "warning: 1 value(s) map onto no field and are not labels: po_number\n"
    case = json.loads(out)
    assert case["unmapped"] == ["po_number"]
    assert case["caseId"] == "case-0001" and case["fromTestRun"] == run_id
    assert case["documentId"] == run["documentId"]
    assert case["keyColumns"] == {}  # seeded from a run: tables match by position
    expected = {k: v for k, v in corrected.items() if k != "po_number"}
    assert case["labels"] == expected
    assert cli_json(capsys, "golden", "cases", "reviewed")[0]["labels"] == expected
    # Seeding twice from one review would count the document twice: the case is returned.
    again = cli_json(capsys, "golden", "add-run", "reviewed", run_id)
    assert (again["caseId"], again["added"]) == ("case-0001", False)
    assert len(cli_json(capsys, "golden", "cases", "reviewed")) == 1

    report = golden.run_and_report("reviewed").to_json()
    # 16 labels; the extraction reads "Corrib Print Studio", the approved label is "... Ltd".
    assert report["score"]["fieldAccuracy"] == {
        "correct": 15,
        "n": 16,
        "value": "insufficient_evidence",  # fewer than 20 values
    }
    misses = [i for i in report["cases"]["case-0001"]["items"] if not i["matched"]]
    assert [(i["fieldId"], i["expected"], i["actual"]) for i in misses] == [
        ("customer", "Corrib Print Studio Ltd", "Corrib Print Studio")
    ]
    # The document the workflow run stored is now held by the case.
    assert [d["cases"] for d in cli_json(capsys, "document", "list")] == [1]


def test_compare_puts_regressions_first_and_trend_shows_gaps(
    golden_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines.api import golden

    good = seed()
    a = golden.run_and_report("inv").to_json()
    # case-0001 sits out run B, so its change (passed -> absent) sorts by id before the
    # passed -> failed ones unless regressions really come first.
    assert cli_json(capsys, "golden", "disable-case", "inv", "case-0001")["enabled"] is False
    broken = cli_json(capsys, "workflow", "save", WORKFLOW, "--file", broken_variant(golden_home))
    b = golden.run_and_report("inv").to_json()
    assert b["revision"] == broken["revision"]
    # Cases 2 and 3: 10 + 7 = 17 values, 2 customers missed.
    assert b["score"]["fieldAccuracy"] == {
        "correct": 15,
        "n": 17,
        "value": "insufficient_evidence",
    }

    compared = cli_json(capsys, "golden", "compare", a["goldenRunId"], b["goldenRunId"])
    # Every share and delta here has a side of fewer than 20 observations (run B scored 17
    # values of 2 documents; a field 2 or 3): insufficient_evidence beside both sides'
    # counts, never a difference of two such shares (issue 28 item 5).
    few = "insufficient_evidence"
    assert compared["a"] == {
        "goldenRunId": a["goldenRunId"],
        "revision": good,
        "fieldCorrect": 33,
        "fieldScored": 33,
        "passed": 3,
        "passRateN": 3,
    }
    assert compared["b"] == {
        "goldenRunId": b["goldenRunId"],
        "revision": broken["revision"],
        "fieldCorrect": 15,
        "fieldScored": 17,
        "passed": 0,
        "passRateN": 2,
    }
    assert compared["fieldAccuracyDelta"] == few
    assert compared["passRateDelta"] == few
    assert compared["fields"][0] == {
        "key": "customer",
        "accuracyA": few,
        "accuracyB": few,
        "scoredA": 3,
        "scoredB": 2,
        "correctA": 3,
        "correctB": 0,
        "delta": few,
    }
    # Still ranked on the exact deltas: the regression first.
    assert [(f["key"], f["delta"]) for f in compared["fields"]] == [
        ("customer", few),
        ("invoice_date", few),
        ("invoice_number", few),
        ("line_items.qty", few),
        ("line_items.sku", few),
        ("line_items.unit_price", few),
        ("total", few),
        ("line_items", None),  # no invented rows on either side
        ("line_items.description", None),  # only case-0001 labels descriptions
    ]
    assert compared["cases"] == [
        {
            "caseId": "case-0002",
            "statusA": "passed",
            "statusB": "failed",
            "accuracyA": few,
            "accuracyB": few,
            "scoredA": 10,
            "correctA": 10,
            "scoredB": 10,
            "correctB": 9,
        },
        {
            "caseId": "case-0003",
            "statusA": "passed",
            "statusB": "failed",
            "accuracyA": few,
            "accuracyB": few,
            "scoredA": 7,
            "correctA": 7,
            "scoredB": 7,
            "correctB": 6,
        },
        {
            "caseId": "case-0001",
            "statusA": "passed",
            "statusB": None,
            "accuracyA": few,
            "accuracyB": None,
            "scoredA": 16,
            "correctA": 16,
            "scoredB": 0,
            "correctB": 0,
        },
    ]
    # The Python result keeps the exact figures.
    exact = golden.compare_golden_runs(a["goldenRunId"], b["goldenRunId"])
    assert exact.field_accuracy_delta == pytest.approx(15 / 17 - 1)
    assert (exact.pass_rate_delta, exact.fields[0].delta) == (-1.0, -1.0)

    assert cli_json(capsys, "golden", "enable-case", "inv", "case-0001")["enabled"] is True
    removed = cli_json(
        capsys, "workflow", "save", WORKFLOW, "--file", without_customer_variant(golden_home)
    )
    c = golden.run_and_report("inv").to_json()
    assert c["revision"] == removed["revision"]

    trend = cli_json(capsys, "golden", "trend", "inv", "--field", "customer", "--json")
    points = [(p["goldenRunId"], p["revision"], p["accuracy"], p["n"]) for p in trend["points"]]
    assert points == [
        (a["goldenRunId"], good, "insufficient_evidence", 3),  # fewer than 20 values
        (b["goldenRunId"], broken["revision"], "insufficient_evidence", 2),  # not "0.0"
        (c["goldenRunId"], removed["revision"], None, 0),  # never measured: a gap
    ]
    code, out, _ = cli(capsys, "golden", "trend", "inv", "--field", "customer")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "set inv, customer: accuracy over the last runs"
    stamp = r"  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d  "
    expected = [
        (a["goldenRunId"], good, "insufficient_evidence", 3),  # fewer than 20 values
        (b["goldenRunId"], broken["revision"], "insufficient_evidence", 2),
        (c["goldenRunId"], removed["revision"], "gap (not scored)", 0),
    ]
    assert len(lines) == 4
    for line, (run, rev, value, n) in zip(lines[1:], expected, strict=True):
        assert re.fullmatch(stamp + re.escape(f"{run}  rev {rev}  {value}  n={n}"), line), line

    code, _, err = cli(capsys, "golden", "trend", "inv", "--field", "custmer")
    assert code == 2
    assert err.startswith("error: --field='custmer': names no field of node invoice")

    overall = cli_json(capsys, "golden", "trend", "inv", "--json")
    assert [(p["accuracy"], p["n"]) for p in overall["points"]] == [
        (1.0, 33),
        ("insufficient_evidence", 17),
        (1.0, 30),
    ]


def test_golden_run_through_the_queue_prints_the_report(
    golden_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    revision = seed()
    code, out, err = cli(capsys, "golden", "run", "inv")
    assert code == 0, err
    lines = out.splitlines()
    match = re.fullmatch(
        rf"golden run (g-[0-9a-f]{{12}}): set inv on revision {revision} \(completed\)", lines[0]
    )
    assert match, lines[0]
    assert lines[1:] == [
        "  field accuracy 1.000 (33/33), threshold 1.0",
        "  document pass rate insufficient_evidence (3/3); errored 0, skipped 0",
        "  stale labels 0 on 0 field(s)",
        "  charged: 3 steps executed, 0 cached, 3 cost units",
        f"    {'invoice_number':<32} insufficient_evidence (3/3)",
        f"    {'invoice_date':<32} insufficient_evidence (3/3)",
        f"    {'total':<32} insufficient_evidence (3/3)",
        f"    {'customer':<32} insufficient_evidence (3/3)",
        f"    {'line_items.sku':<32} insufficient_evidence (6/6)",
        f"    {'line_items.description':<32} insufficient_evidence (3/3)",
        f"    {'line_items.qty':<32} insufficient_evidence (6/6)",
        f"    {'line_items.unit_price':<32} insufficient_evidence (6/6)",
        "  gate: passed: set inv: scored 1.000 (33/33) at or above threshold 1.0",
    ]
    report = cli_json(capsys, "golden", "report", match.group(1), "--json")
    assert report["dagsterRunId"] is not None  # a real queued Dagster run made it
    assert report["status"] == "completed"
    activated = cli_json(capsys, "workflow", "activate", WORKFLOW, revision, "--by", "ana")
    assert activated["gateRuns"] == [match.group(1)]


def test_golden_run_of_a_blocked_revision_exits_1_though_its_dagster_run_succeeded(
    golden_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import dagster as dg

    from eval_pipelines.runs.instance import dagster_instance

    seed()
    saved = cli_json(capsys, "workflow", "save", WORKFLOW, "--file", broken_variant(golden_home))
    code, out, err = cli(capsys, "golden", "run", "inv")
    # The exit code comes from the gate's decision, as before: 1 when a gating set fails.
    assert code == 1, err
    assert out.splitlines()[-1] == (
        "  gate: blocked: set inv: scored 0.909 (30/33) below threshold 1.0 "
        "(misses: customer 3 of 3 wrong)"
    )
    code, out, err = cli(capsys, "golden", "run", "inv", "--json")
    assert code == 1, err
    report = json.loads(out)
    assert (report["revision"], report["gate"]["passed"]) == (saved["revision"], False)
    # ...while the Dagster run that blocked it succeeded (before: it failed on its check).
    run = dagster_instance().get_run_by_id(report["dagsterRunId"])
    assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS
    refused(capsys, "workflow", "activate", WORKFLOW, saved["revision"], "--by", "ana")


def test_activate_is_refused_when_cases_were_added_after_the_passing_run(
    golden_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines.api import golden

    revision = seed()
    passing = golden.run_and_report("inv").to_json()
    assert passing["gate"]["passed"] is True
    letter = golden_home / "letter.txt"
    letter.write_text("Dear customer, thank you for your order.\n", encoding="utf-8")
    labels = golden_home / "letter.labels.json"
    labels.write_text(json.dumps({"invoice_number": "HLP-9999"}), encoding="utf-8")
    added = cli_json(capsys, "golden", "add-case", "inv", "--document", letter, "--labels", labels)
    assert added["caseId"] == "case-0004"
    reason = refused(capsys, "workflow", "activate", WORKFLOW, revision, "--by", "ana")
    assert reason == (
        f"revision {revision} of {WORKFLOW} cannot be activated: set inv: run "
        f"{passing['goldenRunId']} does not cover 1 of its 4 enabled case(s) (case-0004: added "
        "or enabled since it ran); re-run the set against this revision (eval-pipelines golden "
        f"run inv --revision {revision})"
    )
    assert cli_json(capsys, "workflow", "ledger", WORKFLOW) == []


def test_one_score_reads_the_same_in_the_report_and_in_the_gate(
    golden_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines.api import golden, workflows

    revision = workflows.save_workflow(WORKFLOW, WORKFLOW_FILE).revision
    golden.create_set("inv", workflow=WORKFLOW, gate=True)
    golden.add_golden_case(
        "inv", document=GOLDEN / "hlp-1001.txt", labels=GOLDEN / "hlp-1001.labels.json"
    )
    labels = json.loads((GOLDEN / "hlp-1003.labels.json").read_text(encoding="utf-8"))
    golden.add_golden_case(
        "inv", document=GOLDEN / "hlp-1003.txt", labels={**labels, "customer": "Eyre Sq. Books"}
    )
    run = golden.run_and_report("inv").to_json()
    # 16 + 7 values, one wrong label: 22/23 = 0.95652..., which rounds to 0.957.
    assert run["score"]["fieldAccuracy"] == {"correct": 22, "n": 23, "value": 22 / 23}
    code, out, _ = cli(capsys, "golden", "report", run["goldenRunId"])
    assert code == 0
    assert "  field accuracy 0.956 (22/23), threshold 1.0" in out.splitlines()
    assert "    customer                         insufficient_evidence (1/2)" in out.splitlines()
    reason = refused(capsys, "workflow", "activate", WORKFLOW, revision, "--by", "ana")
    assert reason.endswith(
        "set inv: scored 0.956 (22/23) below threshold 1.0 (misses: customer 1 of 2 wrong)"
    )
    code, out, _ = cli(capsys, "golden", "trend", "inv")
    assert out.splitlines()[1].endswith(f"rev {revision}  0.956  n=23")


def test_the_report_shows_schema_drift(
    golden_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines.api import golden, workflows

    seed()
    workflows.save_workflow(WORKFLOW, without_customer_variant(golden_home))
    run = golden.run_and_report("inv").to_json()
    assert run["schemaDrift"] == ["case-0001", "case-0002", "case-0003"]
    code, out, _ = cli(capsys, "golden", "report", run["goldenRunId"])
    assert code == 0
    assert (
        "  schema drift (warning): 3 case(s) written against another structure of the scored "
        "node: case-0001, case-0002, case-0003 (re-seed them from a fresh approved review)"
    ) in out.splitlines()
