"""The live cost bar through the API on real warehouses and runs (issue 31): a cheaper model
tier reads `cheaper` under cost_optimization, with the intent and the frozen cost bound stored
when the claim opens and kept by later reports; an envelope the lever does not declare it
changes reads `ineligible` naming the element, with no cost number anywhere; a budget verdict
is never worded as savings."""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path

import pytest

from eval_pipelines import settings
from eval_pipelines.core.lift.cost_report import cost_line
from eval_pipelines.storage import lift as lift_store
from eval_pipelines.storage.warehouse import connect
from eval_pipelines_tests.helpers.lift_traffic import PRICES, lever_split, with_cost, write_log

CLAIM = "ws/invoice_coding/e2/memo-v2"


def _week(workdir: Path, **cost: object) -> Path:
    """Two days of traffic (no true quality lift) with tokens and the full envelope, the
    treated arm on the cheaper tier."""
    log = write_log(workdir / "week.jsonl", lever_split(), true_lift=0.0, seed=4, days=2)
    return with_cost(log, **cost)  # type: ignore[arg-type]


def _numbers(text: str) -> list[str]:
    return re.findall(r"\d+\.\d+", text)


def test_a_cheaper_tier_reads_cheaper_and_the_bound_is_frozen_when_the_claim_opens(
    workdir: Path,
) -> None:
    from eval_pipelines.api import lift

    lift.set_settings("ws", intent="cost_optimization", lever_changes="model", prices=PRICES)
    lift.ingest(_week(workdir))
    (claim,) = lift.report().report["claims"]
    cost = claim["cost"]
    assert cost["verdict"] == "cheaper" and cost["intent"]["kind"] == "cost_optimization"
    assert cost["currency"] == "USD" and cost["interval"][1] < 0 < cost["control"]["totalCost"]
    # The tier costs a fifth: the relative difference reads about -80%.
    assert cost["relativeDifference"] == pytest.approx(-0.8, abs=0.03)
    bound = cost["frozenBound"]
    assert bound["currency"] == "USD" and bound["clusters"] == cost["control"]["clusters"]
    # A later report with more traffic and another declared intent keeps both.
    lift.set_settings("ws", intent="required_migration", budget=1.0, budget_currency="USD")
    more = write_log(
        workdir / "more.jsonl",
        lever_split(),  # the same split: still e2
        true_lift=0.0,
        seed=9,
        days=1,
        first_day=date(2026, 11, 28),
        request_prefix="more-",
    )
    lift.ingest(with_cost(more, seed=6))
    (later,) = lift.report().report["claims"]
    assert later["cost"]["frozenBound"] == bound  # never recomputed
    assert later["cost"]["intent"]["kind"] == "cost_optimization"  # the intent it opened under
    assert later["cost"]["declaredIntent"]["kind"] == "required_migration"
    assert later["cost"]["control"]["clusters"] > bound["clusters"]
    line = cost_line(later["cost"])
    assert line is not None and "this claim keeps the intent it opened under" in line
    with connect(settings.warehouse_location(), read_only=True) as conn:
        stored = lift_store.claim(conn, CLAIM)
    assert stored is not None and stored.cost is not None
    assert stored.cost["frozenBound"] == bound


def test_an_envelope_the_lever_does_not_declare_reads_ineligible_with_no_number(
    workdir: Path,
) -> None:
    from eval_pipelines.api import lift

    lift.set_settings("ws", intent="cost_optimization", lever_changes="model", prices=PRICES)
    lift.ingest(_week(workdir, treated_envelope={"tools": "none"}))
    report = lift.report()
    (claim,) = report.report["claims"]
    cost = claim["cost"]
    assert cost["verdict"] == "ineligible" and cost["reason"] == "envelope_mismatch: tools"
    for key in ("currency", "difference", "interval", "relativeDifference", "frozenBound"):
        assert cost[key] is None, key
    assert cost["treated"]["totalCost"] is None and cost["control"]["totalCost"] is None
    (ledger,) = lift.ledger()
    assert ledger.cost is not None and ledger.cost["difference"] is None
    line = cost_line(ledger.cost)
    assert line is not None and "ineligible (envelope_mismatch: tools)" in line
    assert _numbers(line) == []  # row counts only
    markdown_cost = [
        row for row in report.markdown.splitlines() if row.strip().startswith("- cost")
    ]
    assert len(markdown_cost) == 1 and _numbers(markdown_cost[0]) == []
    with connect(settings.warehouse_location(), read_only=True) as conn:
        stored = lift_store.claim(conn, CLAIM)
    assert stored is not None and stored.cost is not None
    assert stored.cost["frozenBound"] is None and stored.cost["result"]["difference"] is None


def test_a_budget_verdict_is_never_worded_as_savings(workdir: Path) -> None:
    from eval_pipelines.api import lift

    lift.set_settings(
        "ws",
        intent="required_migration",
        budget=0.01,
        budget_currency="USD",
        lever_changes="model",
        prices=PRICES,
    )
    lift.ingest(_week(workdir))
    report = lift.report()
    (claim,) = report.report["claims"]
    assert claim["cost"]["verdict"] == "within_budget"
    texts = [
        report.markdown,
        json.dumps(report.report),
        json.dumps([row.to_json() for row in lift.ledger()]),
        cost_line(claim["cost"]) or "",
    ]
    for text in texts:
        assert re.search(r"sav(e|ed|ing|ings)\b", text, re.IGNORECASE) is None


def test_without_a_declared_intent_no_cost_verdict_is_read(workdir: Path) -> None:
    from eval_pipelines.api import lift

    lift.set_settings("ws", lever_changes="model", prices=PRICES)
    lift.ingest(_week(workdir))
    (claim,) = lift.report().report["claims"]
    assert claim["cost"]["verdict"] == "no_intent" and claim["cost"]["difference"] is None
    assert claim["cost"]["frozenBound"] is None


def test_the_cost_bar_on_a_postgresql_warehouse(postgres_workdir: Path) -> None:
    """Migration 16's columns (the cost a DOUBLE added to a PostgreSQL table) and the cost
    settings and claim documents round-trip on PostgreSQL as on DuckDB."""
    test_a_cheaper_tier_reads_cheaper_and_the_bound_is_frozen_when_the_claim_opens(postgres_workdir)
