"""Creating cases: Parquet, CSV and JSON Lines; validated, atomic, versioned."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from eval_pipelines import api
from eval_pipelines.core.errors import ConflictError, InputError

TREE = pl.DataFrame({"code": ["A", "A1", "A2", "B", "B1"], "parent": [None, "A", "A", None, "B"]})


def _records(**columns: list) -> pl.DataFrame:
    base = {
        "record_key": ["r1", "r2", "r3"],
        "text": ["alpha one", "alpha two", "beta one"],
        "label": ["A1", "A2", "B1"],
        "shop": ["s1", "s1", "s2"],
    }
    return pl.DataFrame(base | columns)


@pytest.fixture
def tree_file(workdir: Path) -> Path:
    path = workdir / "tree.csv"
    TREE.write_csv(path)
    return path


@pytest.mark.parametrize("suffix", ["parquet", "csv", "jsonl"])
def test_all_three_formats_load(workdir: Path, tree_file: Path, suffix: str) -> None:
    path = workdir / f"records.{suffix}"
    frame = _records()
    {"parquet": frame.write_parquet, "csv": frame.write_csv, "jsonl": frame.write_ndjson}[suffix](
        path
    )
    result = api.create_case("c1", api.CaseSource(path, tree_path=tree_file))
    assert result.records == 3
    assert result.metadata_columns == ("shop",)
    assert [lv.depth for lv in result.levels] == [1, 2]


def test_version_ignores_row_order_and_sees_values(workdir: Path, tree_file: Path) -> None:
    frame = _records()
    frame.write_parquet(workdir / "a.parquet")
    frame.reverse().write_parquet(workdir / "b.parquet")
    _records(text=["alpha one", "alpha two", "beta 1"]).write_parquet(workdir / "c.parquet")
    a = api.create_case("a", api.CaseSource(workdir / "a.parquet", tree_path=tree_file))
    b = api.create_case("b", api.CaseSource(workdir / "b.parquet", tree_path=tree_file))
    c = api.create_case("c", api.CaseSource(workdir / "c.parquet", tree_path=tree_file))
    assert a.records_version == b.records_version != c.records_version


def test_custom_columns_and_levels(workdir: Path) -> None:
    frame = pl.DataFrame(
        {"id": ["x", "y"], "desc": ["live horses", "frozen fish"], "hs": ["0101.21.00", "0303.11"]}
    )
    frame.write_csv(workdir / "goods.csv")
    result = api.create_case(
        "goods",
        api.CaseSource(
            workdir / "goods.csv",
            levels=[2, 4, 6, 8],
            key_column="id",
            text_column="desc",
            label_column="hs",
        ),
    )
    assert result.tree_mode == "prefix"
    assert result.target_depth == (4,)


BAD_RECORDS = [
    (_records(record_key=["r1", None, "r3"]), "records.record_key", "present on every row"),
    (_records(record_key=["r1", "r1", "r3"]), "records.record_key", "unique"),
    (_records(text=["alpha", "  ", "beta"]), "records.text", "empty or blank"),
    (_records(label=["A1", None, "B1"]), "records.label", "present on every row"),
    (_records(label=["A1", "Z9", "B1"]), "records.label", "not a code of the case's tree"),
    (_records().drop("text"), "text_column", "column not found"),
]


@pytest.mark.parametrize(("frame", "field", "rule"), BAD_RECORDS)
def test_bad_records_name_the_field_and_write_nothing(
    workdir: Path, tree_file: Path, frame: pl.DataFrame, field: str, rule: str
) -> None:
    path = workdir / "bad.parquet"
    frame.write_parquet(path)
    with pytest.raises(InputError, match=rule) as error:
        api.create_case("bad", api.CaseSource(path, tree_path=tree_file))
    assert error.value.field == field
    assert not (workdir / "warehouse.duckdb").exists()  # validation happens before any write


def test_existing_case_needs_replace(workdir: Path, tree_file: Path) -> None:
    _records().write_parquet(workdir / "r.parquet")
    first = api.create_case("c", api.CaseSource(workdir / "r.parquet", tree_path=tree_file))
    with pytest.raises(ConflictError, match="pass `replace`"):
        api.create_case("c", api.CaseSource(workdir / "r.parquet", tree_path=tree_file))
    same = api.create_case(
        "c", api.CaseSource(workdir / "r.parquet", tree_path=tree_file), replace=True
    )
    assert same.records_version == first.records_version
    assert (same.records_version_added, same.tree_version_added) == (False, False)
    _records(text=["alpha one", "beta two", "gamma three"]).write_parquet(workdir / "r2.parquet")
    changed = api.create_case(
        "c", api.CaseSource(workdir / "r2.parquet", tree_path=tree_file), replace=True
    )
    assert changed.records_version != first.records_version
    assert changed.records_version_added is True
    assert api.list_cases()[0].records_version == changed.records_version


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"case_id": "bad/id"}, "case"),
        ({"target_depth": [3]}, "target_depth"),
        ({"levels": [2, 4]}, "tree_path"),
    ],
)
def test_other_bad_arguments(workdir: Path, tree_file: Path, kwargs: dict, field: str) -> None:
    _records().write_parquet(workdir / "r.parquet")
    arguments = {"case_id": "c", "records_path": workdir / "r.parquet", "tree_path": tree_file}
    source = arguments | kwargs
    with pytest.raises(InputError) as error:
        api.create_case(source.pop("case_id"), api.CaseSource(**source))
    assert error.value.field == field


# A bad argument next to files that do not exist: the argument's error (every argument is
# checked, once, in core.cases.build_case, before any file is read), and nothing is written.
BAD_WITH_MISSING_FILES = [
    ({"case_id": "bad/id", "levels": [2, 4]}, "case"),
    ({"levels": [4, 2]}, "levels"),
    ({"levels": [2, 4], "target_depth": [0]}, "target_depth"),
    ({"levels": [2, 4], "key_column": "label"}, "key_column"),
    ({"tree_path": "missing_tree.csv", "levels": [2, 4]}, "tree_path"),
    (
        {"levels": [2, 4], "embeddings_path": "missing.parquet", "embedding_column": "vec"},
        "embeddings_path",
    ),
]


@pytest.mark.parametrize(("kwargs", "field"), BAD_WITH_MISSING_FILES)
def test_a_bad_argument_is_refused_before_a_missing_file_is_read(
    workdir: Path, kwargs: dict, field: str
) -> None:
    arguments = {"case_id": "c", "records_path": workdir / "missing_records.csv"}
    source = arguments | kwargs
    with pytest.raises(InputError) as error:
        api.create_case(source.pop("case_id"), api.CaseSource(**source))
    assert error.value.field == field
    assert "does not exist" not in str(error.value)
    assert not (workdir / "warehouse.duckdb").exists()


def test_the_cli_shows_the_argument_error_as_its_flag(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines.cli.main import main

    argv = ["case", "create", "c", "--records", "missing.csv", "--levels", "4,2"]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("error: --levels=[4, 2]: prefix lengths must be")
    argv = ["case", "create", "c", "--records", "missing.csv", "--levels", "2,4"]
    assert main([*argv, "--key-column", "label"]) == 2
    assert capsys.readouterr().err.startswith(
        "error: --key-column='label': names the same column as --label-column"
    )
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("error: --records='missing.csv': file does not exist")
    assert not (workdir / "warehouse.duckdb").exists()
