"""Workflow files: a good one parses into content-addressed revisions; every bad input is
refused with the path of the offending value and the rule it breaks."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.workflows.definition import parse_workflow
from eval_pipelines.core.workflows.python_node import source_of

HERE = Path(__file__).parent
TEMPLATE = {
    "issuer": "ACME Supplies",
    "keywords": ["ACME Supplies Ltd"],
    "fields": {
        "invoice_number": r"Invoice number:\s+(\S+)",
        "amount": {"parser": "regex", "regex": r"Total:\s+([\d,]+\.\d{2})", "type": "float"},
        "lines": {
            "parser": "lines",
            "start": "Items start",
            "end": "Items end",
            "line": r"^(?P<sku>\w+)\s+(?P<qty>\d+)$",
        },
    },
}
WORKFLOW = {
    "kind": "extract",
    "description": "Supplier invoices",
    "nodes": [
        {
            "id": "invoice",
            "type": "invoice2data",
            "cost": 2,
            "templates": [TEMPLATE],
            "builtin_templates": ["com.flipkart.WSRetail.json"],
            "schema": {
                "fields": [
                    {"id": "number", "name": "Invoice number", "source": "invoice_number"},
                    {"id": "total", "name": "Total", "source": "amount", "type": "number"},
                    {
                        "id": "items",
                        "name": "Line items",
                        "source": "lines",
                        "type": "table",
                        "columns": [
                            {"id": "sku", "name": "SKU", "source": "sku"},
                            {"id": "qty", "name": "Quantity", "source": "qty", "type": "number"},
                        ],
                    },
                ]
            },
        },
        {
            "id": "checks",
            "type": "python",
            "function": "eval_pipelines.core.workflows.output:to_jsonable",
            "options": {"strict": True},
            "schema": {"fields": [{"id": "ok", "name": "OK", "type": "boolean", "source": "ok"}]},
        },
    ],
}


def parse(document: Any, base_dir: Path = HERE) -> Any:
    return parse_workflow(document, name="invoices", base_dir=base_dir)


def reversed_keys(value: Any) -> Any:
    """The same document with every mapping's keys in reverse order."""
    if isinstance(value, dict):
        return {key: reversed_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(item) for item in value]
    return value


def changed(path: list[Any], value: Any) -> dict[str, Any]:
    """A copy of WORKFLOW with the value at ``path`` replaced."""
    document = copy.deepcopy(WORKFLOW)
    target: Any = document
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return document


def test_a_good_workflow_parses() -> None:
    workflow = parse(WORKFLOW)

    assert (workflow.name, workflow.kind, workflow.description) == (
        "invoices",
        "extract",
        "Supplier invoices",
    )
    assert len(workflow.revision) == 12
    invoice, checks = workflow.nodes
    assert (invoice.id, invoice.type, invoice.cost) == ("invoice", "invoice2data", 2.0)
    assert [t["template_name"] for t in invoice.config["templates"]] == [
        "templates[0]",
        "com.flipkart.WSRetail.json",
    ]
    assert invoice.schema.field("items").column("qty").type == "number"
    assert checks.config == {
        "function": "eval_pipelines.core.workflows.output:to_jsonable",
        "options": {"strict": True},
        "source": source_of("eval_pipelines.core.workflows.output:to_jsonable"),
    }
    assert checks.cost == 1.0
    # Each node's chain hash covers the nodes before it.
    assert invoice.chain_hash != checks.chain_hash
    assert parse(changed(["nodes", 1, "options"], {})).nodes[0].chain_hash == invoice.chain_hash


def test_the_revision_does_not_depend_on_key_order() -> None:
    assert parse(reversed_keys(WORKFLOW)).revision == parse(WORKFLOW).revision


def test_changing_a_template_changes_the_revision() -> None:
    document = changed(["nodes", 0, "templates", 0, "keywords"], ["ACME Supplies Limited"])

    assert parse(document).revision != parse(WORKFLOW).revision
    assert parse(document).nodes[0].chain_hash != parse(WORKFLOW).nodes[0].chain_hash


def test_a_template_file_is_folded_into_the_revision(tmp_path: Path) -> None:
    template = tmp_path / "acme.yml"
    template.write_text("keywords: [ACME]\nfields:\n  amount: 'Total: (\\d+)'\n", encoding="utf-8")
    document = changed(["nodes", 0, "template_files"], ["acme.yml"])
    first = parse(document, tmp_path)

    template.write_text("keywords: [ACME]\nfields:\n  amount: 'Sum: (\\d+)'\n", encoding="utf-8")

    second = parse(document, tmp_path)
    assert second.nodes[0].config["templates"][1]["fields"] == {"amount": "Sum: (\\d+)"}
    assert second.revision != first.revision


def test_renaming_a_field_changes_the_revision_not_the_schema_fingerprint() -> None:
    renamed = parse(changed(["nodes", 0, "schema", "fields", 0, "name"], "Invoice no."))
    original = parse(WORKFLOW)

    assert renamed.revision != original.revision
    assert renamed.nodes[0].schema.fingerprint() == original.nodes[0].schema.fingerprint()
    retyped = parse(changed(["nodes", 0, "schema", "fields", 1, "type"], "string"))
    assert retyped.nodes[0].schema.fingerprint() != original.nodes[0].schema.fingerprint()


def without(path: list[Any], key: str) -> dict[str, Any]:
    """A copy of WORKFLOW with ``key`` removed from the mapping at ``path``."""
    document = copy.deepcopy(WORKFLOW)
    target: Any = document
    for step in path:
        target = target[step]
    del target[key]
    return document


@pytest.mark.parametrize(
    ("path", "where"),
    [
        (["nodes", 0, "schema", "fields", 1], "nodes[0].schema.fields[1]"),
        (
            ["nodes", 0, "schema", "fields", 2, "columns", 1],
            "nodes[0].schema.fields[2].columns[1]",
        ),
    ],
    ids=["field", "column"],
)
def test_a_field_or_column_without_a_source_is_refused(path: list[Any], where: str) -> None:
    # It used to default to the display name at every parse, so renaming ``Total`` to
    # ``Grand total`` looked for key ``Grand total`` in the node's output: the values were
    # lost, scored as misses, with no drift warning.
    with pytest.raises(InputError) as raised:
        parse(without(path, "source"))

    assert (raised.value.field, raised.value.value) == (f"{where}.source", None)
    assert raised.value.rule == (
        "name the key the node outputs for this value (e.g. source: amount); it is never "
        "taken from the display name, so renaming the field keeps its values"
    )


def test_renaming_a_field_with_its_source_keeps_its_values() -> None:
    from eval_pipelines.core.workflows.output import map_output

    renamed = parse(changed(["nodes", 0, "schema", "fields", 1, "name"], "Grand total"))
    raw = {"invoice_number": "A-1", "amount": 12.5}
    assert map_output(renamed.nodes[0].schema, raw) == map_output(
        parse(WORKFLOW).nodes[0].schema, raw
    )
    assert map_output(renamed.nodes[0].schema, raw)["total"] == 12.5


@pytest.mark.parametrize(
    ("path", "value", "field", "bad", "rule"),
    [
        (
            ["nodes", 0, "schema", "fields", 1, "id"],
            "number",
            "nodes[0].schema.fields[1].id",
            "number",
            "field ids must be unique; already used by nodes[0].schema.fields[0]",
        ),
        (
            ["nodes", 0, "templates", 0, "fields", "amount", "regex"],
            r"Total:\s+([\d,]+\.\d{2}",
            "nodes[0].templates[0].fields.amount.regex",
            r"Total:\s+([\d,]+\.\d{2}",
            "does not compile (re module): missing ), unterminated subpattern at position 9",
        ),
        (
            ["nodes", 0, "templates", 0, "fields", "lines", "line"],
            r"^(?P<sku>\w+\s+(?P<qty>\d+)$",
            "nodes[0].templates[0].fields.lines.line",
            r"^(?P<sku>\w+\s+(?P<qty>\d+)$",
            "does not compile (re module): missing ), unterminated subpattern at position 1",
        ),
        (
            ["nodes", 0, "type"],
            "tesseract",
            "nodes[0].type",
            "tesseract",
            "must be one of ",
        ),
        (
            ["nodes", 0, "cost"],
            -1,
            "nodes[0].cost",
            -1,
            "cost units per step: a number >= 0",
        ),
        (
            ["nodes", 0, "builtin_templates"],
            ["com.example.nothing.yml"],
            "nodes[0].builtin_templates[0]",
            "com.example.nothing.yml",
            "not a template bundled with invoice2data; the names are the file names under ",
        ),
        (
            ["nodes", 1, "function"],
            "eval_pipelines.core.workflows.output.to_jsonable",
            "nodes[1].function",
            "eval_pipelines.core.workflows.output.to_jsonable",
            "a function reference is 'package.module:function' (importable)",
        ),
        (
            ["nodes", 1, "function"],
            "eval_pipelines.core.workflows.output:to_json",
            "nodes[1].function",
            "eval_pipelines.core.workflows.output:to_json",
            "eval_pipelines.core.workflows.output has no attribute to_json",
        ),
    ],
    ids=[
        "duplicate-field-id",
        "regex",
        "lines-regex",
        "node-type",
        "cost",
        "builtin-template",
        "function-format",
        "function-missing",
    ],
)
def test_bad_inputs_name_the_path_and_the_rule(
    path: list[Any], value: Any, field: str, bad: Any, rule: str
) -> None:
    with pytest.raises(InputError) as raised:
        parse(changed(path, value))

    assert (raised.value.field, raised.value.value) == (field, bad)
    assert raised.value.rule.startswith(rule)


def test_the_node_type_rule_lists_the_registered_types() -> None:
    with pytest.raises(InputError) as raised:
        parse(changed(["nodes", 0, "type"], "tesseract"))

    allowed = raised.value.rule.removeprefix("must be one of ").split(", ")
    assert {"invoice2data", "python"} <= set(allowed)


@pytest.mark.parametrize("cost", [float("nan"), float("inf")])
def test_a_non_finite_cost_is_refused(cost: float) -> None:
    # NaN passed 'cost < 0' and then made every run's cost NaN.
    with pytest.raises(InputError) as raised:
        parse(changed(["nodes", 0, "cost"], cost))
    assert raised.value.field == "nodes[0].cost"
