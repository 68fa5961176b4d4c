"""Comparing two runs: per-field deltas, largest regression first; changed cases, passed to
failed first. Keyed by case id and field id, so a rename between the runs changes nothing."""

import pytest

from eval_pipelines.core.golden.scoring import compare_runs, score_case, summarise_run
from eval_pipelines.core.workflows.schema import parse_schema


def _schema(total_name):
    return parse_schema(
        {
            "fields": [
                {"id": "invoice_no", "name": "Invoice number"},
                {"id": "total", "name": total_name, "type": "number"},
                {"id": "issued", "name": "Issue date", "type": "date"},
                {
                    "id": "lines",
                    "name": "Line items",
                    "type": "table",
                    "columns": [
                        {"id": "sku", "name": "SKU"},
                        {"id": "qty", "name": "Quantity", "type": "number"},
                    ],
                },
            ]
        },
        "schema",
    )


BEFORE = _schema("Total")
AFTER = _schema("Grand total")  # renamed between the runs: same ids, same fingerprint

LABELS = {
    "c1": {"invoice_no": "A", "total": 5, "issued": "2024-01-01"},
    "c2": {"invoice_no": "B", "total": 6},
    "c3": {"total": 7},
    "c4": {"total": 8},
    "c5": {"lines": [{"sku": "A"}]},
}
OUTPUTS_A = {
    "c1": {"invoice_no": "A", "total": 5, "issued": "2024-01-01"},  # passed 3/3
    "c2": {"invoice_no": "X", "total": 6},  # failed 1/2 (invoice_no)
    "c3": {"total": 7},  # passed 1/1
    "c4": {"total": 8},  # passed 1/1
}  # c5 not in run a
OUTPUTS_B = {
    "c1": {"invoice_no": "A", "total": 5, "issued": "2024-01-02"},  # failed 2/3 (issued)
    "c2": {"invoice_no": "B", "total": 6},  # passed 2/2
    "c3": None,  # errored
    "c4": {"total": 9},  # failed 0/1
    "c5": {"lines": [{"sku": "A"}]},  # passed 1/1
}


def _run(schema, outputs):
    cases = {
        case_id: score_case(schema, LABELS[case_id], output, key_columns={}, output_error="crash")
        for case_id, output in outputs.items()
    }
    return summarise_run(cases.values(), schema=schema), cases


def _compare():
    a, a_cases = _run(BEFORE, OUTPUTS_A)
    b, b_cases = _run(AFTER, OUTPUTS_B)
    return compare_runs(a, a_cases, b, b_cases)


def test_field_deltas_largest_regression_first():
    result = _compare()
    rows = [(d.key, d.accuracy_a, d.accuracy_b, d.delta) for d in result.fields]
    # issued:     a 1/1 = 1.0, b 0/1 = 0.0          -> -1.0
    # total:      a 4/4 = 1.0, b 2/3 (c4 wrong)     -> -1/3
    # invoice_no: a 1/2 = 0.5, b 2/2 = 1.0          -> +0.5
    # lines.sku:  scored in b only                  -> None
    # lines, lines.qty: scored on neither side      -> None, by key
    order = ["issued", "total", "invoice_no", "lines", "lines.qty", "lines.sku"]
    assert [r[0] for r in rows] == order
    assert rows[0][1:] == (1.0, 0.0, -1.0)
    assert rows[1][3] == pytest.approx(-1 / 3)
    assert rows[2][1:] == (0.5, 1.0, 0.5)
    assert rows[5][1:] == (None, 1.0, None)


def test_changed_cases_passed_to_failed_first():
    result = _compare()
    changes = [(c.case_id, c.status_a, c.status_b) for c in result.cases]
    # c1, c4 passed -> failed first (by id); then c2 failed -> passed, c3 passed -> errored,
    # c5 only in b. Nothing else changed status.
    assert changes == [
        ("c1", "passed", "failed"),
        ("c4", "passed", "failed"),
        ("c2", "failed", "passed"),
        ("c3", "passed", "errored"),
        ("c5", None, "passed"),
    ]


def test_run_level_deltas():
    result = _compare()
    # field accuracy: a (3 + 1 + 1 + 1) / (3 + 2 + 1 + 1) = 6/7; b (2 + 2 + 0 + 1) / (3 + 2 + 1 + 1)
    # = 5/7 -> -1/7. pass rate: a 3/4, b 2/4 -> -0.25
    assert result.field_accuracy_delta == pytest.approx(-1 / 7)
    assert result.pass_rate_delta == -0.25


def test_unchanged_runs_have_no_changed_cases():
    a, a_cases = _run(BEFORE, OUTPUTS_A)
    b, b_cases = _run(AFTER, OUTPUTS_A)  # same outputs, the schema renamed in between
    result = compare_runs(a, a_cases, b, b_cases)
    assert result.cases == ()
    assert {d.delta for d in result.fields if d.delta is not None} == {0.0}


def test_to_json_shape():
    # Every figure here has fewer than 20 observations: each share and delta reads
    # insufficient_evidence beside the counts (the exact values stay on the result).
    few = "insufficient_evidence"
    shape = _compare().to_json()
    assert set(shape) == {
        "fieldAccuracyDelta",
        "passRateDelta",
        "fields",
        "cases",
        "fieldScoredA",
        "fieldScoredB",
        "passRateNA",
        "passRateNB",
    }
    assert (shape["fieldAccuracyDelta"], shape["passRateDelta"]) == (few, few)
    assert (shape["fieldScoredA"], shape["fieldScoredB"]) == (7, 7)
    assert (shape["passRateNA"], shape["passRateNB"]) == (4, 4)
    assert shape["fields"][0] == {
        "key": "issued",
        "accuracyA": few,
        "accuracyB": few,
        "scoredA": 1,
        "scoredB": 1,
        "correctA": 1,
        "correctB": 0,
        "delta": few,
    }
    assert shape["cases"][0] == {
        "caseId": "c1",
        "statusA": "passed",
        "statusB": "failed",
        "accuracyA": few,
        "accuracyB": few,
        "scoredA": 3,
        "correctA": 3,
        "scoredB": 3,
        "correctB": 2,
    }


def test_a_difference_is_written_once_both_sides_have_20_observations():
    from eval_pipelines.core.golden.shares import json_difference

    assert json_difference(-0.05, 20, 20) == -0.05
    assert json_difference(-0.05, 19, 40) == "insufficient_evidence"
    assert json_difference(-0.05, 40, 19) == "insufficient_evidence"
    assert json_difference(None, 3, 40) is None  # a side with no share: nothing to compare
