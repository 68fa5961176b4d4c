"""The invoice2data node: templates folded in and checked when saved, matched and run over
the document's text; and its raw output mapped to field values."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.workflows.documents import document_from_text
from eval_pipelines.core.workflows.invoice2data_node import Invoice2DataNode
from eval_pipelines.core.workflows.nodes import NodeFailed
from eval_pipelines.core.workflows.output import map_output, normalise_value
from eval_pipelines.core.workflows.schema import parse_schema

NODE = Invoice2DataNode()

INVOICE = """\
ACME Supplies Ltd                         Invoice
Invoice number: INV-2024-007
Invoice date: 2024-03-15

Items start
Widget        2      3.50
Gadget        1     12.00
Items end

Total:   1,019.00 EUR
"""

ACME = {
    "issuer": "ACME Supplies",
    "keywords": ["ACME Supplies Ltd", "Invoice number"],
    "fields": {
        "invoice_number": {"parser": "regex", "regex": r"Invoice number:\s+(\S+)"},
        "date": {"parser": "regex", "regex": r"Invoice date:\s+(\S+)", "type": "date"},
        "amount": {"parser": "regex", "regex": r"Total:\s+([\d,]+\.\d{2})", "type": "float"},
        "items": {
            "parser": "lines",
            "start": r"Items start",
            "end": r"Items end",
            "line": r"^(?P<sku>\w+)\s+(?P<qty>\d+)\s+(?P<price>\d+\.\d{2})$",
            "types": {"qty": "int", "price": "float"},
        },
    },
    "options": {"currency": "EUR", "date_formats": ["%Y-%m-%d"]},
}


def prepare(config: dict[str, Any], base_dir: Path = Path(".")) -> dict[str, Any]:
    return NODE.prepare(copy.deepcopy(config), "nodes[0]", base_dir)


def run(config: dict[str, Any], text: str = INVOICE) -> dict[str, Any]:
    return NODE.run(prepare(config), document_from_text("acme.txt", text), {})


def test_fields_and_lines_are_extracted_as_json() -> None:
    assert run({"templates": [ACME]}) == {
        "issuer": "ACME Supplies",
        "template_name": "templates[0]",
        "invoice_number": "INV-2024-007",
        "date": "2024-03-15",
        "amount": 1019.0,
        "items": [
            {"sku": "Widget", "qty": 2, "price": 3.5},
            {"sku": "Gadget", "qty": 1, "price": 12.0},
        ],
        "currency": "EUR",
        "desc": "Invoice from ACME Supplies",
    }


def test_no_matching_template_fails_the_node_naming_the_templates_tried() -> None:
    other = {**ACME, "template_name": "other", "keywords": ["Globex"]}
    config = {"templates": [{**ACME, "keywords": ["ACME Supplies Ltd", "Rechnung"]}, other]}

    with pytest.raises(NodeFailed) as raised:
        run(config)

    assert str(raised.value) == "no template matched: tried templates[0], other"


def test_missing_required_fields_fail_the_node_with_invoice2data_message() -> None:
    template = {**ACME, "required_fields": ["invoice_number", "vat_number"]}

    with pytest.raises(NodeFailed) as raised:
        run({"templates": [template]})

    assert str(raised.value) == (
        "Unable to parse required field(s): vat_number (template templates[0])"
    )


def test_the_highest_priority_matching_template_wins() -> None:
    low = {
        **ACME,
        "template_name": "low",
        "fields": {"invoice_number": "number: (\\S+)"},
        "required_fields": ["invoice_number"],
    }
    high = {**low, "template_name": "high", "priority": 9, "issuer": "ACME (high)"}

    output = run({"templates": [low, high]})

    assert (output["template_name"], output["issuer"]) == ("high", "ACME (high)")


def test_a_lines_field_named_lines_gets_invoice2data_canonical_column_names() -> None:
    # invoice2data 1.0.1 renames line columns of `lines` and `tax_lines` (description -> name,
    # unit_price -> price_unit, ...): a schema's column sources must use the new names.
    line = r"^(?P<description>\w+)\s+\d+\s+(?P<unit_price>\S+)$"
    items = {**ACME["fields"]["items"], "line": line}
    template = {**ACME, "fields": {**ACME["fields"], "lines": items}}

    output = run({"templates": [template]})

    assert output["lines"] == [
        {"name": "Widget", "price_unit": "3.50"},
        {"name": "Gadget", "price_unit": "12.00"},
    ]


def test_invoice2data_logs_nothing_while_running(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    template = {**ACME, "fields": {**ACME["fields"], "po": r"PO:\s+(\d+)"}}

    run({"templates": [template]})

    assert [r for r in caplog.records if r.name.startswith("invoice2data")] == []


def test_prepare_folds_inline_file_and_bundled_templates_into_json(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    # An unquoted YAML date is a date object; it is stored as the ISO text it would output.
    (tmp_path / "templates" / "globex.yml").write_text(
        "issuer: Globex\nkeywords: [Globex]\nfields:\n  static_since: 2021-01-01\n"
        "  invoice_number: 'No\\.\\s+(\\d+)'\n",
        encoding="utf-8",
    )
    config = {
        "templates": [ACME],
        "template_files": ["templates/globex.yml"],
        "builtin_templates": ["com.flipkart.WSRetail.json"],
    }

    prepared = prepare(config, tmp_path)

    assert list(prepared) == ["templates"]
    names = [t["template_name"] for t in prepared["templates"]]
    assert names == ["templates[0]", "globex.yml", "com.flipkart.WSRetail.json"]
    assert prepared["templates"][1]["fields"]["static_since"] == "2021-01-01"
    assert prepared["templates"][2]["keywords"] == ["flipkart", "WS Retail", "OD"]
    assert json.loads(json.dumps(prepared)) == prepared


@pytest.mark.parametrize(
    ("change", "field", "value", "rule"),
    [
        (
            {"fields": {"amount": {"parser": "regex", "regex": r"Total:\s+([\d,]+"}}},
            "nodes[0].templates[0].fields.amount.regex",
            r"Total:\s+([\d,]+",
            "does not compile (re module): missing ), unterminated subpattern at position 9",
        ),
        (
            {"fields": {"amount": ["Total: (\\d+)", "Sum: (\\d+) (EUR)"]}},
            "nodes[0].templates[0].fields.amount[1]",
            "Sum: (\\d+) (EUR)",
            "has 2 capturing groups; a field regex captures at most one",
        ),
        (
            {"fields": {"items": {**ACME["fields"]["items"], "first_line": ["(?P<sku>[a-"]}}},
            "nodes[0].templates[0].fields.items.first_line[0]",
            "(?P<sku>[a-",
            "does not compile (re module): unterminated character set",
        ),
        (
            {"fields": {"items": {"parser": "lines", "start": "a", "end": "b"}}},
            "nodes[0].templates[0].fields.items.line",
            None,
            "a lines rule needs a line regex",
        ),
        (
            {"tables": [{"start": "A", "end": "B", "body": "(?P<x>\\d+"}]},
            "nodes[0].templates[0].tables[0].body",
            "(?P<x>\\d+",
            "does not compile (re module): missing ), unterminated subpattern",
        ),
        (
            {"options": {"replace": [["(", ""]]}},
            "nodes[0].templates[0].options.replace[0][0]",
            "(",
            "does not compile (re module): missing ), unterminated subpattern",
        ),
        (
            {"fields": {"amount": {"parser": "regex", "regex": "(\\d+)", "type": "money"}}},
            "nodes[0].templates[0].fields.amount.type",
            "money",
            "must be one of int, float, date, datetime",
        ),
        (
            {"fields": {"amount": {"parser": "ocr"}}},
            "nodes[0].templates[0].fields.amount.parser",
            "ocr",
            "must be one of lines, regex, static",
        ),
        ({"keywords": []}, "nodes[0].templates[0].keywords", [], "give at least one"),
        (
            {"camelot": {"flavor": "lattice"}},
            "nodes[0].templates[0].camelot",
            {"flavor": "lattice"},
            "the camelot plugin re-reads the PDF",
        ),
    ],
    ids=[
        "regex",
        "two-groups",
        "first-line",
        "lines-without-line",
        "table-body",
        "options-replace",
        "type",
        "parser",
        "no-keywords",
        "camelot",
    ],
)
def test_template_errors_name_their_path(
    change: dict[str, Any], field: str, value: Any, rule: str
) -> None:
    with pytest.raises(InputError) as raised:
        prepare({"templates": [{**ACME, **change}]})

    assert (raised.value.field, raised.value.value) == (field, value)
    assert raised.value.rule.startswith(rule)


def test_configuration_errors() -> None:
    with pytest.raises(InputError) as raised:
        prepare({})
    assert raised.value.field == "nodes[0]"
    assert raised.value.rule.startswith("give at least one template")

    with pytest.raises(InputError) as raised:
        prepare({"builtin_templates": ["com.amazon.aws.yml"]})
    assert raised.value.field == "nodes[0].builtin_templates[0]"
    assert raised.value.rule == (
        "several bundled templates have this name; give one of "
        "com/com.amazon.aws.yml, fr/com.amazon.aws.yml"
    )

    with pytest.raises(InputError) as raised:
        prepare({"templates": [ACME, {**ACME, "template_name": "templates[0]"}]})
    assert raised.value.field == "nodes[0].templates[1]"
    assert raised.value.rule.startswith("template names must be unique")

    with pytest.raises(InputError) as raised:
        prepare({"template_files": ["acme.txt"]})
    assert raised.value.field == "nodes[0].template_files[0]"

    with pytest.raises(InputError) as raised:
        prepare({"templates": [ACME], "template": []})
    assert raised.value.field == "nodes[0].template"


def test_map_output_keys_normalised_values_by_field_id() -> None:
    schema = parse_schema(
        {
            "fields": [
                {"id": "number", "name": "Invoice number", "source": "invoice_number"},
                {"id": "issued", "name": "Date", "source": "date", "type": "date"},
                {"id": "total", "name": "Total", "source": "amount", "type": "number"},
                {"id": "vat", "name": "VAT id", "source": "vat"},
                {
                    "id": "rows",
                    "name": "Items",
                    "source": "items",
                    "type": "table",
                    "columns": [
                        {"id": "sku", "name": "SKU", "source": "sku"},
                        {"id": "qty", "name": "Qty", "type": "number", "source": "qty"},
                        {"id": "unit", "name": "Unit", "source": "uom"},
                    ],
                },
            ]
        },
        "nodes[0].schema",
    )

    values = map_output(schema, run({"templates": [ACME]}))

    assert values == {
        "number": "INV-2024-007",
        "issued": "2024-03-15",
        "total": 1019.0,
        "rows": [{"sku": "Widget", "qty": 2.0}, {"sku": "Gadget", "qty": 1.0}],
    }
    assert map_output(schema, {"items": "no table here", "vat": "  NL 123 "}) == {
        "vat": "NL 123",
        "rows": [],
    }


@pytest.mark.parametrize(
    ("value", "value_type", "expected"),
    [
        ("  ACME \n Supplies  ", "string", "ACME Supplies"),
        (7740001454.0, "string", "7740001454"),
        ("1,234.50", "number", 1234.5),
        ("-12", "number", -12.0),
        ("1.234,50", "number", "1.234,50"),
        (True, "number", "true"),
        ("2017-12-31T10:30:00", "date", "2017-12-31"),
        ("31/12/2017", "date", "31/12/2017"),
        (["2022-11-28", "2022-12-06"], "date", '["2022-11-28", "2022-12-06"]'),
        ("Yes", "boolean", True),
        (0, "boolean", False),
        (None, "number", None),
    ],
)
def test_normalise_value(value: Any, value_type: str, expected: Any) -> None:
    assert normalise_value(value, value_type) == expected
    assert normalise_value(expected, value_type) == expected
