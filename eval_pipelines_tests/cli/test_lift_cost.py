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
