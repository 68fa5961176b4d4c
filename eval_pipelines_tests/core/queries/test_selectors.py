"""Test-row selectors: positions, folds, samples, hashes, field conditions, compounds."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.queries.selectors import select_rows
from eval_pipelines.core.queries.source import Source
from eval_pipelines.core.queries.views import TableView

FRAME = pl.DataFrame(
    {
        "id": [f"r{i}" for i in range(12)],
        "month": ["2024-0" + str(1 + i % 9) for i in range(12)],
        "units": [float(i) for i in range(12)],
        "promo": [i % 2 == 0 for i in range(12)],
        "store": ["a", "b", "c", None] * 3,
        "tags": [["x"], ["y", "z"], [], None] * 3,
    }
)


def _view(frame: pl.DataFrame = FRAME, key: str | None = "id") -> TableView:
    source = Source("sales", "v1", "table", frame, key=key)
    return TableView(source, lambda name: source)


def _chosen(selector: dict[str, Any], view: TableView | None = None) -> list[int]:
    return np.flatnonzero(select_rows(view or _view(), selector, field="test")).tolist()


def test_index_one_several_and_folds() -> None:
    assert _chosen({"$index": 3}) == [3]
    assert _chosen({"$or": [{"$index": 0}, {"$index": 1}, {"$index": 2}]}) == [0, 1, 2]
    assert _chosen({"$index": {"$mod": [5, 1]}}) == [1, 6, 11]
    folds = [set(_chosen({"$index": {"$mod": [4, r]}})) for r in range(4)]
    assert set().union(*folds) == set(range(12)) and sum(len(f) for f in folds) == 12


def test_index_past_the_end_is_refused() -> None:
    with pytest.raises(InputError, match="past the last row"):
        _chosen({"$index": 12})


def test_sample_is_seeded_and_sized() -> None:
    first = _chosen({"$sample": {"n": 5, "seed": 3}})
    assert len(first) == 5 and first == _chosen({"$sample": {"n": 5, "seed": 3}})
    assert first != _chosen({"$sample": {"n": 5, "seed": 4}})
    assert len(_chosen({"$sample": {"n": 1, "of": 4, "seed": 0}})) == 3  # 12 * 1/4
    assert len(_chosen({"$sample": 4})) == 4
    with pytest.raises(InputError, match="there are 12"):
        _chosen({"$sample": 13})


def test_hash_folds_partition_the_rows_and_do_not_depend_on_order() -> None:
    folds = [set(_chosen({"$hash": {"$mod": [3, r]}})) for r in range(3)]
    assert set().union(*folds) == set(range(12)) and sum(len(f) for f in folds) == 12
    ids = FRAME["id"].to_list()
    by_key = {ids[i] for i in folds[0]}
    shuffled = FRAME.reverse()
    chosen = _chosen({"$hash": {"$mod": [3, 0]}}, _view(shuffled))
    assert {shuffled["id"][i] for i in chosen} == by_key


def test_hash_by_field_keeps_rows_of_a_value_together() -> None:
    chosen = _chosen({"$hash": {"$mod": [2, 0], "field": "store"}})
    stores = {FRAME["store"][i] for i in chosen}
    for i in range(12):
        assert (i in chosen) == (FRAME["store"][i] in stores)


def test_field_conditions_and_operators() -> None:
    assert _chosen({"store": "a"}) == [0, 4, 8]
    assert _chosen({"month": {"$lte": "2024-03"}}) == [0, 1, 2, 9, 10, 11]  # lexicographic
    assert _chosen({"units": {"$gt": 3, "$lt": 6}}) == [4, 5]
    assert _chosen({"units": {"$gte": 10}}) == [10, 11]
    assert _chosen({"store": {"$in": ["a", "b"]}}) == [0, 1, 4, 5, 8, 9]
    # Null never meets a comparison, but it is not equal to "a".
    assert _chosen({"store": {"$ne": "a"}}) == [1, 2, 3, 5, 6, 7, 9, 10, 11]
    assert _chosen({"store": None}) == [3, 7, 11]
    assert _chosen({"tags": "z"}) == [1, 5, 9]  # a set column: has the member


def test_compound_positions_are_table_positions() -> None:
    # Rows in fold [3, 0] (positions 0, 3, 6, 9) that are on promotion (even positions).
    assert _chosen({"$and": [{"$index": {"$mod": [3, 0]}}, {"promo": True}]}) == [0, 6]
    assert _chosen({"$or": [{"$index": 1}, {"store": "c"}]}) == [1, 2, 6, 10]
    nested = {"$or": [{"$and": [{"promo": False}, {"units": {"$lt": 4}}]}, {"$index": 11}]}
    assert _chosen(nested) == [1, 3, 11]


@pytest.mark.parametrize(
    ("selector", "rule"),
    [
        ({"units": "ten"}, "numeric; compare it to a number"),
        ({"store": {"$gt": 3}}, "holds text; compare it to a string"),
        ({"promo": {"$lt": True}}, "use equality"),
        ({"tags": {"$gt": "a"}}, "holds sets"),
        ({"sotre": "a"}, "no column 'sotre'"),
    ],
)
def test_conditions_that_cannot_mean_anything_are_refused(
    selector: dict[str, Any], rule: str
) -> None:
    with pytest.raises(InputError, match=rule):
        _chosen(selector)
