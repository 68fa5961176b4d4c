"""Application CI's one boundary: every refusal names its field, value and rule; healthy results
of every shape pass; a raw model-call comparison never becomes application coverage."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.application_ci import application_ci_result
from eval_pipelines.core.lift.evidence import (
    ApplicationCI,
    EvidenceKind,
    confirmed_improvement,
    evidence_kind,
)

WHEN = datetime(2026, 12, 6, 21, 0)

HARNESS: dict[str, Any] = {
    "workspace_id": "acme",
    "candidate": "memo-v2",
    "source": "harness",
    "commit": "9f1c2ab",
    "suite": "replay smoke",
    "passed": 48,
    "failed": 0,
    "recorded_at": WHEN,
}
GATE: dict[str, Any] = {
    **HARNESS,
    "source": "golden_gate",
    "commit": "1650c7d40fc1",
    "suite": "supplier_invoices",
    "passed": 1,
    "golden_run_ids": ("g-77e6cdbb8a2d",),
    "detail": "set inv: scored 1.000 (33/33) at or above threshold 1.0",
}


def test_a_harness_result_and_a_gate_result_pass_as_application_ci() -> None:
    harness = application_ci_result(**HARNESS)
    assert isinstance(harness, ApplicationCI)
    assert evidence_kind(harness) == EvidenceKind.APPLICATION_CI
    assert (harness.passed_count, harness.failed_count, harness.skipped_count) == (48, 0, 0)
    assert harness.passed and harness.binds == "application" and harness.golden_run_ids == ()
    gate = application_ci_result(**GATE)
    assert gate.golden_run_ids == ("g-77e6cdbb8a2d",) and gate.passed
    assert not confirmed_improvement(harness) and not confirmed_improvement(gate)


@pytest.mark.parametrize(
    "changes",
    [
        {"failed": 3},  # a failed check is recorded too: it is evidence all the same
        {"passed": 0, "failed": 2},
        {"skipped": 5},
        {"commit": "release/2026.12@9f1c2ab"},
        {"commit": "c" * 200},
        {"suite": "e2e"},
        {"suite": "s" * 200},
        {"suite": "replay — ünïcode suite"},
        {"recorded_at": datetime(2026, 12, 6, 22, 0, tzinfo=timezone(timedelta(hours=1)))},
    ],
)
def test_healthy_values_of_every_shape_pass(changes: dict[str, Any]) -> None:
    result = application_ci_result(**{**HARNESS, **changes})
    assert result.passed == (result.failed_count == 0 and result.passed_count > 0)
    assert result.recorded_at.tzinfo is None  # stored in UTC without an offset
    if "recorded_at" in changes:
        assert result.recorded_at == datetime(2026, 12, 6, 21, 0)


def test_a_raw_model_call_comparison_cannot_claim_application_coverage() -> None:
    with pytest.raises(InputError) as refused:
        application_ci_result(**HARNESS, binds="model_calls")
    assert refused.value.field == "binds"
    assert "a raw model-call comparison cannot claim application coverage" in str(refused.value)
    # Whichever way it is built: the type itself never holds model-call coverage.
    result = application_ci_result(**HARNESS)
    with pytest.raises(InputError, match="raw model-call comparison"):
        dataclasses.replace(result, binds="model_calls")


@pytest.mark.parametrize(
    ("changes", "field", "rule"),
    [
        ({"binds": "unit_tests"}, "binds", "must be application"),
        ({"workspace_id": "acme corp"}, "workspace_id", "a workspace id is 1-64"),
        ({"workspace_id": None}, "workspace_id", "a workspace id is"),
        ({"candidate": ""}, "candidate", "a candidate (its lever) is"),
        ({"source": "nightly"}, "source", "must be one of golden_gate, harness"),
        ({"commit": ""}, "commit", "without whitespace"),
        ({"commit": "abc 123"}, "commit", "without whitespace"),
        ({"commit": "c" * 201}, "commit", "1-200 characters"),
        ({"commit": 1234}, "commit", "without whitespace"),
        ({"suite": ""}, "suite", "1-200 characters"),
        ({"suite": " e2e"}, "suite", "no leading or trailing space"),
        ({"suite": "e2e\nforged line"}, "suite", "no line break"),
        ({"suite": "s" * 201}, "suite", "1-200 characters"),
        ({"passed": -1}, "passed", "whole number >= 0"),
        ({"passed": 1.5}, "passed", "whole number >= 0"),
        ({"passed": True}, "passed", "whole number >= 0"),
        ({"failed": None}, "failed", "whole number >= 0"),
        ({"skipped": -2}, "skipped", "whole number >= 0"),
        ({"passed": 0, "failed": 0, "skipped": 3}, "passed", "ran no test"),
        ({"golden_run_ids": ("g-1",)}, "golden_run_ids", "not a harness"),
        ({"recorded_at": "2026-12-06"}, "recorded_at", "must be a datetime"),
        ({"detail": 3}, "detail", "must be text"),
    ],
)
def test_each_harness_refusal_names_the_field_value_and_rule(
    changes: dict[str, Any], field: str, rule: str
) -> None:
    with pytest.raises(InputError) as refused:
        application_ci_result(**{**HARNESS, **changes})
    assert refused.value.field == field
    assert rule in str(refused.value)


@pytest.mark.parametrize(
    ("changes", "rule"),
    [
        ({"golden_run_ids": ()}, "names its golden runs"),
        ({"golden_run_ids": ("g 1",)}, "a golden run id is"),
    ],
)
def test_a_gate_result_names_its_golden_runs(changes: dict[str, Any], rule: str) -> None:
    with pytest.raises(InputError, match="golden_run_ids") as refused:
        application_ci_result(**{**GATE, **changes})
    assert rule in str(refused.value)


def test_the_result_is_frozen_and_its_kind_fixed() -> None:
    result = application_ci_result(**HARNESS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.passed_count = 0  # type: ignore[misc]
    assert "kind" not in {f.name for f in dataclasses.fields(ApplicationCI)}
    assert result.to_json()["kind"] == "application_ci"
    assert result.to_json()["recordedAt"] == "2026-12-06T21:00:00"
