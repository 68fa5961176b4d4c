"""Building a case (core.cases.build_case) from its files: no warehouse. Every argument is
checked before any file is read, in this one place."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from eval_pipelines.core.cases import CaseSource, build_case
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


def _file(frame: pl.DataFrame, path: Path) -> Path:
    frame.write_parquet(path)
    return path


@pytest.fixture
def records(tmp_path: Path) -> Path:
    return _file(RECORDS, tmp_path / "records.parquet")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return _file(TREE, tmp_path / "tree.parquet")


def test_a_prefix_tree_case_is_built_and_versioned_the_same_way_twice(records: Path) -> None:
    first = build_case("c1", CaseSource(records, levels=[1, 3, 4]))
    again = build_case("c1", CaseSource(str(records), levels=[1, 3, 4]))
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


def test_a_tree_file_gives_titles_and_another_tree_version(
    tmp_path: Path, records: Path, tree: Path
) -> None:
    built = build_case("c1", CaseSource(records, tree_path=tree, target_depth=[2, 3]))
    assert built.tree.mode != "prefix" and built.target_depth == (2, 3)
    assert built.nodes.filter(pl.col("code") == "J").get_column("title").to_list() == [
        "Respiratory"
    ]
    assert (
        built.tree_version != build_case("c1", CaseSource(records, levels=[1, 3, 4])).tree_version
    )
    changed = _file(
        RECORDS.with_columns(pl.Series("text", ["fever", "broken arm", "cough"])),
        tmp_path / "changed.parquet",
    )
    assert (
        build_case("c1", CaseSource(changed, tree_path=tree)).records_version
        != built.records_version
    )


def test_exactly_one_of_a_tree_or_levels_is_required(records: Path, tree: Path) -> None:
    with pytest.raises(InputError, match="give exactly one of `tree_path` or `levels`") as error:
        build_case("c1", CaseSource(records))
    assert error.value.field == "tree_path"
    with pytest.raises(InputError, match="give exactly one"):
        build_case("c1", CaseSource(records, tree_path=tree, levels=[1, 3]))


def test_a_label_outside_the_tree_and_a_bad_name_are_refused(
    tmp_path: Path, records: Path, tree: Path
) -> None:
    outside = _file(
        RECORDS.with_columns(pl.Series("label", ["J101", "S420", "X999"])),
        tmp_path / "outside.parquet",
    )
    with pytest.raises(InputError, match="X999"):
        build_case("c1", CaseSource(outside, tree_path=tree))
    with pytest.raises(InputError, match="case"):
        build_case("bad name\n", CaseSource(records, levels=[1, 3]))


def test_embeddings_are_checked_against_the_records_and_kept_in_key_order(
    tmp_path: Path, records: Path
) -> None:
    vectors = [[0.0, 2.0], [3.0, 0.0], [1.0, 1.0]]
    path = _file(
        pl.DataFrame({"record_key": ["r3", "r1", "r2"], "vector": vectors}),
        tmp_path / "vectors.parquet",
    )
    built = build_case("c1", CaseSource(records, levels=[1, 3, 4], embeddings_path=path))
    assert built.embedding_keys == ("r1", "r2", "r3")
    assert built.embeddings is not None
    np.testing.assert_allclose(np.linalg.norm(built.embeddings, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(built.embeddings[0], [1.0, 0.0], atol=1e-6)  # r1 = (3, 0)
    short = _file(
        pl.DataFrame({"record_key": ["r1", "r2"], "vector": vectors[:2]}),
        tmp_path / "short.parquet",
    )
    with pytest.raises(InputError):
        build_case("c1", CaseSource(records, levels=[1, 3, 4], embeddings_path=short))
    inline = _file(RECORDS.with_columns(pl.Series("vec", vectors)), tmp_path / "inline.parquet")
    built = build_case("c1", CaseSource(inline, levels=[1, 3, 4], embedding_column="vec"))
    assert built.embedding_keys == ("r1", "r2", "r3") and "vec" not in built.metadata_columns


# Each bad argument with files that do not exist: the argument's error, not the file's (the
# arguments are checked before anything is read).
BAD_ARGUMENTS = [
    ({"case_id": "bad name\n", "levels": [1, 3]}, "case"),
    ({}, "tree_path"),
    ({"tree_path": "missing_tree.csv", "levels": [1, 3]}, "tree_path"),
    ({"levels": []}, "levels"),
    ({"levels": [3, 1]}, "levels"),
    ({"levels": [0, 2]}, "levels"),
    (
        {"levels": [1, 3], "embeddings_path": "v.parquet", "embedding_column": "v"},
        "embeddings_path",
    ),
    ({"levels": [1, 3], "key_column": ""}, "key_column"),
    ({"levels": [1, 3], "label_column": "text"}, "label_column"),
    ({"levels": [1, 3], "embedding_column": "record_key"}, "embedding_column"),
    ({"levels": [1, 3], "target_depth": []}, "target_depth"),
    ({"levels": [1, 3], "target_depth": [0]}, "target_depth"),
    ({"levels": [1, 3], "target_depth": ["3"]}, "target_depth"),
]


@pytest.mark.parametrize(("kwargs", "field"), BAD_ARGUMENTS)
def test_a_bad_argument_is_refused_before_a_missing_file_is_read(
    tmp_path: Path, kwargs: dict, field: str
) -> None:
    arguments = {"case_id": "c1", "records_path": tmp_path / "missing_records.csv"}
    source = arguments | kwargs
    with pytest.raises(InputError) as error:
        build_case(source.pop("case_id"), CaseSource(**source))
    assert error.value.field == field
    assert "does not exist" not in str(error.value)


def test_with_good_arguments_the_missing_file_is_named(tmp_path: Path, records: Path) -> None:
    with pytest.raises(InputError, match="does not exist") as error:
        build_case("c1", CaseSource(tmp_path / "missing.csv", levels=[1, 3]))
    assert error.value.field == "records_path"
    with pytest.raises(InputError, match="does not exist") as error:
        build_case("c1", CaseSource(records, tree_path=tmp_path / "missing.csv"))
    assert error.value.field == "tree_path"
    with pytest.raises(InputError, match="does not exist") as error:
        build_case(
            "c1", CaseSource(records, levels=[1, 3], embeddings_path=tmp_path / "missing.parquet")
        )
    assert error.value.field == "embeddings_path"


def test_a_label_that_fits_no_prefix_length_is_the_first_one_in_the_file(tmp_path: Path) -> None:
    # The labels' set order used to pick which bad label the refusal named: any of them, run
    # to run. Now it is the first in the records file.
    bad = [f"{n:05d}" for n in range(200)]  # five characters: no length of 1,3
    frame = pl.DataFrame(
        {"record_key": [f"r{n}" for n in range(200)], "text": ["t"] * 200, "label": bad}
    )
    with pytest.raises(InputError) as error:
        build_case("c1", CaseSource(_file(frame, tmp_path / "bad.parquet"), levels=[1, 3]))
    assert (error.value.field, error.value.value) == ("label", "00000")
