"""The pure half of the chat classifier, and one pass through the stand-in over real HTTP:
offered candidates (the ceiling), the memo's instructions in the prompt, bad answers as failed
rows with their reasons."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from eval_pipelines.chat_standin.server import Fault, serve_standin
from eval_pipelines.core.chat.request import build_request
from eval_pipelines.core.chat.settings import parse_chat_settings
from eval_pipelines.core.holdout.chat_classify import (
    chat_messages,
    offered_candidates,
    prediction_from_answer,
    supplied_evidence,
)
from eval_pipelines.core.holdout.classify import Neighbour
from eval_pipelines.core.holdout.classify_config import ClassifyConfig
from eval_pipelines.core.holdout.memo import parse_memo_entry
from eval_pipelines.core.tree import tree_from_parent_links
from eval_pipelines.stages.chat_calls import run_chat_calls

TREE = tree_from_parent_links(
    pl.DataFrame(
        {
            "code": ["A", "A1", "A2", "B", "B1"],
            "parent": [None, "A", "A", None, "B"],
            "title": ["Farming", "Growing of cereals", "Raising of cattle", "Trade", "Retail"],
        }
    )
)
TITLES = {"A1": "Growing of cereals", "A2": "Raising of cattle", "B1": "Retail sale in stores"}
CONFIG = ClassifyConfig(classifier="chat", candidates=3, target_depth=(2,), auto_above=0.8)
MEMO = [
    parse_memo_entry(
        {
            "id": "m1",
            "instruction": "Cattle farms are A2.",
            "when": {"keywords": ["cow"]},
            "then": {"prefer": "A2", "boost": 2.0},
        },
        TREE,
    )
]


def test_offered_candidates_are_distinct_labels_of_the_evidence_asked_for() -> None:
    retrieved = [
        Neighbour("r1", 0.5, "A1"),
        Neighbour("r2", 0.9, "A1"),
        Neighbour("r3", 0.4, "B1"),
        Neighbour("r4", 0.8, "A2"),
    ]
    assert offered_candidates(retrieved, 3) == [("A1", 0.9), ("B1", 0.4)]
    # The row was supplied the 3 records it asked for: two sharing a label is no shortfall
    # (a count of the labels offered, 2, read as "retrieval returned fewer than 3").
    assert supplied_evidence(retrieved, 3) == 3
    assert supplied_evidence(retrieved[:2], 3) == 2
    failed = prediction_from_answer(
        "k", None, "down", offered_candidates(retrieved, 3), supplied=3, config=CONFIG, tree=TREE
    )
    assert (failed.effective_candidates, failed.requested_candidates) == (3, 3)


def test_answers_become_predictions_or_failed_rows_with_their_reason(tmp_path: Path) -> None:
    retrieved = [Neighbour("r1", 0.9, "A1"), Neighbour("r2", 0.7, "B1"), Neighbour("r3", 0.6, "A2")]
    offered = offered_candidates(retrieved, CONFIG.candidates)
    texts = ["growing cereals on a farm", "retail sale in stores", "cereals 3", "cereals 4"]
    with serve_standin(schedule={3: Fault("malformed"), 4: Fault("outside")}) as server:
        config = {"options": {"model": "standin-1", "baseUrl": server.base_url}, "concurrency": 1}
        settings = parse_chat_settings(config, {})
        requests = [
            build_request(settings, chat_messages(settings, text, offered, MEMO, TITLES))
            for text in texts
        ]
        result = run_chat_calls(tmp_path / "w.duckdb", settings, requests, environ={})
        prompt = server.requests[0].prompt
    assert "Cattle farms are A2." in prompt and "- B1: Retail sale in stores" in prompt
    predictions = [
        prediction_from_answer(
            f"k{i}",
            a.content,
            a.failure,
            offered,
            supplied=len(retrieved),
            config=CONFIG,
            tree=TREE,
            input_tokens=a.input_tokens,
            output_tokens=a.output_tokens,
        )
        for i, a in enumerate(result.answers)
    ]
    first, second, malformed, outside = predictions
    # "growing" and "cereals": 2 of the 3 title words of A1 (the stand-in rounds to 4 places),
    # below autoAbove -> review
    assert (first.code, first.route, first.confidence) == ("A1", "review", 0.6667)
    assert (second.code, second.route) == ("B1", "auto")
    assert [c["code"] for c in first.candidates] == ["A1", "B1", "A2"]
    assert first.effective_candidates == 3 and first.requested_candidates == 3
    assert first.input_tokens > 0 and first.tokens == first.input_tokens + first.output_tokens
    assert malformed.code is None and malformed.route == "declined"
    assert (malformed.error or "").startswith("answer is not JSON")
    assert outside.error == "answer's code is not in the code tree: 'NOT-A-CANDIDATE'"
    # the failed rows keep their candidates: the ceiling still counts what was offered
    assert outside.candidates == first.candidates


def test_a_failed_call_is_a_failed_row() -> None:
    failed = prediction_from_answer(
        "k",
        None,
        "endpoint unreachable: connection refused at http://x/v1",
        [("A1", 0.9)],
        supplied=1,
        config=CONFIG,
        tree=TREE,
    )
    assert failed.error == "endpoint unreachable: connection refused at http://x/v1"
    assert (failed.code, failed.route, failed.confidence) == (None, "declined", 0.0)
