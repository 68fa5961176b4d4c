"""A query evaluation for people, rendered without a run: the CLI's text and the UI's markdown
(the expected texts are what `evaluate` and the `evaluate_result` asset printed before the
rendering moved into the core)."""

from __future__ import annotations

from typing import Any

from eval_pipelines.core.queries.query import parse_query
from eval_pipelines.core.queries.report import (
    experiment_label,
    headline,
    report_markdown,
    report_text,
    setup_lines,
)

METRICS: dict[str, float | int | None] = {
    "n": 3,
    "accuracy": 0.5,
    "baseAccuracy": 0.25,
    "meanRank": 1.5,
}
RESPONSE: dict[str, Any] = {
    "n": 3,
    "accuracy": 0.5,
    "baseAccuracy": 0.25,
    "truncated": True,
    "requested": 10,
    "message": "hit maxTime",
    "errorCases": [
        {
            "offset": 4,
            "top": {"$value": "a", "$p": 0.6},
            "correct": {"$value": "b", "$p": 0.3, "rank": 2},
        }
    ],
    "folds": [{"accuracy": 0.5}, {"accuracy": 0.25}],
    "coverage": {"everyRowOnce": True, "tested": 3, "rows": 3},
}


def test_the_headline_pairs_the_model_with_its_baseline() -> None:
    assert headline(METRICS) == "accuracy 0.5000 vs baseAccuracy 0.2500 (n = 3)"
    assert headline({"mae": 1.23456, "baselineMae": None, "n": 3}) == (
        "mae 1.2346 vs baselineMae — (n = 3)"
    )
    assert headline({"n": 5}) == "n = 5"


def test_the_text_lists_the_selected_metrics_cases_folds_and_the_run() -> None:
    text = report_text(
        RESPONSE,
        METRICS,
        eval_id="q-1",
        run_id="r1",
        cached=False,
        folds=2,
        listing_hint="--json lists them all",
    )
    assert text == "\n".join(
        [
            "accuracy 0.5000 vs baseAccuracy 0.2500 (n = 3)",
            "truncated: hit maxTime after 3 of 10 test rows",
            "  n             3",
            "  accuracy      0.5000",
            "  baseAccuracy  0.2500",
            "errorCases: 1 (--json lists them all)",
            "  offset 4: top 'a' (0.600), correct 'b' (0.300, rank 2)",
            "accuracy per fold: 0.5000 0.2500",
            "every row tested exactly once: yes (3 of 3)",
            "message: hit maxTime",
            "evaluation q-1 (run r1, 2-fold sweep)",
        ]
    )


def test_a_cached_answer_with_nothing_selected_shows_every_metric() -> None:
    text = report_text({}, {"n": 5}, eval_id="q-2", run_id=None, cached=True, folds=None)
    assert text == "n = 5\n  n  5\nevaluation q-2 (cached result)"


def test_the_markdown_report_says_what_was_read() -> None:
    sources = [
        {"kind": "table", "name": "cars", "version": "v1", "rows": 406},
        {"kind": "case", "name": "c", "version": "v2"},
    ]
    markdown = report_markdown("q-1", METRICS, RESPONSE, sources, ["- a"])
    assert markdown == "\n".join(
        [
            "### accuracy 0.5000 vs baseAccuracy 0.2500 (n = 3)",
            "",
            "- a",
            "",
            "**Truncated**: hit maxTime after 3 of 10 test rows.",
            "",
            "| metric | value |",
            "|---|---|",
            "| n | 3 |",
            "| accuracy | 0.5000 |",
            "| baseAccuracy | 0.2500 |",
            "| meanRank | 1.5000 |",
            "",
            "> hit maxTime",
            "",
            "Evaluation `q-1` read:",
            "- table `cars` version `v1`, 406 rows",
            "- case `c` version `v2`",
        ]
    )


def test_the_setup_names_the_experiment_target_evidence_and_config() -> None:
    query = parse_query(
        {
            "test": {"$index": {"$mod": [5, 0]}},
            "evaluate": {"from": "cars", "where": {"Name": {"$get": "Name"}}, "predict": "Origin"},
        }
    )
    assert setup_lines(query, None) == [
        "- experiment: hold-out (`test`: the test rows are hidden from training)",
        "- predict `Origin` from `Name`",
        "- config: profile `group`, calibrate false; maxTime 300 s",
    ]
    assert setup_lines(query, 5)[0] == (
        "- experiment: 5-fold sweep (each fold a hold-out; every row tested once)"
    )
    assert experiment_label(None, True) == "hold-out (test)"
    assert experiment_label(5, True) == "5-fold sweep (hold-out)"
    assert experiment_label(None, False) == "resubstitution (testSource)"
