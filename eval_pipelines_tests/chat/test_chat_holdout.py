"""A ``chat`` holdout variant end to end over real HTTP (the stand-in on 127.0.0.1, the real
``openai`` client), a real DuckDB warehouse and real Dagster runs: the report's figures against
the stand-in's documented answer rule recomputed here, usage (calls, cache, tokens, cost)
against the server's own request log, the estimate against the stand-in's counts, every trial
stored, a re-materialisation that sends nothing, faults as failed rows, the key never written
anywhere, and each bad chat config refused with exit 2 and nothing written."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from eval_pipelines import api
from eval_pipelines.instance import dagster_instance
from eval_pipelines.chat_standin import Fault, FaultRule, StandinServer, serve_standin
from eval_pipelines.storage import holdout as holdout_store
from eval_pipelines.storage.warehouse import connect

SECRET = "sk-test-5f1c0b2e9d7a4c3b8e6f"
KEY_ENV = "EVAL_PIPELINES_TEST_CHAT_KEY"
PRICE = {"input": 0.15, "output": 0.6}  # per 1M tokens


@pytest.fixture
def server() -> Iterator[StandinServer]:
    with serve_standin() as running:
        yield running


def chat_config(base_url: str, **extra: Any) -> dict[str, Any]:
    return {
        "classifier": "chat",
        "candidates": 10,
        "options": {"model": "m-small", "baseUrl": base_url, "maxTokens": 64, **extra},
        "prices": {"m-small": PRICE},
    }


def _evaluations() -> int:
    with duckdb.connect("warehouse.duckdb", read_only=True) as conn:
        row = conn.execute("SELECT count(*) FROM evaluations").fetchone()
    assert row is not None
    return int(row[0])


def _expected_code(prompt_candidates: list[tuple[str, str]], text: str) -> tuple[str, float]:
    """The stand-in's documented rule (chat_standin module docstring), written again here:
    the candidate whose title shares the most distinct lower-cased words with the record, the
    first on a tie; confidence = shared / distinct title words, to 4 places."""
    record = {w.lower() for w in re.findall(r"\w+", text)}
    best, shared_best, size = "", -1, 1
    for code, title in prompt_candidates:
        words = {w.lower() for w in re.findall(r"\w+", title)}
        shared = len(words & record)
        if shared > shared_best:
            best, shared_best, size = code, shared, max(1, len(words))
    return best, round(max(0, shared_best) / size, 4)


def test_a_knn_and_a_chat_variant_report_what_the_endpoint_answered(
    small_case: str,
    small_case_files: dict[str, Path],
    server: StandinServer,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    workdir: Path,
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    variants = [
        {"name": "baseline"},
        {"name": "chat", "config": chat_config(server.base_url, apiKeyEnv=KEY_ENV)},
    ]
    caplog.set_level("DEBUG")
    started = api.start_holdout_eval(
        small_case, variants, sample_size=30, seed=5, wait=True, trials=2
    )
    assert started.status == "complete"
    status = api.get_holdout_eval(small_case, started.eval_id)
    report = status.report
    assert report is not None
    chat = report["variants"][1]
    sent = list(server.requests)
    # 30 records x 2 trials, each one request (no faults), with the key sent as the bearer.
    assert len(sent) == 60
    assert all(r.authorization == f"Bearer {SECRET}" for r in sent)

    # Every row is the stand-in's answer to the candidates it was offered, recomputed here
    # from the tree's titles and the record's text.
    titles = dict(
        pl.read_parquet(small_case_files["tree"]).select("code", "title").iter_rows()
    )
    texts = dict(pl.read_parquet(small_case_files["records"]).select("record_key", "text").iter_rows())
    rows = api.eval_rows(small_case, started.eval_id, variant="chat")
    assert len(rows) == 30
    for row in rows:
        offered = [(c["code"], titles[c["code"]]) for c in row.candidates]
        code, confidence = _expected_code(offered, texts[row.record_key])
        assert (row.prediction, row.confidence, row.error) == (code, confidence, None)
    # The report's accuracy at each target depth is the count of rows right there.
    for depth in map(str, report["targetDepth"]):
        scored = [r for r in rows if depth in r.correct]
        accuracy = chat["score"]["targetDepth"][depth]
        assert (accuracy["k"], accuracy["n"]) == (sum(r.correct[depth] for r in scored), len(scored))
    # The candidate ceiling: rows whose label was among the candidates offered.
    assert chat["failedRows"] == 0

    # Usage: calls, cache, tokens as the endpoint reported them (the stand-in counts words),
    # cost from the price table.
    usage = chat["usage"]["chat"]
    prompt_words = sum(len(r.prompt.split()) for r in sent)
    # json.dumps of {"code": X, "confidence": p} is four whitespace-separated words
    answer_words = 4 * 60
    assert chat["usage"]["inputTokens"] == prompt_words
    assert chat["usage"]["outputTokens"] == answer_words
    assert (usage["calls"], usage["callsMade"], usage["callsFromCache"]) == (60, 60, 0)
    assert (usage["requestsSent"], usage["retries"], usage["callsFailed"]) == (60, 0, 0)
    expected_cost = (prompt_words * PRICE["input"] + answer_words * PRICE["output"]) / 1e6
    assert usage["cost"] == pytest.approx(expected_cost, rel=1e-12)
    assert usage["spent"]["cost"] == pytest.approx(expected_cost, rel=1e-12)
    # The estimate made before the run is beside it: prompt characters / 4 of 5 sampled rows
    # plus the 64-token answer budget, times 30 records x 2 trials. Stated bound: its input
    # side is within a factor of 1 to 3 of the stand-in's counts (words under-count real
    # tokens, and the estimate offers the most candidates a row can get).
    estimate = usage["estimate"]
    assert (estimate["records"], estimate["trials"], estimate["calls"]) == (30, 2, 60)
    assert estimate["outputTokens"] == 60 * 64
    assert 1.0 <= estimate["inputTokens"] / prompt_words <= 3.0
    assert started.estimated_tokens == estimate["tokens"]

    # Trials: each record asked twice (distinct keys); trial 1 is the variant's predictions.
    with connect(workdir / "warehouse.duckdb", read_only=True) as conn:
        trials = holdout_store.load_trials(conn, started.eval_id)
    assert trials.height == 60
    first = {r["record_key"]: r["code"] for r in trials.filter(pl.col("trial") == 1).to_dicts()}
    assert first == {row.record_key: row.prediction for row in rows}
    assert len({r.prompt for r in sent}) == 30  # the same prompt, asked twice

    # Re-materialised: every answer from the cache, no request sent, the same figures.
    again = api.rerun_holdout_eval(small_case, started.eval_id, wait=True)
    assert again.status == "complete"
    assert server.request_count == 60
    rerun = api.get_holdout_eval(small_case, started.eval_id).report
    assert rerun is not None
    reused = rerun["variants"][1]["usage"]["chat"]
    assert (reused["callsMade"], reused["callsFromCache"], reused["requestsSent"]) == (0, 60, 0)
    assert reused["spent"]["cost"] == 0.0 and reused["cost"] == pytest.approx(expected_cost)
    assert rerun["variants"][1]["score"] == chat["score"]

    # The key is nowhere: warehouse file, spec and report JSON, logs, the Dagster instance.
    assert SECRET not in json.dumps(status.spec) + json.dumps(report) + json.dumps(rerun)
    captured = capfd.readouterr()
    assert SECRET not in captured.out + captured.err + caplog.text
    # The step's progress is in its log (the event log the CLI's --wait reads).
    messages = [r.user_message for r in dagster_instance().all_logs(started.run_id)]
    assert any(m.startswith("chat variant chat: 60/60 calls (x2 trials)") for m in messages)
    # Every file the test wrote: the warehouse, the indexes, DAGSTER_HOME (event log, runs).
    files = [path for path in workdir.rglob("*") if path.is_file()]
    assert any(path.name == "warehouse.duckdb" for path in files)
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
