"""The optional cost and envelope columns of a lift log: each rule refuses a bad value with its
file line (nothing of the file passes), and every healthy shape of a file is typed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.cost_columns import COST_COLUMNS
from eval_pipelines.core.lift.logs import read_log, validate_log

ENVELOPE = {
    "model": "small-1",
    "provider": "acme",
    "tools": "sha256:9f2c",
    "response_format": "json_schema",
    "generation_params": "temperature=0",
    "streaming": False,
    "provider_policy": "zdr",
}


def row(i: int, **changes: Any) -> dict[str, Any]:
    base = {
        "timestamp": "2026-11-23T10:00:00Z",
        "request_id": f"r{i}",
        "workspace_id": "ws",
        "cluster": f"trace-{i // 2}",
        "exposure_arm": "treated" if i % 2 else "lever_holdout",
        "exposure_epoch": "e1",
        "claim_type": "coding",
        "situation_class": "single",
        "source": "declared",
        "outcome": bool(i % 3),
    }
    return {**base, **changes}


def validated(tmp_path: Path, rows: list[dict[str, Any]]) -> pl.DataFrame:
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return validate_log(read_log(path))


def refusal(tmp_path: Path, rows: list[dict[str, Any]]) -> str:
    with pytest.raises(InputError) as raised:
        validated(tmp_path, rows)
    message = str(raised.value)
    assert message.endswith("(nothing was ingested)")
    return message


def test_a_log_without_cost_columns_has_them_typed_and_empty(tmp_path: Path) -> None:
    events = validated(tmp_path, [row(0), row(1)])
    for name, dtype in COST_COLUMNS.items():
        assert events.schema[name] == dtype, name
        assert events.get_column(name).is_null().all(), name


def test_cost_only_tokens_only_and_mixed_rows_pass(tmp_path: Path) -> None:
    rows = [
        row(0, cost=0.0021, currency="USD", **ENVELOPE),
        row(1, input_tokens=1200, output_tokens=80, **ENVELOPE),
        row(2),  # no cost on this row: fine for validation, a cost claim names it
        row(3, cost=3, currency="EUR", input_tokens=10, output_tokens=0),
    ]
    events = validated(tmp_path, rows)
    assert events.get_column("cost").to_list() == [0.0021, None, None, 3.0]
    assert events.get_column("currency").to_list() == ["USD", None, None, "EUR"]
    assert events.get_column("input_tokens").to_list() == [None, 1200, None, 10]
    assert events.get_column("output_tokens").to_list() == [None, 80, None, 0]
    assert events.get_column("streaming").to_list() == [False, False, None, None]
    assert events.get_column("tools").to_list() == ["sha256:9f2c", "sha256:9f2c", None, None]


def test_tokens_written_as_text_digits_or_whole_floats_are_read(tmp_path: Path) -> None:
    rows = [row(0, input_tokens="12", output_tokens=3.0), row(1, input_tokens=5, output_tokens=7)]
    events = validated(tmp_path, rows)
    assert events.get_column("input_tokens").to_list() == [12, 5]
    assert events.get_column("output_tokens").to_list() == [3, 7]


def test_parquet_cost_columns_are_typed(tmp_path: Path) -> None:
    path = tmp_path / "log.parquet"
    pl.DataFrame([row(0, cost=1.5, currency="USD", streaming=True)]).write_parquet(path)
    events = validate_log(read_log(path), kind="parquet")
    assert events.get_column("cost").to_list() == [1.5]
    assert events.get_column("streaming").to_list() == [True]


@pytest.mark.parametrize(
    ("column", "value", "shown"),
    [
        ("input_tokens", -1, "input_tokens=-1: must be a whole number >= 0 (tokens)"),
        ("input_tokens", 1.5, "input_tokens=1.5: must be a whole number >= 0 (tokens)"),
        ("output_tokens", "many", "output_tokens='many': must be a whole number >= 0 (tokens)"),
    ],
)
def test_a_bad_token_count_is_refused_with_its_line(tmp_path, column, value, shown) -> None:
    rows = [row(0, input_tokens=1, output_tokens=1), row(1, input_tokens=1, output_tokens=1)]
    rows[1][column] = value
    message = refusal(tmp_path, rows)
    assert f"line 2: {shown}" in message and "line 1" not in message


def test_token_counts_go_together(tmp_path: Path) -> None:
    message = refusal(tmp_path, [row(0, input_tokens=1, output_tokens=2), row(1, input_tokens=9)])
    assert "line 2: input_tokens=9: input_tokens and output_tokens go together" in message
    message = refusal(tmp_path, [row(0, output_tokens=4)])
    assert "line 1: output_tokens=4: input_tokens and output_tokens go together" in message


@pytest.mark.parametrize(("value", "shown"), [(-0.01, "-0.01"), ("cheap", "'cheap'")])
def test_a_bad_cost_is_refused_with_its_line(tmp_path: Path, value: Any, shown: str) -> None:
    message = refusal(
        tmp_path, [row(0, cost=1, currency="USD"), row(1, cost=value, currency="USD")]
    )
    assert f"line 2: cost={shown}: must be a finite number >= 0" in message
    assert "line 1" not in message


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_cost_that_is_not_finite_is_refused(tmp_path: Path, value: float) -> None:
    # JSON cannot spell them (the line is not JSON); Parquet can.
    path = tmp_path / "log.parquet"
    pl.DataFrame(
        [row(0, cost=1.0, currency="USD"), row(1, cost=value, currency="USD")]
    ).write_parquet(path)
    with pytest.raises(InputError, match=r"row 2: cost=(nan|inf): must be a finite number >= 0"):
        validate_log(read_log(path), kind="parquet")


def test_a_cost_needs_its_currency(tmp_path: Path) -> None:
    message = refusal(tmp_path, [row(0, cost=1, currency="USD"), row(1, cost=0.2)])
    assert "line 2: currency=None: required with cost" in message
    # Without a currency column at all, the same rule.
    message = refusal(tmp_path, [row(0, cost=0.2)])
    assert "line 1: currency=None: required with cost" in message


@pytest.mark.parametrize("value", ["usd", "US", "DOLLAR", "   "])
def test_a_currency_is_three_upper_case_letters(tmp_path: Path, value: str) -> None:
    message = refusal(tmp_path, [row(0, cost=1, currency="USD"), row(1, cost=1, currency=value)])
    assert f"line 2: currency={value!r}: must be 3 upper-case letters" in message


def test_streaming_is_a_boolean(tmp_path: Path) -> None:
    message = refusal(tmp_path, [row(0, streaming=True), row(1, streaming="sometimes")])
    assert "line 2: streaming='sometimes': must be true, false or null" in message
    assert "line 1" not in message


@pytest.mark.parametrize("column", [c for c in ENVELOPE if c != "streaming"])
def test_envelope_text_is_not_blank_and_is_text(tmp_path: Path, column: str) -> None:
    message = refusal(tmp_path, [row(0, **{column: "x"}), row(1, **{column: "  "})])
    assert f"line 2: {column}='  ': must not be empty" in message
    # A column of numbers is not text (mixed with text, JSON values arrive as text).
    message = refusal(tmp_path, [row(0, **{column: 7}), row(1, **{column: 8})])
    assert f"line 1: {column}=7: must be a string" in message
