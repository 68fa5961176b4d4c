"""The pure half of the ``chat`` extract node (core/workflows/chat_extract.py): the schema as the
answer's JSON schema, the prompt, the strict reading of answers; the node's settings
(parse_node_chat_settings); and the stand-in's documented extraction rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipelines.chat_standin.answers import extract
from eval_pipelines.chat_standin.server import Fault, FaultRule, serve_standin
from eval_pipelines.core.chat.settings import NODE_MAX_TOKENS, parse_node_chat_settings
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.workflows.chat_extract import (
    extraction_format,
    extraction_json_schema,
    extraction_messages,
    extraction_prompt,
    parse_extraction,
)
from eval_pipelines.core.workflows.schema import parse_schema

REPO = Path(__file__).resolve().parents[2]
INVOICE = (REPO / "data" / "demo" / "golden" / "hlp-1002.txt").read_text(encoding="utf-8")

SCHEMA = parse_schema(
    {
        "fields": [
            {"id": "invoice_number", "name": "Invoice no", "source": "number"},
            {"id": "total", "name": "Total due", "type": "number", "source": "total"},
            {"id": "paid", "name": "Paid", "type": "boolean", "source": "paid"},
            {
                "id": "line_items",
                "name": "Line items",
                "type": "table",
                "source": "lines",
                "columns": [
                    {"id": "sku", "name": "SKU", "source": "sku"},
                    {"id": "qty", "name": "Qty", "type": "number", "source": "qty"},
                ],
            },
        ]
    },
    "schema",
)
NODE = {"options": {"model": "m", "baseUrl": "http://127.0.0.1:9/v1"}}


def test_the_schema_becomes_a_strict_json_schema_keyed_by_source() -> None:
    nullable = {"string": ["string", "null"], "number": ["number", "null"]}
    assert extraction_json_schema(SCHEMA) == {
        "type": "object",
        "properties": {
            "number": {"type": nullable["string"], "description": "Invoice no"},
            "total": {"type": nullable["number"], "description": "Total due"},
            "paid": {"type": ["boolean", "null"], "description": "Paid"},
            "lines": {
                "type": "array",
                "description": "Line items",
                "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": nullable["string"], "description": "SKU"},
                        "qty": {"type": nullable["number"], "description": "Qty"},
                    },
                    "required": ["sku", "qty"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["number", "total", "paid", "lines"],
        "additionalProperties": False,
    }


def test_the_response_format_follows_the_settings() -> None:
    def settings(kind: str):  # type: ignore[no-untyped-def]
        options = {**NODE["options"], "responseFormat": kind}
        return parse_node_chat_settings({"options": options}, {}, where="nodes[0]")

    schema_format = extraction_format(settings("json_schema"), SCHEMA)
    assert schema_format is not None and schema_format["type"] == "json_schema"
    assert schema_format["json_schema"]["strict"] is True
    assert schema_format["json_schema"]["schema"] == extraction_json_schema(SCHEMA)
    assert extraction_format(settings("json_object"), SCHEMA) == {"type": "json_object"}
    assert extraction_format(settings("none"), SCHEMA) is None


def test_the_prompt_carries_the_fields_and_the_document() -> None:
    prompt = extraction_prompt("Invoice no. X-1", SCHEMA)
    assert prompt == (
        "Fields:\n"
        "- number (text): Invoice no\n"
        "- total (number): Total due\n"
        "- paid (true/false): Paid\n"
        "- lines (table): Line items\n"
        "  - sku (text): SKU\n"
        "  - qty (number): Qty\n"
        "\n"
        "Document:\n"
        "Invoice no. X-1"
    )
    settings = parse_node_chat_settings(
        {"options": {**NODE["options"], "prompt": "Read it."}}, {}, where="n"
    )
    assert extraction_messages(settings, "d", SCHEMA)[0] == ("system", "Read it.")


GOOD = {"number": "A-1", "total": 12.5, "paid": None, "lines": [{"sku": "S", "qty": 2}]}


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "empty answer"),
        ('{"number": "A-1", ', "answer is not JSON (Expecting property name enclosed"),
        ("[1]", "answer is not a JSON object: '[1]'"),
        (
            json.dumps({k: v for k, v in GOOD.items() if k != "paid"}),
            "answer lacks key(s) ['paid']",
        ),
        (json.dumps({**GOOD, "vat": 1}), "answer has unexpected key(s) ['vat']"),
        (json.dumps({**GOOD, "total": "12.50"}), 'answer\'s total is "12.50", not number or null'),
        (json.dumps({**GOOD, "total": True}), "answer's total is true, not number or null"),
        (json.dumps({**GOOD, "paid": "yes"}), 'answer\'s paid is "yes", not true/false or null'),
        (json.dumps({**GOOD, "lines": {"sku": "S"}}), "answer's lines is not a list of rows"),
        (json.dumps({**GOOD, "lines": ["S"]}), "answer's lines[0] is not an object"),
        (
            json.dumps({**GOOD, "lines": [{"sku": "S"}]}),
            "answer's lines[0] lacks key(s) ['qty']",
        ),
        (
            json.dumps({**GOOD, "lines": [{"sku": 3, "qty": 1}]}),
            "answer's lines[0].sku is 3, not text or null",
        ),
    ],
)
def test_a_bad_answer_is_a_failure_with_its_reason(content: str | None, reason: str) -> None:
    parsed = parse_extraction(content, SCHEMA)
    assert parsed.output is None and not parsed.ok
    assert parsed.failure is not None and parsed.failure.startswith(reason), parsed.failure


def test_a_good_answer_is_the_raw_output_nulls_included() -> None:
    assert parse_extraction(json.dumps(GOOD), SCHEMA).output == GOOD
    empty = {"number": None, "total": None, "paid": None, "lines": None}
    assert parse_extraction(json.dumps(empty), SCHEMA).output == empty


@pytest.mark.parametrize(
    ("config", "environ", "field", "rule"),
    [
        (
            {"options": {"baseUrl": "http://h/v1"}},
            {},
            "nodes[1].options.model",
            "a chat node needs the name of the model it calls",
        ),
        (
            {"options": {**NODE["options"], "apiKeyEnv": "EXTRACT_KEY"}},
            {},
            "nodes[1].options.apiKeyEnv",
            "not set",
        ),
        (
            {**NODE, "prices": {"m": {"input": -1, "output": 0}}},
            {},
            "nodes[1].prices.m.input",
            ">= 0",
        ),
        ({**NODE, "trials": 3}, {}, "nodes[1].trials", "runs once per document"),
        ({**NODE, "llmLevel": "small"}, {}, "nodes[1].llmLevel", "known: options"),
        ({**NODE, "concurrency": 0}, {}, "nodes[1].concurrency", "from 1 to 64"),
    ],
)
def test_node_settings_refuse_naming_the_field(
    config: dict, environ: dict, field: str, rule: str
) -> None:
    with pytest.raises(InputError) as refused:
        parse_node_chat_settings(config, environ, where="nodes[1]")
    assert refused.value.field == field
    assert rule in str(refused.value)


def test_node_settings_default_to_a_larger_answer_budget() -> None:
    settings = parse_node_chat_settings(NODE, {}, where="nodes[0]")
    assert (settings.max_tokens, settings.trials, settings.concurrency) == (NODE_MAX_TOKENS, 1, 4)
    key = {"options": {**NODE["options"], "apiKeyEnv": "EXTRACT_KEY"}}
    assert parse_node_chat_settings(key, {"EXTRACT_KEY": "k"}, where="n").api_key_env == (
        "EXTRACT_KEY"
    )


def test_the_standin_reads_fields_by_their_names_and_tables_under_their_heading() -> None:
    # hlp-1002: "Invoice no. HLP-1002", "Total due: EUR 1,267.39", no "Paid" line, and two
    # rows under "SKU  Description  Qty  Unit price" (only SKU and Qty asked: no heading
    # line is made of exactly those two names, so no rows).
    assert extract(extraction_prompt(INVOICE, SCHEMA)) == {
        "number": "HLP-1002",
        "total": 1267.39,
        "paid": None,
        "lines": [],
    }
    full = parse_schema(
        {
            "fields": [
                {
                    "id": "t",
                    "name": "Items",
                    "type": "table",
                    "source": "t",
                    "columns": [
                        {"id": key, "name": name, "source": key, "type": kind}
                        for key, name, kind in [
                            ("sku", "SKU", "string"),
                            ("description", "Description", "string"),
                            ("qty", "Qty", "number"),
                            ("unit_price", "Unit price", "number"),
                        ]
                    ],
                }
            ]
        },
        "s",
    )
    assert extract(extraction_prompt(INVOICE, full)) == {
        "t": [
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
        ]
    }
    # A classification prompt is answered as before.
    assert extract("Candidates:\n- A: apple\n\nRecord:\napple") is None


def test_the_standin_serves_an_extraction_and_a_fixed_answer_by_rule() -> None:
    import openai

    prompt = extraction_prompt(INVOICE, SCHEMA)
    rule = FaultRule("HLP-1002", Fault("content", content='{"number": 1}'), times=1)
    with serve_standin(rules=[rule]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)

        def ask() -> str | None:
            reply = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": prompt}]
            )
            return reply.choices[0].message.content

        assert ask() == '{"number": 1}'
        assert json.loads(ask() or "") == extract(prompt)
        assert [r.fault for r in server.requests] == ["content", None]


@pytest.mark.parametrize("concurrency", [1, 2])
def test_the_cases_run_at_once_share_the_nodes_concurrency_per_endpoint(
    tmp_path: Path, concurrency: int
) -> None:
    """Four threads (a golden run's four cases at once), one call each, 100 ms per answer:
    the stand-in never answers more than ``concurrency`` of them at once."""
    import threading

    from eval_pipelines.core.chat.request import build_request
    from eval_pipelines.stages.workflow_chat import WorkflowChat

    with serve_standin(latency_ms=100) as server:
        options = {"model": "m", "baseUrl": server.base_url}
        settings = parse_node_chat_settings(
            {"options": options, "concurrency": concurrency}, {}, where="n"
        )
        from eval_pipelines.storage.warehouse import connect

        with connect(tmp_path / "w.duckdb", create=True):
            pass  # a run's warehouse exists (and is migrated) before its steps run
        call = WorkflowChat(tmp_path / "w.duckdb")
        results = []

        def one(number: int) -> None:
            text = f"Invoice no. X-{number}"
            request = build_request(settings, extraction_messages(settings, text, SCHEMA))
            results.append(call(settings, [request]))

        threads = [threading.Thread(target=one, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert server.request_count == 4
        assert 1 <= server.max_in_flight <= concurrency
    assert sorted(r.counters.answered for r in results) == [1, 1, 1, 1]
    numbers = sorted(
        parse_extraction(r.answers[0].content, SCHEMA).output["number"] for r in results
    )  # type: ignore[index]
    assert numbers == ["X-0", "X-1", "X-2", "X-3"]


def test_a_stopped_run_does_not_wait_for_a_chat_call_in_flight(tmp_path: Path) -> None:
    """The stand-in holds the answer for 600 s (the client would wait 900 s): once the run's
    stop event is set, the step raises StepCanceled instead of waiting for it."""
    import threading

    from eval_pipelines.core.chat.request import build_request
    from eval_pipelines.core.workflows.step_worker import StepCanceled
    from eval_pipelines.stages.workflow_chat import WorkflowChat
    from eval_pipelines.storage.warehouse import connect

    with connect(tmp_path / "w.duckdb", create=True):
        pass
    slow = FaultRule("X-1", Fault("slow", delay_s=600))
    with serve_standin(rules=[slow]) as server:
        options = {"model": "m", "baseUrl": server.base_url, "timeout": 900}
        settings = parse_node_chat_settings({"options": options}, {}, where="n")
        request = build_request(settings, extraction_messages(settings, "Invoice no. X-1", SCHEMA))
        stop = threading.Event()
        raised: list[BaseException] = []

        def step() -> None:
            try:
                WorkflowChat(tmp_path / "w.duckdb")(settings, [request], stop)
            except BaseException as error:
                raised.append(error)

        thread = threading.Thread(target=step, daemon=True)
        thread.start()
        for _ in range(600):  # until the call is in flight (a guard, not a timing)
            if server.request_count:
                break
            thread.join(0.05)
        stop.set()
        thread.join(60)
        assert not thread.is_alive()
        assert [type(e) for e in raised] == [StepCanceled]
        assert server.request_count == 1
