"""A golden set scored through a ``chat`` extract node, end to end: the example workflow
``data/workflows/supplier_invoices_chat.yaml`` pointed at the stand-in server on 127.0.0.1
(real HTTP through the real ``openai`` client), a real DuckDB warehouse and real Dagster runs
of job ``golden_gate`` executed in-process.

The stand-in answers an extraction prompt by its documented rule (``chat_standin.answers.extract``):
on the three demo invoices it finds every labelled value, so the set scores 33/33 (the hand
count of :mod:`eval_pipelines_tests.api.test_golden`: the field ids and labels are those of
the invoice2data workflow). Tokens are the stand-in's word counts, recomputed here from the
requests it recorded; the cost is those tokens at the example's prices (0.15 and 0.6 per 1M
input and output tokens).
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from eval_pipelines.chat_standin.answers import extract
from eval_pipelines.chat_standin.server import Fault, FaultRule, StandinServer, serve_standin
from eval_pipelines.core.ports import free_port
from eval_pipelines_tests.helpers.golden_demo import ALL_FIELDS_PASS, DOCS, GOLDEN, REPO

CHAT_FILE = REPO / "data" / "workflows" / "supplier_invoices_chat.yaml"
WORKFLOW = "invoices_chat"
BASE_URL = "http://127.0.0.1:8199/v1"
KEY_VARIABLE = "EVAL_PIPELINES_TEST_EXTRACT_KEY"
SECRET = "sk-test-extract-0123456789abcdef"


def chat_workflow(folder: Path, base_url: str, *, old: str = "", new: str = "") -> Path:
    """The example chat workflow with its endpoint at ``base_url`` (and ``old`` -> ``new``)."""
    text = CHAT_FILE.read_text(encoding="utf-8")
    assert text.count(BASE_URL) == 1
    text = text.replace(BASE_URL, base_url)
    if old:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = folder / f"{WORKFLOW}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def seed_chat(folder: Path, base_url: str, **variant: str) -> str:
    from eval_pipelines.api import golden, workflows

    saved = workflows.save_workflow(WORKFLOW, chat_workflow(folder, base_url, **variant))
    golden.create_set("inv", workflow=WORKFLOW, gate=True)
    for doc in DOCS:
        golden.add_golden_case(
            "inv", document=GOLDEN / f"{doc}.txt", labels=GOLDEN / f"{doc}.labels.json"
        )
    return str(saved.revision)


def field_rows(report) -> list[tuple[str, int, int]]:  # type: ignore[no-untyped-def]
    return [(f["key"], f["scored"], f["correct"]) for f in report.score.to_json()["fields"]]


def expected_tokens(server: StandinServer) -> tuple[int, int]:
    """Input and output tokens as the stand-in counts them (words), from its request log."""
    prompts = server.prompts()
    answers = [json.dumps(extract(p)) for p in prompts]
    return sum(len(p.split()) for p in prompts), sum(len(a.split()) for a in answers)


def test_a_golden_set_scores_through_a_chat_node_and_a_rerun_makes_no_request(
    golden_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eval_pipelines.api import golden, workflows

    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    with serve_standin() as server:
        revision = seed_chat(
            golden_home,
            server.base_url,
            old="      timeout: 30\n",
            new=f"      timeout: 30\n      apiKeyEnv: {KEY_VARIABLE}\n",
        )
        first = golden.run_and_report("inv")
        assert (first.status, first.revision) == ("completed", revision)
        assert server.request_count == 3  # one call per document
        assert first.score.to_json()["fieldAccuracy"] == {"correct": 33, "n": 33, "value": 1.0}
        assert field_rows(first) == ALL_FIELDS_PASS
        assert [first.cases[c].scored for c in sorted(first.cases)] == [16, 10, 7]
        # The values themselves: the stand-in's reading of hlp-1002, mapped by field id.
        prompts = {p.split("Invoice no. ")[1][:8]: p for p in server.prompts()}
        assert extract(prompts["HLP-1002"]) == {
            "invoice_number": "HLP-1002",
            "invoice_date": "2026-03-09",
            "total": 1267.39,
            "customer": "Salthill Primary School",
            "line_items": [
                {
                    "sku": "PA-101",
                    "description": "A4 copy paper, 80 gsm, box",
                    "qty": 40,
                    "unit_price": 23.9,
                },
                {
                    "sku": "CR-020",
                    "description": "Wax crayons, class set",
                    "qty": 6,
                    "unit_price": 12.4,
                },
            ],
        }
        # The key went to the endpoint (as a bearer token) and nowhere else.
        assert {r.authorization for r in server.requests} == {f"Bearer {SECRET}"}
        tokens_in, tokens_out = expected_tokens(server)
        cost = (tokens_in * 0.15 + tokens_out * 0.6) / 1_000_000
        charged = first.charged.to_json()
        assert charged["executedSteps"] == 3 and charged["costUnits"] == 3.0
        assert charged["model"] == {
            "calls": 3,
            "fromCache": 0,
            "failed": 0,
            "inputTokens": tokens_in,
            "outputTokens": tokens_out,
            "cost": pytest.approx(cost, rel=1e-12),  # float sums in another order
        }
        per_case = [first.cases[c].to_json()["model"] for c in sorted(first.cases)]
        assert sum(m["inputTokens"] for m in per_case) == tokens_in
        assert [m["calls"] for m in per_case] == [1, 1, 1]

        second = golden.run_and_report("inv")
        assert server.request_count == 3  # the same revision and documents: no new request
        assert second.score.to_json()["fieldAccuracy"] == {"correct": 33, "n": 33, "value": 1.0}
        assert second.charged.to_json() == {
            "executedSteps": 0,
            "cachedSteps": 3,
            "costUnits": 0.0,
            "model": {
                "calls": 0,
                "fromCache": 3,
                "failed": 0,
                "inputTokens": 0,
                "outputTokens": 0,
                "cost": 0.0,
            },
        }

        # Steps lost (a run killed before it stored them): the chat cache still has every
        # answer, so the steps run again without a request.
        warehouse = golden_home / "warehouse.duckdb"
        with duckdb.connect(str(warehouse)) as conn:
            conn.execute("DELETE FROM step_cache")
        third = golden.run_and_report("inv")
        assert server.request_count == 3
        assert third.charged.executed_steps == 3
        assert third.charged.model is not None
        assert (third.charged.model.calls, third.charged.model.from_cache) == (0, 3)
        assert third.charged.model.cost == 0.0

    # The gate holds for a chat node: the passing revision activates.
    assert workflows.activate_workflow(WORKFLOW, revision, by="ana").revision == revision
    assert SECRET.encode() not in warehouse.read_bytes()
    for path in (golden_home / "dagster_home").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_a_malformed_answer_fails_its_case_with_the_reason_and_blocks_the_gate(
    golden_home: Path,
) -> None:
    from eval_pipelines.api import golden, workflows
    from eval_pipelines.api.workflows import ActivationRefused

    with serve_standin(rules=[FaultRule("HLP-1002", Fault("malformed"))]) as server:
        revision = seed_chat(golden_home, server.base_url)
        report = golden.run_and_report("inv")
        assert server.request_count == 3
    assert report.status == "completed"
    statuses = {c: s.status for c, s in report.cases.items()}
    assert statuses == {"case-0001": "passed", "case-0002": "errored", "case-0003": "passed"}
    why = report.cases["case-0002"].why or ""
    assert "node invoice: the model's answer was refused: answer is not JSON" in why, why
    # The malformed answer was paid for: its tokens are counted.
    assert report.cases["case-0002"].model is not None
    assert report.cases["case-0002"].model.calls == 1
    assert report.cases["case-0002"].model.input_tokens > 0
    assert report.gate is not None and report.gate.passed is False
    with pytest.raises(ActivationRefused):
        workflows.activate_workflow(WORKFLOW, revision, by="ana")


def test_an_endpoint_down_fails_the_cases_at_once_and_is_not_cached(golden_home: Path) -> None:
    from eval_pipelines.api import golden

    port = free_port()  # nothing listens there yet
    seed_chat(golden_home, f"http://127.0.0.1:{port}/v1")
    down = golden.run_and_report("inv")
    assert {s.status for s in down.cases.values()} == {"errored"}
    for case in down.cases.values():
        assert "endpoint unreachable: connection refused at http://127.0.0.1:" in (case.why or "")
        assert case.model is not None and (case.model.calls, case.model.failed) == (0, 1)
    assert down.gate is not None and down.gate.passed is False
    # A refused connection is not retried, and the failure is not cached: with the endpoint
    # up on that port, the same revision runs the three calls.
    with serve_standin(port=port) as server:
        up = golden.run_and_report("inv")
        assert server.request_count == 3
    assert up.score.to_json()["fieldAccuracy"]["value"] == 1.0
    assert up.gate is not None and up.gate.passed is True


def test_a_model_without_a_price_reports_no_cost_and_says_why(golden_home: Path) -> None:
    from eval_pipelines.api import golden

    with serve_standin() as server:
        seed_chat(
            golden_home,
            server.base_url,
            old="      standin-extract: {input: 0.15, output: 0.6}  # per 1M tokens\n",
            new="      other-model: {input: 0.15, output: 0.6}\n",
        )
        report = golden.run_and_report("inv")
    model = report.charged.to_json()["model"]
    assert model["calls"] == 3 and model["cost"] is None
    assert model["costNote"] == (
        "no price for model standin-extract in the node's prices: cost unknown"
    )


def refused_save(capsys: pytest.CaptureFixture[str], file: Path) -> str:
    from eval_pipelines.cli.main import main

    capsys.readouterr()
    code = main(["workflow", "save", WORKFLOW, "--file", str(file)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, ""), (code, out, err)
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err[len("error: ") : -1]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "      model: standin-extract\n",
            "",
            "nodes[0].options.model=None: a chat node needs the name of the model it calls",
        ),
        (
            "      timeout: 30\n",
            "      timeout: 30\n      apiKeyEnv: EVAL_PIPELINES_TEST_UNSET_KEY\n",
            "nodes[0].options.apiKeyEnv='EVAL_PIPELINES_TEST_UNSET_KEY': this environment "
            "variable is not set (or empty)",
        ),
        (
            "{input: 0.15, output: 0.6}",
            "{input: -0.15, output: 0.6}",
            "nodes[0].prices.standin-extract.input=-0.15: a price is a finite number >= 0",
        ),
        ("    maxRetries: 2\n", "    maxRetries: 2\n    trials: 3\n", "nodes[0].trials=3: "),
    ],
)
def test_a_wrong_chat_config_is_refused_at_save_with_exit_2_and_nothing_written(
    golden_home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    old: str,
    new: str,
    message: str,
) -> None:
    from eval_pipelines.api import workflows

    monkeypatch.delenv("EVAL_PIPELINES_TEST_UNSET_KEY", raising=False)
    workflows.save_workflow("good", chat_workflow(golden_home, BASE_URL))
    bad = chat_workflow(golden_home, BASE_URL, old=old, new=new)
    assert refused_save(capsys, bad).startswith(message)
    with duckdb.connect(str(golden_home / "warehouse.duckdb"), read_only=True) as conn:
        saved = conn.execute("SELECT workflow FROM workflow_revisions").fetchall()
    assert saved == [("good",)]  # nothing written for the refused one


def test_a_test_run_through_a_chat_node_maps_the_values_and_reports_its_call(
    golden_home: Path,
) -> None:
    from eval_pipelines.api import workflows

    with serve_standin() as server:
        workflows.save_workflow(WORKFLOW, chat_workflow(golden_home, server.base_url))
        run = workflows.run_workflow(WORKFLOW, GOLDEN / "hlp-1003.txt")
        again = workflows.run_workflow(WORKFLOW, GOLDEN / "hlp-1003.txt")
        assert server.request_count == 1  # the second test run is served from the step cache
    assert run.error is None
    assert run.outputs["invoice"] == {
        "invoice_number": "HLP-1003",
        "invoice_date": "2026-04-01",
        "total": 147.6,
        "customer": "Eyre Square Books",
        "line_items": [
            {"sku": "NB-550", "description": "Notebook, dotted, A5", "qty": 25.0, "unit_price": 4.8}
        ],
    }
    assert run.model is not None and (run.model["calls"], run.model["fromCache"]) == (1, 0)
    assert again.model is not None and (again.model["calls"], again.model["fromCache"]) == (0, 1)
    assert again.outputs == run.outputs
