"""Building a case (core.cases.build_case) from frames: no file, no warehouse."""

import numpy as np
import polars as pl
import pytest

from eval_pipelines.core.cases import build_case
from eval_pipelines.core.errors import InputError

RECORDS = pl.DataFrame(
    {
        "record_key": ["r1", "r2", "r3"],
        "text": ["fever and cough", "broken arm", "cough"],
        "label": ["J101", "S420", "J102"],
    }
)
TREE = pl.DataFrame(
    {
        "code": ["J", "J10", "J101", "J102", "S", "S42", "S420"],
        "parent": [None, "J", "J10", "J10", None, "S", "S42"],
        "title": ["Respiratory", None, None, None, "Injury", None, None],
    }
)


def test_a_prefix_tree_case_is_built_and_versioned_the_same_way_twice():
    first = build_case("c1", RECORDS, levels=[1, 3, 4])
    again = build_case("c1", RECORDS, levels=[1, 3, 4])
    assert first.tree.mode == "prefix" and first.target_depth == (3,)
    assert (first.records_version, first.tree_version) == (
        again.records_version,
        again.tree_version,
    )
    assert first.nodes.filter(pl.col("code") == "J10").row(0, named=True) == {
        "code": "J10",
        "parent": "J",
        "depth": 2,
        "title": None,
        "kind": first.tree.levels[1].name,
    }
    assert first.embeddings is None and first.embedding_keys == ()


def test_a_tree_file_gives_titles_and_another_tree_version():
    built = build_case("c1", RECORDS, tree_frame=TREE, target_depth=[2, 3])
    assert built.tree.mode != "prefix" and built.target_depth == (2, 3)
    assert built.nodes.filter(pl.col("code") == "J").get_column("title").to_list() == [
        "Respiratory"
    ]
    assert built.tree_version != build_case("c1", RECORDS, levels=[1, 3, 4]).tree_version
    changed = RECORDS.with_columns(pl.Series("text", ["fever", "broken arm", "cough"]))
    assert build_case("c1", changed, tree_frame=TREE).records_version != built.records_version


def test_exactly_one_of_a_tree_or_levels_is_required():
    with pytest.raises(InputError, match="give exactly one of --tree or --levels"):
        build_case("c1", RECORDS)
    with pytest.raises(InputError, match="give exactly one"):
        build_case("c1", RECORDS, tree_frame=TREE, levels=[1, 3])


def test_a_label_outside_the_tree_and_a_bad_name_are_refused():
    outside = RECORDS.with_columns(pl.Series("label", ["J101", "S420", "X999"]))
    with pytest.raises(InputError, match="X999"):
        build_case("c1", outside, tree_frame=TREE)
    with pytest.raises(InputError, match="case"):
        build_case("bad name\n", RECORDS, levels=[1, 3])


def test_embeddings_are_checked_against_the_records_and_kept_in_key_order():
    vectors = np.array([[0.0, 2.0], [3.0, 0.0], [1.0, 1.0]])
    built = build_case("c1", RECORDS, levels=[1, 3, 4], embedded=(["r3", "r1", "r2"], vectors))
    assert built.embedding_keys == ("r1", "r2", "r3")
    assert built.embeddings is not None
    np.testing.assert_allclose(np.linalg.norm(built.embeddings, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(built.embeddings[0], [1.0, 0.0], atol=1e-6)  # r1 = (3, 0)
    with pytest.raises(InputError):
        build_case("c1", RECORDS, levels=[1, 3, 4], embedded=(["r1", "r2"], vectors[:2]))
