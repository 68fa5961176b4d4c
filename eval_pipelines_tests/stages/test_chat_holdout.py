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
from eval_pipelines.chat_standin.server import Fault, FaultRule, StandinServer, serve_standin
from eval_pipelines.core.ports import free_port
from eval_pipelines.runs.instance import dagster_instance
from eval_pipelines.storage import holdout as holdout_store
from eval_pipelines.storage.warehouse import connect
from eval_pipelines_tests.helpers.chat_variant import PRICE, chat_config

SECRET = "sk-test-5f1c0b2e9d7a4c3b8e6f"
KEY_ENV = "EVAL_PIPELINES_TEST_CHAT_KEY"


@pytest.fixture
def server() -> Iterator[StandinServer]:
    with serve_standin() as running:
        yield running


def _evaluations() -> int:
    with duckdb.connect("warehouse.duckdb", read_only=True) as conn:
        row = conn.execute("SELECT count(*) FROM evaluations").fetchone()
    assert row is not None
    return int(row[0])


def _expected_code(prompt_candidates: list[tuple[str, str]], text: str) -> tuple[str, float]:
    """The stand-in's documented rule (the chat_standin.answers module docstring), written again
    here: the candidate whose title shares the most distinct lower-cased words with the record,
    the first on a tie; confidence = shared / distinct title words, to 4 places."""
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
        small_case, variants, api.HoldoutOptions(sample_size=30, seed=5, trials=2), wait=True
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
    titles = dict(pl.read_parquet(small_case_files["tree"]).select("code", "title").iter_rows())
    texts = dict(
        pl.read_parquet(small_case_files["records"]).select("record_key", "text").iter_rows()
    )
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
        assert (accuracy["k"], accuracy["n"]) == (
            sum(r.correct[depth] for r in scored),
            len(scored),
        )
    # The candidate ceiling: rows whose label was among the candidates offered.
    assert chat["failedRows"] == 0
    # Evidence supplied is counted in records, as for knn-vote: a row's ranked evidence is the
    # same for both variants, the baseline asking 20 and the chat variant 10. Rows where
    # several records share a label are offered fewer codes, and are not short for that.
    baseline_rows = {
        row.record_key: row
        for row in api.eval_rows(small_case, started.eval_id, variant="baseline")
    }
    for row in rows:
        assert row.effective_candidates == min(
            10, baseline_rows[row.record_key].effective_candidates
        )
    assert any(len(row.candidates) < row.effective_candidates for row in rows)
    short = sum(row.effective_candidates < 10 for row in rows)
    assert chat["leaveOut"]["rowsShort"] == short
    assert any(w["code"] == "candidates_short" for w in report["warnings"]) == (short > 0)

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


BAD_CHAT_CONFIGS = [
    # (what is wrong, the variant's config given the server's URL, the field named)
    ("no model", lambda url: {"classifier": "chat", "options": {"baseUrl": url}}, "options.model"),
    (
        "key variable unset",
        lambda url: chat_config(url, apiKeyEnv="EVAL_PIPELINES_TEST_UNSET_KEY"),
        "options.apiKeyEnv",
    ),
    (
        "negative price",
        lambda url: {**chat_config(url), "prices": {"m-small": {"input": -1, "output": 0}}},
        "prices.m-small.input",
    ),
    ("trials 0", lambda url: {**chat_config(url), "trials": 0}, "trials"),
    ("trials 21", lambda url: {**chat_config(url), "trials": 21}, "trials"),
    (
        "llmLevel not in models",
        lambda url: {**chat_config(url), "llmLevel": "large", "models": {"small": "m-small"}},
        "llmLevel",
    ),
    ("a chat key on knn-vote", lambda url: {"prices": {"m": PRICE}}, "prices"),
]


@pytest.mark.parametrize(
    ("what", "config", "field"), BAD_CHAT_CONFIGS, ids=[b[0] for b in BAD_CHAT_CONFIGS]
)
def test_each_bad_chat_config_exits_2_naming_the_field_and_writes_nothing(
    small_case: str,
    workdir: Path,
    server: StandinServer,
    capsys: pytest.CaptureFixture[str],
    what: str,
    config: Any,
    field: str,
) -> None:
    from eval_pipelines.cli.main import main

    variants = workdir / "variants.json"
    variants.write_text(
        json.dumps([{"name": "baseline"}, {"name": "v", "config": config(server.base_url)}])
    )
    before = _evaluations()
    capsys.readouterr()
    code = main(["eval", "holdout", small_case, "--variants-file", str(variants), "--no-launch"])
    _, err = capsys.readouterr()
    assert code == 2, err
    assert f"variants[1].config.{field}" in err, err
    assert _evaluations() == before
    assert server.request_count == 0


def test_trials_flag_sets_every_chat_variant_and_is_refused_without_one(
    small_case: str, workdir: Path, server: StandinServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines.cli.main import main

    knn_only = workdir / "knn.json"
    knn_only.write_text(json.dumps([{"name": "baseline"}]))
    with_chat = workdir / "chat.json"
    with_chat.write_text(
        json.dumps([{"name": "baseline"}, {"name": "chat", "config": chat_config(server.base_url)}])
    )
    before = _evaluations()
    for variants, trials, said in (
        (knn_only, "3", "this evaluation has no chat variant"),
        (with_chat, "21", "must be a whole number from 1 to 20"),
        (with_chat, "0", "must be a whole number from 1 to 20"),
    ):
        capsys.readouterr()
        argv = ["eval", "holdout", small_case, "--variants-file", str(variants), "--no-launch"]
        assert main([*argv, "--trials", trials]) == 2
        _, err = capsys.readouterr()
        assert "trials" in err and said in err, err
    assert _evaluations() == before
    capsys.readouterr()
    argv = ["eval", "holdout", small_case, "--variants-file", str(with_chat), "--no-launch"]
    assert main([*argv, "--trials", "3", "--sample-size", "20"]) == 0
    eval_id = json.loads(capsys.readouterr().out)["evalId"]
    spec = api.get_holdout_eval(small_case, eval_id).spec
    assert [v["config"].get("trials") for v in spec["variants"]] == [None, 3]
    # 20 records x 3 trials x (prompt chars/4 + 64)
    assert spec["tokenEstimate"]["chat"]["calls"] == 60
    assert server.request_count == 0  # registering calls nothing


def test_a_chat_baseline_with_aa_is_refused(small_case: str, server: StandinServer) -> None:
    from eval_pipelines.core.errors import InputError

    before = _evaluations()
    with pytest.raises(InputError, match="aa"):
        api.start_holdout_eval(
            small_case,
            [{"name": "chat", "config": chat_config(server.base_url)}],
            api.HoldoutOptions(aa=True),
            register_only=True,
        )
    assert _evaluations() == before


# --- the classify step itself (stages.chat_classify), on a small tree ---

TREE_NODES = pl.DataFrame(
    {
        "code": ["A", "A1", "A2", "B", "B1"],
        "parent": [None, "A", "A", None, "B"],
        "title": ["Farming", "Growing of cereals", "Raising of cattle", "Trade", "Retail sale"],
    }
)


def _task(warehouse: Path, config: dict[str, Any], texts: list[str], memo: list[Any] = ()) -> Any:
    from eval_pipelines.core.holdout.classify import RecordToClassify
    from eval_pipelines.core.holdout.classify_config import parse_config
    from eval_pipelines.core.holdout.variants import Variant
    from eval_pipelines.core.tree import tree_from_parent_links
    from eval_pipelines.stages.classify_task import ClassifyTask

    tree = tree_from_parent_links(TREE_NODES)
    parsed = parse_config(config, where="config", max_depth=2)
    records = [RecordToClassify(f"r{i:02d}", text, {}) for i, text in enumerate(texts)]
    evidence = pl.DataFrame(
        {
            "sample_key": [r.record_key for r in records for _ in range(3)],
            "evidence_key": [f"e{j}" for _ in records for j in range(3)],
            "similarity": [0.9, 0.8, 0.7] * len(records),
            "label_node": ["A1", "A2", "B1"] * len(records),
        }
    )
    return ClassifyTask(
        eval_id="e",
        position=1,
        variant=Variant("chat", (), parsed, "chat"),
        records=records,
        evidence=evidence,
        memo=list(memo),
        memo_version="m",
        tree=tree,
        titles=dict(TREE_NODES.select("code", "title").iter_rows()),
        warehouse=str(warehouse),
    )


def test_bad_answers_codes_outside_the_tree_and_failed_calls_are_failed_rows(
    tmp_path: Path,
) -> None:
    from eval_pipelines.stages.holdout_classify import classify_variant

    # Malformed answers to four different records (each answer's text differs), then a code
    # outside the tree, then a 500 on both attempts of one call, then a good answer.
    texts = ["growing cereals", "retail sale", "raising cattle", "retail shop", "cattle farm"]
    texts += ["cereals again", "cereals once more"]
    schedule = {i: Fault("malformed") for i in (1, 2, 3, 4)}
    schedule |= {5: Fault("outside"), 6: Fault("500"), 7: Fault("500")}
    with serve_standin(schedule=schedule) as server:
        config = {**chat_config(server.base_url), "concurrency": 1, "maxRetries": 1}
        result = classify_variant(_task(tmp_path / "w.duckdb", config, texts))
        assert server.request_count == 8
    rows = {r["record_key"]: r for r in result.predictions.to_dicts()}
    malformed = [rows[f"r0{i}"]["error"] for i in range(4)]
    assert all(error.startswith("answer is not JSON") for error in malformed)
    assert len(set(malformed)) > 1  # the reasons quote the answers
    assert rows["r04"]["error"] == "answer's code is not in the code tree: 'NOT-A-CANDIDATE'"
    assert rows["r05"]["error"] == ("HTTP 500 from the endpoint: internal error (after 2 attempts)")
    assert (rows["r06"]["code"], rows["r06"]["error"]) == ("A1", None)
    chat = result.usage["chat"]
    # One call got no answer (callsFailed); six rows failed, five of them on an answer.
    assert (chat["callsMade"], chat["callsFailed"], chat["retries"]) == (6, 1, 1)
    assert chat["failureReasons"] == [
        {"cause": "answer is not JSON", "rows": 4, "example": malformed[0]},
        {
            "cause": "answer's code is not in the code tree",
            "rows": 1,
            "example": rows["r04"]["error"],
        },
        {"cause": "HTTP 500 from the endpoint", "rows": 1, "example": rows["r05"]["error"]},
    ]
    # The rows that failed keep the candidates offered: the ceiling counts them.
    assert all(json.loads(r["candidates"]) for r in rows.values())


def test_a_429_storm_completes_with_every_row_answered(tmp_path: Path) -> None:
    from eval_pipelines.stages.holdout_classify import classify_variant

    texts = [f"growing cereals {i}" for i in range(12)]
    storm = FaultRule("Record:", Fault("429", retry_after="0"), times=30)
    with serve_standin(rules=[storm]) as server:
        config = {**chat_config(server.base_url), "concurrency": 4, "maxRetries": 20}
        result = classify_variant(_task(tmp_path / "w.duckdb", config, texts))
        assert server.request_count == 12 + 30
    assert result.predictions.get_column("error").null_count() == 12
    chat = result.usage["chat"]
    assert (chat["callsMade"], chat["retries"], chat["requestsSent"]) == (12, 30, 42)


def test_an_endpoint_down_fails_every_row_fast_with_the_reason(tmp_path: Path) -> None:
    from eval_pipelines.stages.holdout_classify import classify_variant

    port = free_port()  # nothing listens there
    config = {**chat_config(f"http://127.0.0.1:{port}/v1"), "concurrency": 2}
    result = classify_variant(_task(tmp_path / "w.duckdb", config, ["a", "b", "c", "d", "e"]))
    errors = result.predictions.get_column("error").to_list()
    assert errors == [f"endpoint unreachable: connection refused at http://127.0.0.1:{port}/v1"] * 5
    chat = result.usage["chat"]
    # No retry of a refused connection; at most the calls already in flight were tried.
    assert chat["retries"] == 0 and chat["requestsSent"] <= 2
    assert chat["callsFailed"] == 5 and chat["spent"]["inputTokens"] == 0
    assert chat["failureReasons"] == [
        {"cause": "endpoint unreachable", "rows": 5, "example": errors[0]}
    ]


def test_memo_rules_decide_exclude_and_instruct(tmp_path: Path) -> None:
    from eval_pipelines.core.holdout.memo import parse_memo_entry
    from eval_pipelines.core.tree import tree_from_parent_links
    from eval_pipelines.stages.holdout_classify import classify_variant

    tree = tree_from_parent_links(TREE_NODES)
    memo = [
        parse_memo_entry(
            {
                "id": "m-assign",
                "instruction": "Dairy is A2.",
                "when": {"keywords": ["dairy"]},
                "then": {"assign": "A2"},
            },
            tree,
        ),
        parse_memo_entry(
            {
                "id": "m-exclude",
                "instruction": "Shops are never farming.",
                "when": {"keywords": ["shop"]},
                "then": {"exclude": ["A"]},
            },
            tree,
        ),
    ]
    texts = ["dairy farm", "growing cereals shop retail", "growing cereals"]
    with serve_standin() as server:
        result = classify_variant(
            _task(tmp_path / "w.duckdb", chat_config(server.base_url), texts, memo)
        )
        prompts = server.prompts()
    rows = {r["record_key"]: r for r in result.predictions.to_dicts()}
    # assign decides outright, without a call
    assert (rows["r00"]["code"], rows["r00"]["confidence"]) == ("A2", 1.0)
    assert json.loads(rows["r00"]["memo_applied"]) == ["m-assign"]
    assert len(prompts) == 2 and all("Dairy is A2." in p for p in prompts)
    # exclude removes the codes under A from what is offered
    assert [c["code"] for c in json.loads(rows["r01"]["candidates"])] == ["B1"]
    assert rows["r01"]["code"] == "B1"
    assert [c["code"] for c in json.loads(rows["r02"]["candidates"])] == ["A1", "A2", "B1"]
    assert result.usage["chat"]["decidedByMemo"] == 1


def test_a_run_worker_killed_halfway_then_re_executed_pays_only_for_calls_not_made(
    small_case: str, workdir: Path
) -> None:
    """The run goes through the queue (dispatcher, run worker process); its worker is killed
    with SIGKILL while the chat step is half-way and this process holds the warehouse (as a
    reader does for a moment); the re-run sends only what the cache lacks, and what was sent
    twice is at most the calls in flight at the kill."""
    import os
    import signal

    from eval_pipelines import runs
    from eval_pipelines_tests.helpers.chat_batch import answers_kept, holding, until_stalled
    from eval_pipelines_tests.helpers.stuck_runs import gone, wait_for

    concurrency = 4
    with serve_standin(latency_ms=400) as server:
        config = {**chat_config(server.base_url), "concurrency": concurrency}
        variants = [{"name": "baseline"}, {"name": "chat", "config": config}]
        started = api.start_holdout_eval(
            small_case, variants, api.HoldoutOptions(sample_size=30, seed=8)
        )
        instance = dagster_instance()
        assert started.run_id is not None
        wait_for(lambda: server.request_count >= 8, seconds=240)
        worker = runs.run_worker_pid(instance, started.run_id)
        assert worker is not None and worker != os.getpid()
        with holding(workdir / "warehouse.duckdb"):  # the step's writes wait for this lock
            held_at = server.request_count
            until_stalled(lambda: server.request_count, held_at + 3 * concurrency)
            os.kill(worker, signal.SIGKILL)
            wait_for(lambda: gone(worker))
        wait_for(
            lambda: (
                runs.reap_dead_runs(instance) is not None
                and instance.get_run_by_id(started.run_id).is_finished  # type: ignore[union-attr]
            )
        )
        sent_before = server.request_count
        cached = answers_kept(workdir / "warehouse.duckdb")
        # Each answer is journaled before its thread sends another request, and the re-run
        # loads the journal: sent and not kept at the kill are at most the calls in flight.
        assert 0 < cached < 30 and sent_before - cached <= concurrency, (sent_before, cached)
        again = api.rerun_holdout_eval(small_case, started.eval_id, wait=True)
        assert again.status == "complete"
        assert server.request_count - sent_before == 30 - cached
    report = api.get_holdout_eval(small_case, started.eval_id).report
    assert report is not None
    usage = report["variants"][1]["usage"]["chat"]
    assert (usage["callsFromCache"], usage["callsMade"]) == (cached, 30 - cached)


def test_terminating_the_run_stops_the_chat_calls_in_flight(small_case: str, workdir: Path) -> None:
    """Terminate (the UI's button, the same call Ctrl-C's cancel makes) while the chat step is
    calling: the run ends canceled, no further request reaches the endpoint, and the answers
    received are in the cache."""
    import threading

    from eval_pipelines import runs
    from eval_pipelines.storage.chat_cache import count_calls
    from eval_pipelines_tests.helpers.stuck_runs import wait_for

    with serve_standin(latency_ms=100) as server:
        config = {**chat_config(server.base_url), "concurrency": 2}
        variants = [{"name": "baseline"}, {"name": "chat", "config": config}]
        eval_id = api.start_holdout_eval(
            small_case, variants, api.HoldoutOptions(sample_size=200, seed=6), register_only=True
        ).eval_id
        instance = dagster_instance()
        run = runs.create_inline_run(instance, runs.kind_of("holdout"), eval_id)
        assert run is not None

        def terminate_once_calling() -> None:
            wait_for(lambda: server.request_count >= 6)
            instance.run_launcher.terminate(run.run_id)

        terminator = threading.Thread(target=terminate_once_calling)
        terminator.start()
        state = runs.execute_run_here(instance, run)
        terminator.join()
        assert state.state == "canceled"
        stopped_at = server.request_count
        # The step has ended (the run with it): nothing is left calling the endpoint.
        assert stopped_at < 60
        with connect(workdir / "warehouse.duckdb", read_only=True) as conn:
            cached = count_calls(conn)
        assert stopped_at - 2 <= cached <= stopped_at  # at most the 2 in flight were lost
        assert server.request_count == stopped_at


def test_a_chat_estimate_above_the_limit_needs_a_yes_and_writes_nothing_without(
    small_case: str, server: StandinServer
) -> None:
    from eval_pipelines.core.holdout.token_policy import (
        TOKEN_CONFIRMATION_LIMIT,
        TokenConfirmationNeeded,
    )

    variants = [{"name": "baseline"}, {"name": "chat", "config": chat_config(server.base_url)}]
    before = _evaluations()
    with pytest.raises(TokenConfirmationNeeded) as refused:
        # 500 records x 20 trials x (prompt chars/4 + 64): well above 400,000 tokens
        api.start_holdout_eval(
            small_case, variants, api.HoldoutOptions(sample_size=500, trials=20), register_only=True
        )
    estimate = refused.value.estimate
    assert estimate.total_tokens > TOKEN_CONFIRMATION_LIMIT
    (chat,) = [v for v in estimate.variants if v.classifier == "chat"]
    assert chat.chat is not None and chat.chat["calls"] == 500 * 20
    assert chat.tokens == chat.records * chat.tokens_per_record == chat.chat["tokens"]
    assert _evaluations() == before and server.request_count == 0
    started = api.start_holdout_eval(
        small_case,
        variants,
        api.HoldoutOptions(sample_size=500, trials=20, confirm_tokens=True),
        register_only=True,
    )
    assert started.estimated_tokens == estimate.total_tokens


def test_the_cli_shows_chat_progress_while_it_waits(
    small_case: str, workdir: Path, server: StandinServer
) -> None:
    """``eval holdout --wait`` in its own process, progress forced on (stderr a pipe): the
    chat step's lines (calls done of total, tokens so far, from cache, ETA) are shown."""
    import os
    import subprocess
    import sys

    from eval_pipelines.core import progress

    variants = workdir / "variants.json"
    variants.write_text(
        json.dumps([{"name": "baseline"}, {"name": "chat", "config": chat_config(server.base_url)}])
    )
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "eval_pipelines.cli.main",
            "eval",
            "holdout",
            small_case,
            "--variants-file",
            str(variants),
            "--sample-size",
            "20",
            "--wait",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, progress.ENV: "1"},
        timeout=300,
    )
    assert shown.returncode == 0, shown.stderr
    chat_lines = [line for line in shown.stderr.splitlines() if "chat variant chat: " in line]
    assert chat_lines, shown.stderr
    assert re.search(
        r"chat variant chat: 20/20 calls, 0 failed, 0 from cache, [\d,]+ tokens so far, ETA",
        shown.stderr,
    ), chat_lines
    assert server.request_count == 20


def test_an_endpoint_down_is_a_complete_report_with_every_chat_row_failed(
    small_case: str,
) -> None:
    port = free_port()  # nothing listens there
    down = f"http://127.0.0.1:{port}/v1"
    variants = [{"name": "baseline"}, {"name": "chat", "config": chat_config(down)}]
    started = api.start_holdout_eval(
        small_case, variants, api.HoldoutOptions(sample_size=20, seed=2), wait=True
    )
    assert started.status == "complete"
    report = api.get_holdout_eval(small_case, started.eval_id).report
    assert report is not None
    baseline, chat = report["variants"]
    assert (baseline["failedRows"], chat["failedRows"]) == (0, 20)
    reason = f"endpoint unreachable: connection refused at {down}"
    assert chat["usage"]["chat"]["failureReasons"] == [
        {"cause": "endpoint unreachable", "rows": 20, "example": reason}
    ]
    markdown = api.get_holdout_eval(small_case, started.eval_id).report_markdown or ""
    assert (
        "| model calls made / from cache / failed (no answer after retries) | - | 0 / 0 / 20 |"
        in markdown
    )
    assert "| failed rows by cause (a bad answer too) | - | endpoint unreachable: 20 |" in markdown
    assert any(w["code"] == "failed_rows" for w in report["warnings"])
    assert {row.error for row in api.eval_rows(small_case, started.eval_id, variant="chat")} == {
        reason
    }
