"""Case scoring, run summaries and the gate, on hand-computed cases."""

import math

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.golden.labels import resolve_labels
from eval_pipelines.core.golden.scoring import (
    CaseScore,
    RunScore,
    disabled_case,
    passes_gate,
    schema_drift,
    score_case,
    skipped_case,
    summarise_run,
)
from eval_pipelines.core.workflows.schema import parse_schema

LINES = {
    "id": "lines",
    "name": "Line items",
    "type": "table",
    "columns": [
        {"id": "sku", "name": "SKU"},
        {"id": "qty", "name": "Quantity", "type": "number"},
    ],
}
SCHEMA = parse_schema(
    {
        "fields": [
            {"id": "invoice_no", "name": "Invoice number"},
            {"id": "total", "name": "Total", "type": "number"},
            {"id": "issued", "name": "Issue date", "type": "date"},
            LINES,
        ]
    },
    "schema",
)


def score(labels, output, key_columns=None, *, output_error=None, schema=SCHEMA):
    return score_case(
        schema, labels, output, key_columns=key_columns or {}, output_error=output_error
    )


def kinds(case):
    return [(i.kind, i.matched) for i in case.items]


# --- header fields ------------------------------------------------------------------------


def test_header_fields_match_after_normalisation():
    case = score(
        {"invoice_no": "INV-1", "total": "1,234.50", "issued": "2024-03-01"},
        {"invoice_no": "  INV-1 ", "total": 1234.5, "issued": "2024-03-01T00:00:00"},
    )
    # 3 labelled fields, 3 correct -> 1.0
    assert (case.status, case.reason, case.scored, case.correct, case.accuracy) == (
        "passed",
        None,
        3,
        3,
        1.0,
    )
    assert kinds(case) == [("field", True)] * 3


def test_a_wrong_or_missing_header_field_is_a_miss():
    case = score(
        {"invoice_no": "INV-1", "total": 10, "issued": "2024-03-01"},
        {"invoice_no": "INV-1", "total": 11},  # total wrong, issued missing
    )
    # 3 items, 1 correct -> 1/3
    assert case.status == "failed"
    assert (case.scored, case.correct) == (3, 1)
    assert case.accuracy == pytest.approx(1 / 3)
    missing = case.items[2]
    assert (missing.field_id, missing.expected, missing.actual, missing.matched) == (
        "issued",
        "2024-03-01",
        None,
        False,
    )


def test_numbers_match_within_relative_tolerance():
    # 0.1 + 0.2 is 0.30000000000000004: within 1e-9 relative of 0.3; 100.01 is not 100.
    assert score({"total": 0.3}, {"total": 0.1 + 0.2}).status == "passed"
    assert score({"total": 100}, {"total": 100.01}).status == "failed"


# --- tables -------------------------------------------------------------------------------


def test_positional_rows_with_one_invented_row():
    labels = {"lines": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]}
    output = {"lines": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 3}, {"sku": "C", "qty": 9}]}
    case = score(labels, output)
    # 2 labelled rows x 2 cells + 1 invented row = 5 items; qty of B (2 vs 3) and the invented
    # row miss -> 3 correct of 5 -> 0.6
    assert kinds(case) == [
        ("cell", True),
        ("cell", True),
        ("cell", True),
        ("cell", False),
        ("invented_row", False),
    ]
    assert (case.scored, case.correct, case.accuracy) == (5, 3, 0.6)
    invented = case.items[-1]
    assert (invented.field_id, invented.column_id, invented.row) == ("lines", None, 2)
    assert invented.actual == {"sku": "C", "qty": 9}


@pytest.mark.parametrize(("invented", "scored"), [(1, 2), (3, 4)])
def test_each_invented_row_costs_one_miss(invented, scored):
    labels = {"lines": [{"sku": "A"}]}
    output = {"lines": [{"sku": "A"}] + [{"sku": f"X{i}"} for i in range(invented)]}
    case = score(labels, output)
    # 1 labelled cell (correct) + one miss per invented row: 1 -> 1/2, 3 -> 1/4
    assert (case.scored, case.correct) == (scored, 1)
    assert case.scored - case.correct == invented


def test_no_case_reaches_100_percent_with_an_invented_row():
    labels = {"total": 5, "lines": [{"sku": "A", "qty": 1}]}
    output = {"total": 5, "lines": [{"sku": "A", "qty": 1}, {"sku": "Z", "qty": 1}]}
    case = score(labels, output)
    # 1 field + 2 cells all correct, + 1 invented row -> 3/4
    assert case.status == "failed"
    assert case.accuracy == 0.75


def test_key_columns_match_reordered_rows():
    labels = {"lines": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]}
    output = {"lines": [{"sku": "B", "qty": 2}, {"sku": "A", "qty": 1}]}
    keyed = score(labels, output, {"lines": ("sku",)})
    # by key: A<->row 1, B<->row 0: 4 cells, 4 correct
    assert (keyed.status, keyed.scored, keyed.correct) == ("passed", 4, 4)
    assert [i.actual for i in keyed.items] == ["A", 1, "B", 2]
    # by position the same output gets every cell wrong: 4 cells, 0 correct
    positional = score(labels, output)
    assert (positional.status, positional.scored, positional.correct) == ("failed", 4, 0)


def test_duplicate_keys_pair_up_in_order():
    labels = {"lines": [{"sku": "A", "qty": 1}, {"sku": "A", "qty": 2}]}
    output = {"lines": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 5}, {"sku": "A", "qty": 2}]}
    case = score(labels, output, {"lines": ("sku",)})
    # labelled A#0 -> extracted 0, A#1 -> extracted 2; extracted 1 (B) is invented:
    # 4 cells correct + 1 invented = 5 items, 4 correct -> 0.8
    assert (case.scored, case.correct, case.accuracy) == (5, 4, 0.8)
    assert [i.row for i in case.items if i.kind == "invented_row"] == [1]


def test_key_cells_match_after_normalisation():
    labels = {"lines": [{"sku": "A 1", "qty": 1}]}
    output = {"lines": [{"sku": "  A   1 ", "qty": "1"}]}
    case = score(labels, output, {"lines": ("sku",)})
    assert (case.status, case.scored) == ("passed", 2)


def test_a_row_not_extracted_misses_each_labelled_cell():
    labels = {"lines": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}, {"sku": "C"}]}
    output = {"lines": [{"sku": "A", "qty": 1}]}
    case = score(labels, output)
    # row 0: 2 correct cells; row 1: 2 missing cells; row 2: 1 missing cell -> 2 of 5 -> 0.4
    assert kinds(case) == [("cell", True)] * 2 + [("missing_row_cell", False)] * 3
    assert [(i.row, i.column_id, i.expected) for i in case.items[2:]] == [
        (1, "sku", "B"),
        (1, "qty", 2),
        (2, "sku", "C"),
    ]
    assert case.accuracy == 0.4


def test_a_keyed_row_not_extracted_misses_its_cells():
    labels = {"lines": [{"sku": "A"}, {"sku": "B", "qty": 2}, {"sku": "C"}]}
    output = {"lines": [{"sku": "C"}, {"sku": "A"}]}
    case = score(labels, output, {"lines": ("sku",)})
    # A and C found (1 cell each); B's 2 cells missing -> 2 of 4
    assert (case.scored, case.correct) == (4, 2)
    assert [i.kind for i in case.items if i.row == 1] == ["missing_row_cell"] * 2


def test_a_table_absent_from_the_output_misses_every_labelled_cell():
    case = score({"lines": [{"sku": "A", "qty": 1}]}, {"total": 3})
    # 2 missing cells, 0 correct
    assert kinds(case) == [("missing_row_cell", False)] * 2


# --- bare columns, stale labels, errors ---------------------------------------------------


def test_a_bare_column_label_is_left_out_not_missed():
    case = score({"total": 5, "sku": "A"}, {"total": 5})
    # only "total" is scored: 1 of 1
    assert (case.status, case.scored, case.correct) == ("passed", 1, 1)
    assert case.bare_columns == ("sku",)


def test_stale_labels_are_listed_and_never_missed():
    labels = {"total": 5, "po_number": "X", "lines": [{"sku": "A", "colour": "red"}]}
    case = score(labels, {"total": 5, "lines": [{"sku": "A"}]})
    # total + sku cell scored (2 of 2); po_number and the colour column are gone from the schema
    assert (case.status, case.scored, case.correct) == ("passed", 2, 2)
    assert case.stale == ("po_number", "lines.colour")


def test_a_gone_column_is_listed_once_per_case():
    labels = {"lines": [{"sku": "A", "colour": "red"}, {"sku": "B", "colour": "blue"}]}
    case = score(labels, {"lines": [{"sku": "A"}, {"sku": "B"}]})
    assert case.stale == ("lines.colour",)


def test_a_label_whose_shape_no_longer_fits_its_field_is_stale():
    # total was a table when labelled; it is a number now.
    case = score({"total": [{"x": 1}], "invoice_no": "A"}, {"invoice_no": "A"})
    assert case.stale == ("total",)
    assert case.scored == 1


def test_no_output_errors_the_case():
    case = score({"total": 5}, None, output_error="extract timed out")
    assert (case.status, case.reason, case.items) == ("errored", "no output: extract timed out", ())


def test_no_resolving_label_errors_the_case():
    case = score({"po_number": "X", "vendor": "Acme"}, {"total": 5})
    assert case.status == "errored"
    assert case.reason == "no label resolves against the schema: 2 stale"
    assert case.stale == ("po_number", "vendor")


def test_bare_columns_and_stale_labels_alone_error_the_case():
    case = score({"sku": "A", "po_number": "X"}, {"total": 5})
    assert case.status == "errored"
    assert case.reason == "no label resolves against the schema: 1 stale, 1 bare column left out"


def test_runner_statuses():
    assert skipped_case("run cancelled") == CaseScore("skipped", "run cancelled")
    assert disabled_case().status == "disabled"


# --- renames and drift --------------------------------------------------------------------


def test_a_label_stored_by_id_survives_a_rename_without_drift():
    before = SCHEMA
    labels = resolve_labels(before, {"Total": 12}).labels  # authored by display name
    assert labels == {"total": 12}
    after = parse_schema(
        {
            "fields": [
                {"id": "invoice_no", "name": "Invoice no."},
                {"id": "total", "name": "Grand total", "type": "number"},
                {"id": "issued", "name": "Issue date", "type": "date"},
                {**LINES, "name": "Lines"},
            ]
        },
        "schema",
    )
    case = score(labels, {"total": 12.0}, schema=after)
    assert (case.status, case.items[0].field_id) == ("passed", "total")
    assert not schema_drift(before.fingerprint(), after)


def test_a_type_change_drifts():
    changed = parse_schema(
        {"fields": [{"id": "invoice_no", "name": "Invoice number", "type": "number"}]}, "schema"
    )
    assert schema_drift(SCHEMA.fingerprint(), changed)


# --- run summary --------------------------------------------------------------------------


def _run_cases():
    header = {"invoice_no": "A", "total": 5, "issued": "2024-01-02"}
    passed = score(header, dict(header))  # 3 of 3
    failed = score(
        {"lines": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]},
        {"lines": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}, {"sku": "C"}]},
    )  # 4 cells correct + 1 invented row: 4 of 5
    errored = score({"total": 5}, None, output_error="crash")
    stale_only = score({"po_number": "X"}, {"total": 5})  # errored, 1 stale
    return [passed, failed, errored, stale_only, skipped_case("stopped"), disabled_case()]


def test_summary_figures():
    run = summarise_run(_run_cases(), schema=SCHEMA)
    # field accuracy: (3 + 4) correct of (3 + 5) scored = 7/8 = 0.875 (errored/skipped add none)
    assert (run.field_correct, run.field_scored, run.field_accuracy) == (7, 8, 0.875)
    # pass rate: 1 passed / (1 passed + 1 failed); 2 errored and 1 skipped leave the denominator
    assert (run.pass_rate, run.pass_rate_n) == (0.5, 2)
    assert run.pass_rate_interval is None  # 2 cases is below the minimum sample
    assert (run.passed, run.failed, run.errored, run.skipped, run.disabled) == (1, 1, 2, 1, 1)
    assert (run.stale_fields, run.stale_labels) == (1, 1)


def test_summary_breakdown_has_a_row_per_field_with_gaps_not_zeros():
    run = summarise_run(_run_cases(), schema=SCHEMA)
    rows = {r.key: (r.scored, r.correct, r.accuracy, r.stale) for r in run.fields}
    assert list(rows) == [
        "invoice_no",
        "total",
        "issued",
        "lines.sku",
        "lines.qty",
        "lines",
        "po_number",
    ]
    assert rows["invoice_no"] == (1, 1, 1.0, False)
    assert rows["lines.sku"] == (2, 2, 1.0, False)
    assert rows["lines"] == (1, 0, 0.0, False)  # the invented row C
    assert rows["po_number"] == (0, 0, None, True)  # stale: listed, no accuracy
    # a field no scored case labelled is a gap, not a zero
    gap = summarise_run([score({"total": 5}, {"total": 5})], schema=SCHEMA)
    assert gap.field("invoice_no").accuracy is None
    assert gap.field("lines").accuracy is None


def test_stale_labels_are_counted_across_cases():
    cases = [
        score({"total": 5, "po_number": "X"}, {"total": 5}),
        score(
            {"total": 5, "po_number": "Y", "lines": [{"sku": "A", "colour": "red"}]},
            {
                "total": 4,
                "lines": [{"sku": "A"}],
            },
        ),
    ]
    run = summarise_run(cases, schema=SCHEMA)
    # distinct stale paths: po_number, lines.colour -> 2; stale labels: 1 + 2 -> 3
    assert (run.stale_fields, run.stale_labels) == (2, 3)
    assert run.field("po_number").stale_labels == 2
    # stale labels cost nothing: total 1 of 2, sku 1 of 1 -> 2 of 3
    assert (run.field_correct, run.field_scored) == (2, 3)


def test_pass_rate_interval_from_the_minimum_of_twenty_cases():
    # MIN_N is 20 (issue 7): 19 cases give the rate without an interval, 20 give both.
    right, wrong = score({"total": 5}, {"total": 5}), score({"total": 5}, {"total": 6})
    below = summarise_run([right] * 15 + [wrong] * 4, schema=SCHEMA)
    assert (below.pass_rate, below.pass_rate_interval) == (15 / 19, None)
    run = summarise_run([right] * 16 + [wrong] * 4, schema=SCHEMA)
    assert run.pass_rate == 0.8
    assert run.pass_rate_interval is not None
    assert run.pass_rate_interval.low < 0.8 < run.pass_rate_interval.high


def test_json_round_trips():
    cases = _run_cases()
    for case in cases:
        assert CaseScore.from_json(case.to_json()) == case
    run = summarise_run(cases, schema=SCHEMA)
    assert RunScore.from_json(run.to_json()) == run
    shape = run.to_json()
    # Shares of fewer than 20 observations are written insufficient_evidence beside their
    # counts (and read back exactly from the counts: the round trip above).
    assert shape["fieldAccuracy"] == {"correct": 7, "n": 8, "value": "insufficient_evidence"}
    assert shape["passRate"] == {
        "passed": 1,
        "n": 2,
        "value": "insufficient_evidence",
        "interval": None,
    }
    assert shape["counts"] == {
        "passed": 1,
        "failed": 1,
        "errored": 2,
        "skipped": 1,
        "disabled": 1,
    }
    assert shape["stale"] == {"fields": 1, "labels": 1}


# --- gate ---------------------------------------------------------------------------------


def _run(correct, scored):
    cases = [score({"total": 1}, {"total": 1})] * correct
    cases += [score({"total": 1}, {"total": 2})] * (scored - correct)
    return summarise_run(cases, schema=SCHEMA)


def test_gate_below_threshold():
    decision = passes_gate(_run(7, 8), threshold=1.0)
    assert (decision.passed, decision.reason) == (False, "scored 7/8 below threshold 1.0")


def test_gate_at_threshold():
    decision = passes_gate(_run(7, 8), threshold=0.875)
    assert (decision.passed, decision.reason) == (
        True,
        "scored 7/8 at or above threshold 0.875",
    )


def test_gate_compares_the_ratio_not_a_product():
    # 0.28 * 25 is 7.000000000000001 in floating point; 7/25 is exactly the float 0.28.
    assert passes_gate(_run(7, 25), threshold=0.28).passed


def test_gate_shows_a_truncated_score():
    # 1999/2000 = 0.9995 would round to "1.000"; truncation keeps it visibly below 1.0.
    assert (
        passes_gate(_run(1999, 2000), threshold=1).reason
        == "scored 0.999 (1999/2000) below threshold 1.0"
    )


def test_gate_fails_when_nothing_was_scored():
    run = summarise_run([score({"total": 1}, None)], schema=SCHEMA)
    decision = passes_gate(run, threshold=0.5)
    assert not decision.passed
    assert decision.reason.startswith("scored nothing")


@pytest.mark.parametrize("threshold", [0, 1.5, "x", -0.1, True, math.nan, None])
def test_gate_threshold_is_validated(threshold):
    with pytest.raises(InputError) as caught:
        passes_gate(_run(1, 1), threshold=threshold)
    assert caught.value.field == "threshold"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (22 / 23, "0.956"),  # 0.95652...: rounding would read 0.957
        (0.9996, "0.999"),  # never "1.000" below a threshold of 1.0
        (0.29, "0.290"),  # 0.29 * 1000 is 289.99999999999997: truncation must not read 0.289
        (30 / 33, "0.909"),
        (1.0, "1.000"),
        (0.0, "0.000"),
        (None, "—"),
    ],
)
def test_a_share_is_shown_truncated_to_three_decimals(value: float | None, shown: str) -> None:
    from eval_pipelines.core.golden.shares import format_share

    assert format_share(value) == shown
