"""Cost per record in a holdout report (issue 31 item 5): a model-tier A/B of two chat variants
against the stand-in endpoint over real HTTP, a real DuckDB warehouse and real Dagster runs.
The per-record tokens stored are the endpoint's, each variant's cost per record and the
pair's difference are recomputed here from them and the price tables, the compare output
carries the same figure, and a variant with no cost says why (no model calls, no price, two
currencies, an evaluation made before per-record tokens) with no number."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from eval_pipelines import api
from eval_pipelines.chat_standin.server import StandinServer, serve_standin
from eval_pipelines.cli.output import comparison_markdown
from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines.stages.holdout_report import report_stage
from eval_pipelines.storage import holdout as holdout_store
from eval_pipelines.storage.warehouse import connect
from eval_pipelines_tests.helpers.lift_traffic import write_log

LARGE = {"input": 0.5, "output": 1.5}  # per 1M tokens
SMALL = {"input": 0.15, "output": 0.6}


def _tier(
    base_url: str, model: str, price: dict[str, float], *, priced: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A chat variant calling ``model``, its table pricing ``priced`` (default: ``model``)."""
    return {
        "classifier": "chat",
        "candidates": 10,
        "options": {"model": model, "baseUrl": base_url, "maxTokens": 64},
        "prices": {priced or model: price},
        **extra,
    }


@pytest.fixture(scope="module")
def server() -> Iterator[StandinServer]:
    with serve_standin() as running:
        yield running


@pytest.fixture(scope="module")
def tier_ab(module_small_case: str, server: StandinServer) -> str:
    """large (baseline) and small (candidate), both in USD; the stand-in answers both alike."""
    variants = [
        {"name": "large", "config": _tier(server.base_url, "m-large", LARGE, currency="USD")},
        {"name": "small", "config": _tier(server.base_url, "m-small", SMALL, currency="USD")},
        {"name": "knn"},
        {"name": "euro", "config": _tier(server.base_url, "m-small", SMALL, currency="EUR")},
        {
            "name": "unpriced",
            "config": _tier(server.base_url, "m-free", SMALL, priced="m-small"),
        },
    ]
    started = api.start_holdout_eval(
        module_small_case, variants, api.HoldoutOptions(sample_size=60, seed=3), wait=True
    )
    assert started.status == "complete"
    return started.eval_id


def _tokens(eval_id: str) -> pl.DataFrame:
    with connect("warehouse.duckdb", read_only=True) as conn:
        return holdout_store.load_predictions(conn, eval_id)


def _costs(tokens: pl.DataFrame, variant: str, price: dict[str, float]) -> np.ndarray:
    rows = tokens.filter(pl.col("variant") == variant).sort("record_key")
    return (
        rows.get_column("input_tokens").to_numpy() * price["input"]
        + rows.get_column("output_tokens").to_numpy() * price["output"]
    ) / 1e6


def test_a_model_tier_ab_reads_cost_per_record_beside_accuracy(
    module_small_case: str, tier_ab: str, server: StandinServer
) -> None:
    report = api.get_holdout_eval(module_small_case, tier_ab).report
    assert report is not None
    tokens = _tokens(tier_ab)
    # Each record's tokens are those the endpoint reported for its call (trial 1).
    large_rows = tokens.filter(pl.col("variant") == "large")
    assert (large_rows.get_column("input_tokens") > 0).all()
    assert (
        large_rows.get_column("tokens")
        == large_rows.get_column("input_tokens") + large_rows.get_column("output_tokens")
    ).all()
    large, small = _costs(tokens, "large", LARGE), _costs(tokens, "small", SMALL)
    variants = {v["name"]: v for v in report["variants"]}
    cost_large = variants["large"]["cost"]
    assert cost_large["status"] == "priced" and cost_large["currency"] == "USD"
    figure = cost_large["perRecord"]
    # Recomputed here: the mean of tokens x price over the 60 records (6 significant digits).
    assert figure["value"] == pytest.approx(large.mean(), rel=1e-5)
    assert figure["total"] == pytest.approx(large.sum(), rel=1e-5)
    assert figure["n"] == 60 and figure["interval"][0] < figure["value"] < figure["interval"][1]
    # The usage block's cost of the answers is the same total (one trial per record).
    assert variants["large"]["usage"]["chat"]["cost"] == pytest.approx(large.sum(), rel=1e-9)

    pair = next(c for c in report["comparisons"] if c["candidate"] == "small")
    cost = pair["cost"]
    assert cost["status"] == "compared" and cost["currency"] == "USD"
    assert cost["relative"]["value"] == pytest.approx(small.sum() / large.sum() - 1, rel=1e-5)
    assert cost["difference"]["value"] == pytest.approx(small.mean() - large.mean(), rel=1e-5)
    low, high = cost["relative"]["interval"]
    assert low <= cost["relative"]["value"] <= high < 0
    # The stand-in answers by the prompt alone: both tiers are right on the same records.
    for level in pair["levels"].values():
        assert level["difference"] in (0, 0.0, None)

    markdown = api.get_holdout_eval(module_small_case, tier_ab).report_markdown
    assert markdown is not None
    percent = f"{cost['relative']['value'] * 100:+.0f}%"
    target_rows = [line for line in markdown.splitlines() if "| large | small | **L" in line]
    assert target_rows and all(percent in line for line in target_rows)
    assert "cost per record (95% interval)" in markdown and " USD [" in markdown
    assert "an answer from the call cache counted at the tokens it took when made" in markdown

    # The compare output of the two variants carries the same cost figure.
    compared = api.compare_holdout_evals(
        module_small_case,
        baseline_eval_id=tier_ab,
        candidate_eval_id=tier_ab,
        baseline_variant="large",
        candidate_variant="small",
    )
    assert compared.cost == cost
    assert percent in comparison_markdown(compared)


def test_the_eval_report_asset_shows_and_plots_cost_per_record(
    module_small_case: str, tier_ab: str
) -> None:
    """The Dagster UI sees what the markdown shows: a cost per record column beside the
    accuracy, the pair's cost beside each level's difference, and a plot per variant keyed by
    its currency (never rounded to the metadata's four decimals)."""
    import dagster as dg

    report = api.get_holdout_eval(module_small_case, tier_ab).report
    assert report is not None
    (record,) = (
        dg.DagsterInstance.get()
        .fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("eval_report"), asset_partitions=[tier_ab]),
            limit=1,
        )
        .records
    )
    assert record.asset_materialization is not None
    metadata = record.asset_materialization.metadata
    variants = {v["name"]: v for v in report["variants"]}
    cells = {
        r.data["variant"]: r.data["cost_per_record"] for r in metadata["variants"].value.records
    }
    assert cells["knn"] == "no model calls"
    assert cells["unpriced"].startswith("no price (model 'm-free'")
    assert cells["large"].startswith(f"{variants['large']['cost']['perRecord']['value']:.3g} USD [")
    comparable = metadata["comparable_as"].value
    small = variants["small"]["cost"]["perRecord"]["value"]
    assert small < 1e-3  # four decimals would plot it as 0
    assert metadata[f"cost_per_record/small @ {comparable} (USD)"].value == small
    assert metadata[f"cost_per_record/euro @ {comparable} (EUR)"].value == small
    assert not any(k.startswith("cost_per_record/knn") for k in metadata)
    assert not any(k.startswith("cost_per_record/unpriced") for k in metadata)
    by_row = {
        (r.data["candidate"], r.data["level"]): r.data["cost"]
        for r in metadata["comparisons"].value.records
    }
    pair = next(c for c in report["comparisons"] if c["candidate"] == "small")
    percent = f"{pair['cost']['relative']['value'] * 100:+.0f}%"
    assert all(by_row[("small", depth)].startswith(percent) for depth in report["targetDepth"])
    assert by_row[("euro", report["targetDepth"][0])].startswith(
        "not compared: the price tables' currencies differ (USD vs EUR)"
    )


def test_a_variant_without_a_cost_says_why_and_shows_no_number(
    module_small_case: str, tier_ab: str
) -> None:
    report = api.get_holdout_eval(module_small_case, tier_ab).report
    assert report is not None
    variants = {v["name"]: v for v in report["variants"]}
    assert variants["knn"]["cost"]["status"] == "no_model_calls"
    assert variants["knn"]["cost"]["perRecord"] is None
    assert variants["unpriced"]["cost"]["status"] == "no_price"
    assert variants["unpriced"]["cost"]["reason"] == (
        "model 'm-free' has no price in the config's prices table"
    )
    assert variants["unpriced"]["cost"]["perRecord"] is None
    by_candidate = {c["candidate"]: c["cost"] for c in report["comparisons"]}
    assert by_candidate["knn"] == {
        "status": "not_compared",
        "reason": "candidate has no cost per record: the variant calls no model",
        "currency": None,
    }
    # euro asks what small asks: whichever of the two was answered from the call cache, the
    # answer costs what it took when it was made (the setup's cost, whoever paid it).
    assert variants["euro"]["cost"]["perRecord"] == variants["small"]["cost"]["perRecord"]
    assert variants["euro"]["cost"]["currency"] == "EUR"
    assert by_candidate["euro"]["status"] == "not_compared"
    assert "currencies differ (USD vs EUR)" in by_candidate["euro"]["reason"]
    assert "difference" not in by_candidate["euro"] and "relative" not in by_candidate["unpriced"]
    markdown = api.get_holdout_eval(module_small_case, tier_ab).report_markdown
    assert markdown is not None
    cost_row = next(line for line in markdown.splitlines() if "cost per record (95%" in line)
    assert "| no model calls |" in cost_row and "no price (model 'm-free'" in cost_row


def test_an_evaluation_made_before_per_record_tokens_reads_not_recorded(
    module_small_case: str, tier_ab: str, tmp_path: Path
) -> None:
    # A copy of the module's warehouse, its tokens as migration 0017 leaves the predictions
    # of an evaluation classified before it, and the report built again there.
    old = tmp_path / "old.duckdb"
    shutil.copyfile("warehouse.duckdb", old)
    with connect(old) as conn:
        conn.execute(
            "UPDATE predictions SET input_tokens = NULL, output_tokens = NULL WHERE eval_id = ?",
            [tier_ab],
        )
        report, markdown = report_stage(conn, tier_ab, run_id=None)
    costs = {v["name"]: v["cost"] for v in report["variants"]}
    assert costs.pop("knn")["status"] == "no_model_calls"
    for cost in costs.values():
        assert cost["status"] == "not_recorded" and cost["perRecord"] is None
    for comparison in report["comparisons"]:
        assert comparison["cost"]["status"] == "not_compared"
        assert set(comparison["cost"]) == {"status", "reason", "currency"}
    cost_row = next(line for line in markdown.splitlines() if "cost per record (95%" in line)
    assert cost_row.count("not recorded (per-record tokens were not recorded") == 4
    assert not any(ch.isdigit() for ch in cost_row.split("|", 2)[2])


def test_the_ledger_sets_the_offline_cost_beside_the_live_lift(
    module_small_case: str, tier_ab: str, tmp_path: Path
) -> None:
    from eval_pipelines.api import lift
    from eval_pipelines.core.lift.report import claim_line

    report = api.get_holdout_eval(module_small_case, tier_ab).report
    assert report is not None
    pair = next(c for c in report["comparisons"] if c["candidate"] == "small")
    epoch = lift.set_settings(
        "tiers", holdout_fraction=0.10, lever="small", case=module_small_case
    ).epoch
    config = LiftConfig("tiers", epoch, 0.10, lever="small")
    lift.ingest(write_log(tmp_path / "week.jsonl", config, true_lift=0.0, seed=3, days=2))
    lift.report()
    (row,) = [r for r in lift.ledger() if r.workspace_id == "tiers"]
    assert row.offline is not None and row.offline["evalId"] == tier_ab
    assert row.offline["cost"] == pair["cost"]  # the stored report's figure, as it is
    level = pair["levels"][str(report["targetDepth"][0])]
    line = claim_line(row.to_json())
    relative = pair["cost"]["relative"]
    low, high = relative["interval"]
    assert (
        f"; offline L{report['targetDepth'][0]} {level['difference']:+.3f} "
        f"[{level['interval'][0]:+.3f}, {level['interval'][1]:+.3f}] (eval {tier_ab}, "
        f"n {level['pairs']}), cost per record {relative['value'] * 100:+.0f}% "
        f"[{low * 100:+.0f}%, {high * 100:+.0f}%], "
    ) in line
