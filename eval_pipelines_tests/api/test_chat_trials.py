"""Repeated trials end to end: a ``chat`` variant asked 3 times per record over real HTTP (the
stand-in on 127.0.0.1, real Dagster run, real DuckDB), with five trials answered with a code
outside the candidates (failed trials, so a record's trials disagree), and the report's
``trials`` block recomputed here from the stored trials, the labels and the tree's parent
links."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from eval_pipelines import api
from eval_pipelines.chat_standin.server import Fault, StandinServer, serve_standin
from eval_pipelines.storage import holdout as holdout_store
from eval_pipelines.storage.warehouse import connect

FAULTED = (3, 10, 20, 33, 47)  # request numbers answered with a code outside the candidates


@pytest.fixture
def server() -> Iterator[StandinServer]:
    with serve_standin(schedule={n: Fault("outside") for n in FAULTED}) as running:
        yield running


def test_a_chat_variant_with_three_trials_reports_agreement_and_flip_rate(
    small_case: str,
    small_case_files: dict[str, Path],
    server: StandinServer,
    workdir: Path,
) -> None:
    variants = [
        {"name": "baseline"},
        {
            "name": "chat",
            "config": {
                "classifier": "chat",
                "candidates": 10,
                "options": {"model": "m-small", "baseUrl": server.base_url, "maxTokens": 64},
                # One call at a time: the faulted request numbers then hit the same trials
                # on every run (docs/holdout.md quotes this run's figures).
                "concurrency": 1,
            },
        },
    ]
    started = api.start_holdout_eval(
        small_case, variants, api.HoldoutOptions(sample_size=30, seed=5, trials=3), wait=True
    )
    assert started.status == "complete"
    status = api.get_holdout_eval(small_case, started.eval_id)
    report = status.report
    assert report is not None
    assert server.request_count == 90
    assert [r.fault for r in server.requests].count("outside") == len(FAULTED)

    block = report["trials"]
    assert list(block) == ["chat"]  # the knn baseline ran once: nothing to repeat
    chat = block["chat"]
    assert (chat["trials"], chat["records"], chat["trialRows"]) == (3, 30, 90)
    assert chat["failedTrials"] == len(FAULTED)

    # Recomputed here: the stored trials, each record's label and cluster (eval rows), and the
    # ancestors from the tree file's parent links.
    with connect(workdir / "warehouse.duckdb", read_only=True) as conn:
        trials = holdout_store.load_trials(conn, started.eval_id)
    parent = dict(pl.read_parquet(small_case_files["tree"]).select("code", "parent").iter_rows())

    def path(code: str | None) -> list[str]:
        out: list[str] = []
        while code is not None:
            out.insert(0, code)
            code = parent.get(code)
        return out

    rows = {
        row.record_key: row for row in api.eval_rows(small_case, started.eval_id, variant="chat")
    }
    by_record: dict[str, list[dict]] = {}
    for trial in trials.filter(pl.col("variant") == "chat").sort("trial").to_dicts():
        by_record.setdefault(trial["record_key"], []).append(trial)
    assert set(by_record) == set(rows)
    for depth in map(str, report["targetDepth"]):
        d = int(depth)
        scored = [k for k in by_record if len(path(rows[k].label)) >= d]
        shares, modal, unanimous, pairs, disagreeing = [], [], 0, 0, 0
        for key in scored:
            truth = path(rows[key].label)[d - 1]
            answers = []
            for t in by_record[key]:
                code_path = path(t["code"])
                answers.append(
                    "<failed>"
                    if t["error"] is not None
                    else (code_path[d - 1] if len(code_path) >= d else "<declined>")
                )
            shares.append(sum(a == truth for a in answers) / 3)
            top = max(Counter(answers).values())
            modal.append(top / 3)
            unanimous += top == 3
            combos = list(itertools.combinations(answers, 2))
            pairs += len(combos)
            disagreeing += sum(a != b for a, b in combos)
        level = chat["levels"][depth]
        assert level["records"] == len(scored) and level["trials"] == 3 * len(scored)
        assert level["clusters"] == len({rows[k].cluster for k in scored})
        assert level["accuracy"]["value"] == pytest.approx(sum(shares) / len(scored), abs=1e-6)
        assert level["agreement"]["value"] == pytest.approx(sum(modal) / len(scored), abs=1e-6)
        assert (level["unanimous"]["k"], level["unanimous"]["n"]) == (unanimous, len(scored))
        flip = level["flipRate"]
        assert (flip["disagreeingPairs"], flip["pairs"]) == (disagreeing, pairs)
        assert flip["value"] == pytest.approx(disagreeing / pairs, abs=1e-6)
        # The faults made trials disagree: a flip rate above zero, inside its interval.
        assert disagreeing > 0 and flip["interval"][0] <= flip["value"] <= flip["interval"][1]
    # Trial 1 stays the variant's prediction, so the knn comparison is unchanged in kind.
    first = {t["record_key"]: t["code"] for t in trials.filter(pl.col("trial") == 1).to_dicts()}
    assert first == {k: r.prediction for k, r in rows.items()}
    codes = [w["code"] for w in report["warnings"]]
    assert "failed_trials" in codes and "trials_single_pair" not in codes
    assert "### Repeated trials" in (status.report_markdown or "")
    # The counts docs/holdout.md quotes: each of the five faulted trials hit a different
    # record (10 disagreeing pairs of 90 at L3; at L4 one of those records is not scored).
    flips = {d: chat["levels"][d]["flipRate"] for d in ("3", "4")}
    assert [(f["disagreeingPairs"], f["pairs"]) for f in flips.values()] == [(10, 90), (8, 87)]
