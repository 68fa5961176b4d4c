"""The cost bar in Dagster with real materialisations (issue 31): the `lift_report` asset plots
a claim's cost only when it was read, and the `cost_gate` check fails (ERROR) on a claim that
reads `over_budget` or `ineligible` and passes on `cheaper` and `within_budget`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines.defs.lift import cost_gate, lift_report
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines_tests.helpers.lift_traffic import PRICES, with_cost, write_log

RESOURCES = {"warehouse": WarehouseResource()}
# One workspace per verdict: its intent, and what its treated arm changes besides the model.
WORKSPACES: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "cheaper": ({"intent": "cost_optimization"}, None),
    "within": (
        {"intent": "required_migration", "budget": 0.01, "budget_currency": "USD"},
        None,
    ),
    "over": (
        {"intent": "product_improvement", "budget": 0.0005, "budget_currency": "USD"},
        None,
    ),
    "ineligible": ({"intent": "cost_optimization"}, {"tools": "none"}),
}


def _report(workdir: Path, workspaces: list[str]) -> dg.ExecuteInProcessResult:
    """Each workspace's two days of traffic (no quality lift, tokens and the envelope, the
    treated arm on the cheaper tier) ingested, then the report and its cost gate."""
    from eval_pipelines.api import lift

    logs = []
    for workspace in workspaces:
        intent, treated_envelope = WORKSPACES[workspace]
        settings = lift.set_settings(
            workspace, lever="memo-v2", lever_changes="model", prices=PRICES, **intent
        )
        config = LiftConfig(workspace, settings.epoch, 0.10, lever="memo-v2")
        log = write_log(workdir / f"{workspace}.jsonl", config, true_lift=0.0, days=2, seed=4)
        logs.append(with_cost(log, treated_envelope=treated_envelope).read_text())
    both = workdir / "workspaces.jsonl"
    both.write_text("".join(logs), encoding="utf-8")
    lift.ingest(both)  # one run: a request id is its workspace's own
    with dg.instance_for_test() as instance:
        result = dg.materialize([lift_report, cost_gate], instance=instance, resources=RESOURCES)
    assert result.success
    return result


def _claim(workspace: str) -> str:
    return f"{workspace}/invoice_coding/e2/memo-v2"


def test_the_cost_gate_passes_on_cheaper_and_within_budget(workdir: Path) -> None:
    result = _report(workdir, ["cheaper", "within"])
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == "cost_gate" and check.passed
    (event,) = result.get_asset_materialization_events()
    meta = event.materialization.metadata
    for workspace in ("cheaper", "within"):
        assert f"cost @ {_claim(workspace)} (USD per task)" in meta
    assert "verdict within_budget (required_migration" in meta["report"].value
    shown = json.dumps({key: str(value.value) for key, value in meta.items()})
    assert re.search(r"sav(e|ed|ing|ings)\b", shown, re.IGNORECASE) is None


def test_the_cost_gate_fails_on_over_budget_and_ineligible(workdir: Path) -> None:
    result = _report(workdir, ["over", "ineligible"])
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == "cost_gate" and not check.passed
    assert check.severity == dg.AssetCheckSeverity.ERROR
    assert check.description == (
        f"{_claim('ineligible')}: ineligible (envelope_mismatch: tools); "
        f"{_claim('over')}: over_budget"
    )
    (event,) = result.get_asset_materialization_events()
    meta = event.materialization.metadata
    plotted = [key for key in meta if key.startswith("cost")]
    # The ineligible claim has no cost number anywhere; the over-budget one is plotted.
    assert plotted and all(_claim("over") in key for key in plotted)
    assert "envelope_mismatch: tools" in meta["report"].value
