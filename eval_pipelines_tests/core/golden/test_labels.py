"""Authored labels to stored form: ids, names, unmapped paths, key columns, errors."""

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.golden.labels import resolve_labels
from eval_pipelines.core.workflows.schema import parse_schema

SCHEMA = parse_schema(
    {
        "fields": [
            {"id": "invoice_no", "name": "Invoice number"},
            {"id": "total", "name": "Total", "type": "number"},
            {
                "id": "lines",
                "name": "Line items",
                "type": "table",
                "columns": [
                    {"id": "sku", "name": "SKU"},
                    {"id": "qty", "name": "Quantity", "type": "number"},
                    {"id": "amount", "name": "Amount", "type": "number"},
                ],
            },
        ]
    },
    "schema",
)


def test_names_and_ids_become_ids():
    resolved = resolve_labels(
        SCHEMA,
        {
            "Invoice number": "INV-1",
            "total": "12.50",
            "Line items": [{"SKU": "A", "qty": 2}, {"sku": "B", "Amount": 3}],
        },
    )
    # Values are kept as authored; only keys change (normalisation happens at scoring).
    assert resolved.labels == {
        "invoice_no": "INV-1",
        "total": "12.50",
        "lines": [{"sku": "A", "qty": 2}, {"sku": "B", "amount": 3}],
    }
    assert resolved.unmapped == ()
    assert resolved.key_columns == {}


def test_unmapped_values_are_reported_as_paths_and_not_stored():
    resolved = resolve_labels(
        SCHEMA,
        {
            "total": 1,
            "totals": {"vat": 2, "net": 3},
            "lines": [{"sku": "A"}, {"sku": "B"}, {"sku": "C", "colour": "red"}],
        },
    )
    # "totals" is not a field: its two leaves are listed; "colour" is not a column of lines.
    assert resolved.unmapped == ("totals.vat", "totals.net", "lines[2].colour")
    assert resolved.labels == {"total": 1, "lines": [{"sku": "A"}, {"sku": "B"}, {"sku": "C"}]}


def test_keyed_table_records_its_key_column_ids():
    resolved = resolve_labels(
        SCHEMA, {"lines": {"key": ["SKU"], "rows": [{"sku": "A", "qty": 1}, {"SKU": "B"}]}}
    )
    assert resolved.key_columns == {"lines": ("sku",)}
    assert resolved.labels == {"lines": [{"sku": "A", "qty": 1}, {"sku": "B"}]}


def test_a_key_column_outside_the_table_is_refused():
    with pytest.raises(InputError) as caught:
        resolve_labels(SCHEMA, {"lines": {"key": ["colour"], "rows": [{"sku": "A"}]}})
    assert caught.value.field == "lines.key"
    assert caught.value.value == "colour"
    assert caught.value.rule == "not a column of table lines (its columns: sku, qty, amount)"


def test_a_keyed_row_must_label_its_key():
    with pytest.raises(InputError) as caught:
        resolve_labels(SCHEMA, {"lines": {"key": ["sku"], "rows": [{"qty": 1}]}})
    assert caught.value.field == "labels.lines.rows[0]"
    assert "missing: sku" in caught.value.rule


def test_a_bare_column_is_kept_under_its_id():
    # Left out at scoring time, but kept so the case can say so.
    resolved = resolve_labels(SCHEMA, {"total": 5, "Quantity": 2})
    assert resolved.labels == {"total": 5, "qty": 2}


@pytest.mark.parametrize("raw", [[{"total": 1}], "total=1", None, 3])
def test_labels_must_be_an_object(raw):
    with pytest.raises(InputError) as caught:
        resolve_labels(SCHEMA, raw)
    assert caught.value.field == "labels"
    assert caught.value.rule == "must be a JSON object keyed by field id"


def test_nothing_mapping_is_refused_with_the_unmapped_paths():
    with pytest.raises(InputError) as caught:
        resolve_labels(SCHEMA, {"po_number": "X", "vendor": {"name": "Acme"}}, node_id="extract")
    assert caught.value.field == "labels"
    assert caught.value.rule == (
        "no label maps onto a field of node extract's schema; unmapped: po_number, vendor.name"
    )


def test_bare_columns_alone_do_not_count_as_mapping():
    with pytest.raises(InputError) as caught:
        resolve_labels(SCHEMA, {"sku": "A"})
    assert "unmapped: (none)" in caught.value.rule
    assert "bare columns (label their table instead): sku" in caught.value.rule


def test_the_same_field_twice_is_refused():
    with pytest.raises(InputError) as caught:
        resolve_labels(SCHEMA, {"total": 1, "Total": 2})
    assert caught.value.field == "labels.Total"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"total": [1, 2]}, "labels.total"),  # a header field holds one value
        ({"lines": {"sku": "A"}}, "labels.lines"),  # neither a list nor {key, rows}
        ({"lines": ["A"]}, "labels.lines[0]"),  # a row is an object
        ({"lines": [{"sku": ["A"]}]}, "labels.lines[0].sku"),  # a cell holds one value
    ],
)
def test_wrong_shapes_are_refused(raw, field):
    with pytest.raises(InputError) as caught:
        resolve_labels(SCHEMA, raw)
    assert caught.value.field == field


def test_from_run_takes_ids_only_and_matches_tables_by_position():
    resolved = resolve_labels(
        SCHEMA,
        {
            "invoice_no": "INV-1",
            "Total": 3,  # a name, not an output field id
            "lines": {"key": ["sku"], "rows": [{"sku": "A"}]},
        },
        from_run=True,
    )
    assert resolved.labels == {"invoice_no": "INV-1", "lines": [{"sku": "A"}]}
    assert resolved.unmapped == ("Total",)
    assert resolved.key_columns == {}  # the approved table is in the document's own order


def test_to_json_shape():
    resolved = resolve_labels(SCHEMA, {"lines": {"key": "sku", "rows": [{"sku": "A"}]}, "x": 1})
    assert resolved.to_json() == {
        "labels": {"lines": [{"sku": "A"}]},
        "unmapped": ["x"],
        "keyColumns": {"lines": ["sku"]},
    }


@pytest.mark.parametrize(
    ("raw", "field", "rule"),
    [
        ({"total": "abc"}, "labels.total", "must be a number"),
        ({"total": True}, "labels.total", "must be a number"),
        ({"issued": "22/10/2022"}, "labels.issued", "must be a date written YYYY-MM-DD"),
        ({"lines": [{"qty": "two"}]}, "labels.lines[0].qty", "must be a number"),
    ],
)
def test_a_label_its_field_type_can_never_match_is_refused(
    raw: dict, field: str, rule: str
) -> None:
    from eval_pipelines.core.workflows.schema import parse_schema

    schema = parse_schema(
        {
            "fields": [
                {"id": "total", "name": "Total", "type": "number"},
                {"id": "issued", "name": "Issued", "type": "date"},
                {
                    "id": "lines",
                    "name": "Lines",
                    "type": "table",
                    "columns": [{"id": "qty", "name": "Qty", "type": "number"}],
                },
            ]
        },
        "schema",
    )
    with pytest.raises(InputError) as raised:
        resolve_labels(schema, raw)
    assert raised.value.field == field
    assert raised.value.rule.startswith(rule)


def test_numbers_written_as_text_and_null_labels_are_accepted() -> None:
    from eval_pipelines.core.workflows.schema import parse_schema

    schema = parse_schema(
        {"fields": [{"id": "total", "name": "Total", "type": "number"}, {"id": "n", "name": "N"}]},
        "schema",
    )
    assert resolve_labels(schema, {"total": "1,267.39", "n": None}).labels == {
        "total": "1,267.39",
        "n": None,
    }
