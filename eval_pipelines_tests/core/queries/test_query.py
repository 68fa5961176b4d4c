"""Every refusal of the evaluate query is loud, names the field and the rule; the 003
request examples parse as written."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.queries.query import (
    ESTIMATE_METRICS,
    PREDICT_METRICS,
    parse_query,
)
from eval_pipelines_tests.helpers.query_spec_examples import BASE, SPEC_EXAMPLES


@pytest.mark.parametrize("document", SPEC_EXAMPLES, ids=range(len(SPEC_EXAMPLES)))
def test_the_003_examples_parse_as_written(document: dict[str, Any]) -> None:
    query = parse_query(document)
    assert query.document == document
    assert query.kind in ("predict", "estimate")


def test_parsed_fields() -> None:
    query = parse_query(SPEC_EXAMPLES[2])
    assert query.scope.table == "invoices" and query.scope.filters == ({"tenant": "A"},)
    assert [b.source for b in query.bindings] == ["vendor", "description"]
    assert query.holdout and query.max_time == 300.0 and query.profile == "group"
    feature = parse_query(SPEC_EXAMPLES[3])
    assert feature.feature_target and feature.target == "tags"
    assert parse_query(SPEC_EXAMPLES[8]).table_names() == ("sales", "holdout")


def test_select_defaults_to_every_scalar_metric() -> None:
    predict = copy.deepcopy(BASE)
    del predict["select"]
    assert parse_query(predict).select == tuple(m for m in PREDICT_METRICS if m != "tau")
    assert parse_query(SPEC_EXAMPLES[0] | {"select": None}).select == ESTIMATE_METRICS


def _with(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """A copy of ``base`` with the dotted ``path`` set (``value`` DELETE removes it)."""
    document = copy.deepcopy(base or BASE)
    *parents, last = path.split("/")
    node = document
    for part in parents:
        node = node[part]
    if value == "DELETE":
        del node[last]
    else:
        node[last] = value
    return document


REFUSALS = [
    (_with("test", "DELETE"), "test", "no implicit default"),
    (_with("testSource", {"limit": 5}), "test", "not both"),
    (_with("evaluate/where/name", {"$get": "product.pet.type"}), "$get", "2 link hops"),
    (
        _with("evaluate/where/store", {"$gt": 3}, SPEC_EXAMPLES[0]),
        "evaluate.where.store",
        "estimate evidence is by equality",
    ),
    (_with("evaluate/where/category", {"$get": "category"}), "category", "shown the answer"),
    (_with("select", ["accuracy", "recall"]), "select[1]", "unknown for predict"),
    (_with("select", ["mae"]), "select[0]", "unknown for predict"),
    (_with("maxTime", 0), "maxTime", "seconds in (0, 3600]"),
    (_with("maxTime", 3601), "maxTime", "seconds in (0, 3600]"),
    (_with("test", {"month": {"$like": "2024%"}}), "test.month.$like", "unknown operator"),
    (_with("test", {"$index": {"$mod": [5, 5]}}), "test.$index.$mod", "0 <= r < k"),
    (_with("test", {"$index": -1}), "test.$index", "0 or more"),
    (_with("test", {"$sample": {"n": 10, "of": 5}}), "test.$sample.of", ">= n"),
    (_with("test", {"$hash": {"field": "x"}}), "test.$hash", "$mod"),
    (_with("test", {"$nope": 1}), "test.$nope", "unknown selector"),
    (_with("test", {"$or": []}), "test.$or", "non-empty list"),
    (_with("evaluate/from", {"where": {"tenant": "A"}}), "evaluate.from.from", "own from"),
    (_with("evaluate/predict", "tags.$feature.x"), "evaluate.predict", "column of the table"),
    (_with("evaluate/estimate", "units"), "evaluate", "exactly one of predict"),
    (_with("evaluate/config", {"ai": "turbo"}), "evaluate.config.ai", "fast, group, high"),
    (_with("evaluate/config", {"calibrate": "yes"}), "calibrate", "true or false"),
    (_with("evaluate/extra", 1), "evaluate.extra", "unknown key"),
    (_with("limit", 1), "limit", "unknown key"),
    (_with("evaluate/where/name", {"$get": ""}), "$get", "non-empty string"),
]


@pytest.mark.parametrize(("document", "field", "rule"), REFUSALS, ids=range(len(REFUSALS)))
def test_each_refusal_names_the_field_and_the_rule(
    document: dict[str, Any], field: str, rule: str
) -> None:
    with pytest.raises(InputError) as raised:
        parse_query(document)
    assert field in raised.value.field
    assert rule in raised.value.rule


def test_estimate_config_is_checked() -> None:
    with pytest.raises(InputError, match="knn, regression"):
        parse_query(_with("evaluate/config", {"model": "forest"}, SPEC_EXAMPLES[0]))
    with pytest.raises(InputError, match="1 to 1000"):
        parse_query(_with("evaluate/config", {"k": 0}, SPEC_EXAMPLES[0]))


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (
            {"where": {"user": {"$get": "user"}}, "recommend": "product", "goal": {"buy": True}},
            "recommend",
        ),
        ({"where": {"tag": {"$get": "tag"}}, "relate": "category"}, "relate"),
        ({"where": {"name": {"$get": "name"}}, "match": "product"}, "match"),
        ({"where": {"name": {"$get": "name"}}, "select": ["category"]}, "generic query"),
    ],
)
def test_a_kind_this_project_does_not_evaluate_is_refused_saying_so(
    body: dict[str, Any], kind: str
) -> None:
    document = {**BASE, "evaluate": {"from": "products", **body}}
    with pytest.raises(InputError) as refused:
        parse_query(document)
    message = str(refused.value)
    assert f"a {kind} evaluation is not supported" in message
    assert "docs/queries.md" in message and "Which evaluations run where" in message
    assert "unknown key" not in message
