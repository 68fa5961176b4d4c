"""``eval-pipelines lift settings`` with the cost options (issue 31): the decision intent and
its budget, the envelope elements the lever changes and the price table, each refusal one line
naming the flag, the value and the rule, with nothing written; they start no epoch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipelines_tests.helpers.cli_calls import cli, refused, succeeded

PRICES = {"currency": "USD", "models": {"big-1": {"input": 3.0, "output": 15.0}}}


def _prices(workdir: Path, document: object) -> Path:
    path = workdir / "prices.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--intent", "cheapest"], "--intent='cheapest': must be one of cost_optimization, "),
        (
            ["--intent", "cost_optimization", "--budget", "0.01", "--budget-currency", "USD"],
            "--budget=0.01: a budget is declared only with required_migration or "
            "product_improvement",
        ),
        (
            ["--intent", "required_migration", "--budget", "0", "--budget-currency", "USD"],
            "--budget=0.0: must be a finite number > 0",
        ),
        (
            ["--intent", "required_migration", "--budget", "0.01"],
            "--budget-currency=None: required with a budget",
        ),
        (
            ["--intent", "required_migration", "--budget", "0.01", "--budget-currency", "usd"],
            "--budget-currency='usd': must be 3 upper-case letters",
        ),
        (["--budget", "0.01", "--budget-currency", "USD"], "--budget=0.01: a budget is declared "),
        (["--lever-changes", "model,toolz"], "--lever-changes='toolz': must name envelope "),
        (["--intent", "cost_optimization", "--no-intent"], "--intent='cost_optimization': either"),
        (
            ["--prices", "prices.json", "--no-prices"],
            "--prices='prices.json': either give a price table or clear it, not both",
        ),
    ],
)
def test_a_bad_cost_option_is_refused_naming_it_and_nothing_is_written(
    workdir: Path, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    line = refused(capsys, "lift", "settings", "--workspace", "ws", *options)
    assert line.startswith(message), line
    assert not (workdir / "warehouse.duckdb").exists()


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"models": PRICES["models"]}, "--prices={'models': "),
        ({**PRICES, "currency": "usd"}, "prices.currency='usd': must be 3 upper-case letters"),
        (
            {**PRICES, "models": {"big-1": {"input": -1, "output": 2}}},
            "prices.models.big-1.input=-1: a price is a finite number >= 0",
        ),
    ],
)
def test_a_bad_price_table_is_refused_naming_the_entry(
    workdir: Path, capsys: pytest.CaptureFixture[str], document: object, message: str
) -> None:
    path = _prices(workdir, document)
    line = refused(capsys, "lift", "settings", "--workspace", "ws", "--prices", path)
    assert line.startswith(message), line
    assert not (workdir / "warehouse.duckdb").exists()


def test_cost_options_are_stored_and_start_no_epoch(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = succeeded(capsys, "lift", "settings", "--workspace", "ws", "--lever", "small-tier")
    assert "epoch e2 (new: the split changed)" in out and "no decision intent" in out
    prices = _prices(workdir, PRICES)
    out = succeeded(
        capsys,
        "lift",
        "settings",
        "--workspace",
        "ws",
        "--intent",
        "cost_optimization",
        "--lever-changes",
        "provider,model",
        "--prices",
        prices,
    )
    assert "epoch e2," in out and "(new" not in out  # a claim option: no new epoch
    assert "intent cost_optimization; the lever changes model, provider; prices in USD" in out
    out = succeeded(
        capsys,
        "lift",
        "settings",
        "--workspace",
        "ws",
        "--intent",
        "required_migration",
        "--budget",
        "0.02",
        "--budget-currency",
        "EUR",
        "--json",
    )
    document = json.loads(out)
    assert document["epoch"] == "e2" and document["newEpoch"] is False
    assert document["intent"] == {"kind": "required_migration", "budget": 0.02, "currency": "EUR"}
    assert document["leverChanges"] == ["model", "provider"]  # kept from before
    assert document["prices"] == PRICES
    document = json.loads(
        succeeded(capsys, "lift", "settings", "--workspace", "ws", "--no-intent", "--json")
    )
    assert document["intent"] is None and document["prices"] == PRICES
    document = json.loads(
        succeeded(capsys, "lift", "settings", "--workspace", "ws", "--no-prices", "--json")
    )
    assert document["prices"] is None and document["leverChanges"] == ["model", "provider"]
    code, _, _ = cli(capsys, "lift", "settings", "--workspace", "ws", "--lever-changes", "none")
    assert code == 0
