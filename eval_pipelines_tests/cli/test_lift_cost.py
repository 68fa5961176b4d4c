"""The cost bar as a user types it (issue 31): `lift settings` with an intent, the lever's
envelope changes and a price table, `lift ingest` of a log with tokens and the execution
envelope, `lift report` and `lift ledger` (text and --json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines_tests.helpers.cli_calls import succeeded
from eval_pipelines_tests.helpers.lift_traffic import PRICES, with_cost, write_log


def test_from_a_log_with_tokens_to_a_cost_verdict(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prices = workdir / "prices.json"
    prices.write_text(json.dumps(PRICES), encoding="utf-8")
    out = succeeded(
        capsys,
        "lift",
        "settings",
        "--workspace",
        "ws",
        "--lever",
        "small-tier",
        "--intent",
        "cost_optimization",
        "--lever-changes",
        "model",
        "--prices",
        prices,
    )
    assert "epoch e2 (new: the split changed)" in out and "intent cost_optimization" in out
    log = write_log(
        workdir / "week.jsonl", LiftConfig("ws", "e2", lever="small-tier"), true_lift=0.0, days=4
    )
    with_cost(log)
    assert "2961 stored" in succeeded(capsys, "lift", "ingest", log)
    report = succeeded(capsys, "lift", "report")
    (line,) = [row for row in report.splitlines() if row.startswith("  - cost per task")]
    assert line.startswith("  - cost per task (USD, per cluster): treated − lever_holdout -0.0")
    assert "verdict cheaper (cost_optimization); frozen bound 0.0" in line
    ledger = succeeded(capsys, "lift", "ledger")
    assert ledger.splitlines()[1] == "  " + line[4:]  # the ledger's line is the report's
    (claim,) = json.loads(succeeded(capsys, "lift", "ledger", "--json"))
    cost = claim["cost"]
    assert cost["verdict"] == "cheaper" and cost["intent"] == {
        "kind": "cost_optimization",
        "budget": None,
        "currency": None,
    }
    assert cost["difference"] < cost["interval"][1] < 0 and cost["currency"] == "USD"
    assert cost["treated"]["clusters"] >= 20 and cost["frozenBound"]["currency"] == "USD"


def test_clearing_the_price_table_leaves_token_rows_without_a_cost(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--no-prices``: logged tokens are priced no more, so an open claim whose rows log only
    tokens reads ``envelope_incomplete: cost`` at its next report, with no figure (never a
    cost of zero)."""
    prices = workdir / "prices.json"
    prices.write_text(json.dumps(PRICES), encoding="utf-8")
    settings = ["lift", "settings", "--workspace", "ws", "--lever", "small-tier"]
    succeeded(capsys, *settings, "--intent", "cost_optimization", "--lever-changes", "model")
    out = succeeded(capsys, "lift", "settings", "--workspace", "ws", "--prices", prices)
    assert out.endswith("the lever changes model; prices in USD for big-1, small-1\n"), out
    log = write_log(
        workdir / "week.jsonl", LiftConfig("ws", "e2", lever="small-tier"), true_lift=0.0, days=4
    )
    with_cost(log)
    succeeded(capsys, "lift", "ingest", log)

    out = succeeded(capsys, "lift", "settings", "--workspace", "ws", "--no-prices")

    assert out.endswith("the lever changes model; no price table\n"), out
    report = succeeded(capsys, "lift", "report")
    (line,) = [row for row in report.splitlines() if row.startswith("  - cost ")]
    assert line.startswith(
        "  - cost (cost_optimization): verdict ineligible (envelope_incomplete: cost): no cost "
        "figure is read (rows "
    )
    assert "rows log tokens and the workspace has no price table" in line
    (claim,) = json.loads(succeeded(capsys, "lift", "ledger", "--json"))
    assert claim["cost"]["verdict"] == "ineligible"
    assert claim["cost"]["treated"]["totalCost"] is None
