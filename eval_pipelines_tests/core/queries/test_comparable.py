"""Plots of query evaluations only join evaluations that measure the same thing: the same
tables at the same versions, scope, target and test rows; evidence and config may differ."""

from __future__ import annotations

import copy
from typing import Any

from eval_pipelines.core.queries.query import parse_query
from eval_pipelines.core.queries.report import comparable_as

QUERY: dict[str, Any] = {
    "test": {"$index": {"$mod": [5, 0]}},
    "evaluate": {"from": "cars", "where": {"Name": {"$get": "Name"}}, "predict": "Origin"},
}
SOURCES = [{"name": "cars", "kind": "table", "version": "v1", "rows": 406}]


def _key(
    document: dict[str, Any], sources: list[dict[str, Any]] = SOURCES, folds: Any = None
) -> str:
    return comparable_as(parse_query(document), folds, sources)


def _changed(path: list[str], value: Any) -> dict[str, Any]:
    document = copy.deepcopy(QUERY)
    node = document
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return document


def test_evidence_and_config_may_differ_within_one_plot() -> None:
    key = _key(QUERY)
    assert key.startswith("cars.Origin/")
    assert _key(_changed(["evaluate", "config"], {"ai": "high", "calibrate": True})) == key
    assert _key(_changed(["evaluate", "where"], {"Year": {"$get": "Year"}})) == key
    assert _key(_changed(["maxTime"], 60)) == key


def test_other_data_targets_or_test_rows_get_their_own_plot() -> None:
    key = _key(QUERY)
    others = [
        _key(QUERY, [{**SOURCES[0], "version": "v2"}]),
        _key(_changed(["evaluate", "predict"], "Cylinders")),
        _key(_changed(["test"], {"$index": {"$mod": [5, 1]}})),
        _key(_changed(["evaluate", "from"], {"from": "cars", "where": {"Origin": "USA"}})),
        _key(QUERY, folds=5),
    ]
    assert key not in others and len(set(others)) == len(others)
