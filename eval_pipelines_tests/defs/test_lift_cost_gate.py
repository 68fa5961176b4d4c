"""The cost bar in Dagster with real materialisations (issue 31): the `lift_report` asset plots
a claim's cost only when it was read, and the `cost_gate` check fails (ERROR) on a claim that
reads `over_budget` or `ineligible` and passes on `cheaper` and `within_budget`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from eval_pipelines.defs.lift import cost_gate, lift_report
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines_tests.helpers.lift_traffic import PRICES, lever_split, with_cost, write_log

RESOURCES = {"warehouse": WarehouseResource()}
CLAIM = "ws/invoice_coding/e2/memo-v2"


@pytest.mark.parametrize(
    ("intent", "treated_envelope", "verdict", "passed"),
    [
        ({"intent": "cost_optimization"}, None, "cheaper", True),
        (
            {"intent": "required_migration", "budget": 0.01, "budget_currency": "USD"},
            None,
            "within_budget",
            True,
        ),
        (
            {"intent": "product_improvement", "budget": 0.0005, "budget_currency": "USD"},
            None,
            "over_budget",
            False,
        ),
        ({"intent": "cost_optimization"}, {"tools": "none"}, "ineligible", False),
    ],
)
def test_the_cost_gate_fails_on_over_budget_and_ineligible(
    workdir: Path,
    intent: dict[str, Any],
    treated_envelope: dict[str, Any] | None,
    verdict: str,
    passed: bool,
) -> None:
    from eval_pipelines.api import lift

    lift.set_settings("ws", lever_changes="model", prices=PRICES, **intent)
    log = write_log(workdir / "days.jsonl", lever_split(), true_lift=0.0, days=2, seed=4)
    lift.ingest(with_cost(log, treated_envelope=treated_envelope))
    with dg.instance_for_test() as instance:
        result = dg.materialize([lift_report, cost_gate], instance=instance, resources=RESOURCES)
        assert result.success
        (event,) = result.get_asset_materialization_events()
        meta = event.materialization.metadata
        (check,) = result.get_asset_check_evaluations()
    assert check.check_name == "cost_gate" and check.passed is passed
    assert check.severity == dg.AssetCheckSeverity.ERROR
    if not passed:
        assert f"{CLAIM}: {verdict}" in (check.description or "")
    plotted = [key for key in meta if key.startswith("cost")]
    if verdict == "ineligible":
        assert plotted == []  # no cost number anywhere
        assert "envelope_mismatch: tools" in meta["report"].value
    else:
        assert f"cost @ {CLAIM} (USD per task)" in plotted
    if verdict == "within_budget":
        shown = json.dumps({key: str(value.value) for key, value in meta.items()})
        assert re.search(r"sav(e|ed|ing|ings)\b", shown, re.IGNORECASE) is None
