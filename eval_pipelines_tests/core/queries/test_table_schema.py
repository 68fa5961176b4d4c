"""Reading, validating and versioning data tables (no warehouse involved)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.queries.table_schema import (
    read_table_file,
    table_columns,
    table_version,
    validate_table,
)

# Keys deliberately out of order: reading must keep the file's row order.
PRODUCTS = pl.DataFrame(
    {
        "sku": ["p3", "p1", "p2", "p5", "p4"],
        "units": [3, 10, None, 7, 1],
        "price": [2.5, 1.0, 4.25, None, 3.0],
        "promo": [True, False, None, True, False],
        "category": ["toys", "food", "food", None, "toys"],
    }
)


def _write_json_array(frame: pl.DataFrame, path: Path) -> None:
    path.write_text(json.dumps(frame.to_dicts()), encoding="utf-8")


WRITERS: dict[str, Callable[[pl.DataFrame, Path], None]] = {
    "parquet": lambda frame, path: frame.write_parquet(path),
    "csv": lambda frame, path: frame.write_csv(path),
    "jsonl": lambda frame, path: frame.write_ndjson(path),
    "ndjson": lambda frame, path: frame.write_ndjson(path),
    "json": _write_json_array,
}


@pytest.mark.parametrize("suffix", sorted(WRITERS))
def test_every_format_reads_the_same_table_in_file_order(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"products.{suffix}"
    WRITERS[suffix](PRODUCTS, path)
    table = validate_table(read_table_file(path), key="sku")
    assert table.equals(PRODUCTS)
    assert table_columns(table) == (
        ("sku", "string"),
        ("units", "integer"),
        ("price", "float"),
        ("promo", "boolean"),
        ("category", "string"),
    )
    # CSV's inferred types equal Parquet's, so the same values give the same version.
    assert table_version(table, key="sku") == table_version(PRODUCTS, key="sku")


def test_a_json_array_of_mixed_numbers_reads_as_float(tmp_path: Path) -> None:
    path = tmp_path / "cars.json"
    path.write_text('[{"mpg": 18, "name": "a"}, {"mpg": 31.5, "name": "b"}, {"mpg": null}]')
    table = validate_table(read_table_file(path))
    assert table.schema == pl.Schema({"mpg": pl.Float64, "name": pl.String})
    assert table.get_column("mpg").to_list() == [18.0, 31.5, None]


def test_numbers_with_null_markers_in_a_csv_are_numbers(tmp_path: Path) -> None:
    """R's write.csv (palmerpenguins' CSV) writes NA for a missing number; a text column
    keeps "NA" as a value."""
    path = tmp_path / "penguins.csv"
    path.write_text("mass,bill,code,sex\n3750,39.1,NA,male\nNA,NA,NO,NA\n3800, 39.5 ,SE,female\n")
    frame = read_table_file(path)
    assert frame.schema == {
        "mass": pl.Int64,
        "bill": pl.Float64,
        "code": pl.String,
        "sex": pl.String,
    }
    assert frame["mass"].to_list() == [3750, None, 3800]
    assert frame["bill"].to_list() == [39.1, None, 39.5]
    assert frame["code"].to_list() == ["NA", "NO", "SE"] and frame["sex"][1] == "NA"


def test_string_lists_are_a_kind(tmp_path: Path) -> None:
    path = tmp_path / "tags.jsonl"
    path.write_text('{"id": 1, "tags": ["a", "b"]}\n{"id": 2, "tags": []}\n{"id": 3}\n')
    table = validate_table(read_table_file(path), key="id")
    assert dict(table_columns(table)) == {"id": "integer", "tags": "string_list"}
    assert table.get_column("tags").to_list() == [["a", "b"], [], None]


def test_nan_becomes_null_and_types_become_canonical() -> None:
    frame = pl.DataFrame(
        {
            "x": pl.Series([1.0, float("nan"), 2.0], dtype=pl.Float32),
            "n": pl.Series([1, 2, 3], dtype=pl.Int16),
            "c": pl.Series(["a", "b", "a"], dtype=pl.Categorical),
            "empty": [None, None, None],
        }
    )
    table = validate_table(frame)
    assert table.schema == pl.Schema(
        {"x": pl.Float64, "n": pl.Int64, "c": pl.String, "empty": pl.String}
    )
    assert table.get_column("x").to_list() == [1.0, None, 2.0]


@pytest.mark.parametrize(
    ("name", "write", "rule"),
    [
        ("t.xlsx", lambda p: p.write_bytes(b"PK"), "unsupported file type"),
        ("t.csv", lambda p: p.write_bytes(b""), "the file is empty"),
        ("t.parquet", lambda p: p.write_bytes(b"not parquet"), "could not be read as parquet"),
        ("t.jsonl", lambda p: p.write_text('{"a": 1}\n{"a": \n'), "line 2: not valid JSON"),
        ("t.json", lambda p: p.write_text('{"a": 1}'), "one JSON array of objects"),
        ("t.json", lambda p: p.write_text("[]"), "holds no columns"),
        ("t.csv", lambda p: p.write_text("a,b,a\n1,2,3\n"), "'a' appears twice"),
    ],
)
def test_unreadable_files_are_refused(
    tmp_path: Path, name: str, write: Callable[[Path], object], rule: str
) -> None:
    path = tmp_path / name
    write(path)
    with pytest.raises(InputError, match=rule) as error:
        read_table_file(path)
    assert error.value.field == "path"
    assert error.value.value == str(path)


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        read_table_file(tmp_path / "nope.csv")


def test_a_parquet_file_with_a_column_twice_is_refused(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table([[1], [2]], names=["a", "a"]), tmp_path / "t.parquet")
    with pytest.raises(InputError, match="'a' appears twice"):
        read_table_file(tmp_path / "t.parquet")


@pytest.mark.parametrize("name", ["a b", "1st", "__hidden", "a.b", "a$b", "", "naïve", "a-b"])
def test_column_names_a_query_cannot_use_are_refused(name: str) -> None:
    with pytest.raises(InputError, match="must match") as error:
        validate_table(pl.DataFrame({"ok": [1], name: [2]}))
    assert (error.value.field, error.value.value) == ("table.columns", name)


@pytest.mark.parametrize("name", ["_", "_x", "x__y", "A1", "Miles_per_Gallon"])
def test_column_names_a_query_can_use_pass(name: str) -> None:
    assert validate_table(pl.DataFrame({name: [1]})).columns == [name]


def test_names_equal_ignoring_case_are_refused() -> None:
    with pytest.raises(InputError, match="only in case") as error:
        validate_table(pl.DataFrame({"Price": [1], "price": [2]}))
    assert error.value.value == "price"


@pytest.mark.parametrize(
    ("column", "dtype_text"),
    [
        (pl.Series("s", [{"x": 1}]), "Struct"),
        (pl.Series("d", [dt.date(2024, 1, 1)]), "Date"),
        (pl.Series("l", [[1, 2]]), "List(Int64)"),
    ],
)
def test_unsupported_types_name_the_column_and_type(column: pl.Series, dtype_text: str) -> None:
    with pytest.raises(InputError, match="unsupported column type") as error:
        validate_table(pl.DataFrame([pl.Series("ok", [1]), column]))
    assert error.value.field == f"table.{column.name}"
    assert dtype_text in error.value.value


def test_a_table_without_rows_is_refused() -> None:
    with pytest.raises(InputError, match="no rows") as error:
        validate_table(PRODUCTS.clear())
    assert error.value.field == "table.rows"


def test_duplicate_keys_name_the_first_value_and_its_rows() -> None:
    frame = pl.DataFrame({"id": ["a", "b", "c", "b", "a", "b"], "x": range(6)})
    with pytest.raises(InputError, match=r"rows 0, 4 \(positions from 0\)") as error:
        validate_table(frame, key="id")
    assert (error.value.field, error.value.value) == ("table.id", "a")


def test_a_null_key_names_its_row() -> None:
    with pytest.raises(InputError, match=r"every row \(row 2,") as error:
        validate_table(pl.DataFrame({"id": [1, 2, None]}), key="id")
    assert error.value.field == "table.id"


@pytest.mark.parametrize(
    ("key", "rule"), [("nope", "column not found"), ("price", "the key column is float")]
)
def test_a_key_must_be_a_string_or_integer_column(key: str, rule: str) -> None:
    with pytest.raises(InputError, match=rule) as error:
        validate_table(PRODUCTS, key=key)
    assert (error.value.field, error.value.value) == ("key", key)


@pytest.mark.parametrize(
    ("column", "rule"),
    [("nope", "'nope' not found"), ("price", "is float; a link column holds string or integer")],
)
def test_a_link_column_must_be_a_string_or_integer_column(column: str, rule: str) -> None:
    with pytest.raises(InputError, match=rule) as error:
        validate_table(PRODUCTS, links={column: "other"})
    assert (error.value.field, error.value.value) == ("links", f"{column}=other")


def test_integers_beyond_int64_are_refused() -> None:
    frame = pl.DataFrame({"big": pl.Series([2**63], dtype=pl.UInt64)})
    with pytest.raises(InputError, match="64 signed bits") as error:
        validate_table(frame)
    assert error.value.field == "table.big"


def test_the_version_sees_values_order_key_and_links_but_not_chunks_or_widths() -> None:
    base = table_version(PRODUCTS, key="sku")
    assert len(base) == 64 and int(base, 16) >= 0
    chunked = pl.concat([PRODUCTS.head(2), PRODUCTS.tail(3)], rechunk=False)
    assert chunked.n_chunks() == 2
    assert table_version(chunked, key="sku") == base
    narrow = PRODUCTS.with_columns(pl.col("units").cast(pl.Int32))
    assert table_version(narrow, key="sku") == base
    changed = [
        table_version(PRODUCTS.reverse(), key="sku"),
        table_version(PRODUCTS.with_columns(pl.col("price") + 0.01), key="sku"),
        table_version(PRODUCTS.rename({"units": "qty"}), key="sku"),
        table_version(PRODUCTS, key=None),
        table_version(PRODUCTS, key="sku", links={"category": "categories"}),
    ]
    assert len({base, *changed}) == 6


def test_the_version_is_the_same_in_another_process(tmp_path: Path) -> None:
    PRODUCTS.write_parquet(tmp_path / "p.parquet")
    code = (
        "import sys, polars as pl\n"
        "from eval_pipelines.core.queries.table_schema import table_version\n"
        f"frame = pl.read_parquet({str(tmp_path / 'p.parquet')!r})\n"
        "print(table_version(frame, key='sku', links={'category': 'categories'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == table_version(
        PRODUCTS, key="sku", links={"category": "categories"}
    )
