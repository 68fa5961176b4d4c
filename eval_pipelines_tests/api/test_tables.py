"""Data tables through the API: every format, versions kept, refusals that write nothing, and
what a query's ``from`` reads (a table, or a case's records)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from eval_pipelines import api
from eval_pipelines.core.errors import InputError, NotFoundError
from eval_pipelines.demo.tables import write_cars
from eval_pipelines.storage import data_tables as data_tables_store
from eval_pipelines.storage.warehouse import connect

# Keys out of order: a table's rows keep the file's order.
PRODUCTS = pl.DataFrame(
    {
        "sku": ["p3", "p1", "p2", "p5", "p4"],
        "pet_type": ["cat", "dog", "dog", "fish", "cat"],
        "price": [2.5, 1.0, 4.25, None, 3.0],
        "in_stock": [True, False, None, True, False],
    }
)
ORDERS = pl.DataFrame({"order_id": [10, 11, 12], "product": ["p1", "p4", "p1"], "units": [1, 5, 2]})


def _write_json_array(frame: pl.DataFrame, path: Path) -> None:
    path.write_text(json.dumps(frame.to_dicts()), encoding="utf-8")


WRITERS: dict[str, Callable[[pl.DataFrame, Path], None]] = {
    "parquet": lambda frame, path: frame.write_parquet(path),
    "csv": lambda frame, path: frame.write_csv(path),
    "jsonl": lambda frame, path: frame.write_ndjson(path),
    "ndjson": lambda frame, path: frame.write_ndjson(path),
    "json": _write_json_array,
}


def write(frame: pl.DataFrame, path: Path) -> Path:
    WRITERS[path.suffix.lstrip(".")](frame, path)
    return path


def stored(warehouse: Path) -> dict[str, Any] | None:
    """What the warehouse holds of data tables (None: no warehouse file at all)."""
    if not warehouse.exists():
        return None
    conn = duckdb.connect(str(warehouse), read_only=True)
    try:
        versions = conn.execute("SELECT name, version FROM data_tables ORDER BY ALL").fetchall()
        heads = conn.execute("SELECT name, version FROM data_table_heads ORDER BY ALL").fetchall()
        storage = conn.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_name LIKE 'data_rows_%' ORDER BY ALL"
        ).fetchall()
    finally:
        conn.close()
    return {"versions": versions, "heads": heads, "storage": storage}


def read(name: str, version: str | None = None) -> pl.DataFrame:
    with connect(Path("warehouse.duckdb"), read_only=True) as conn:
        return data_tables_store.read_table(conn, name, version)


@pytest.mark.parametrize("suffix", sorted(WRITERS))
def test_every_format_loads_and_reads_back_in_file_order(workdir: Path, suffix: str) -> None:
    loaded = api.load_table("products", write(PRODUCTS, workdir / f"products.{suffix}"), key="sku")
    assert loaded.new is True and loaded.rows == 5 and loaded.key == "sku"
    assert loaded.to_json()["columns"] == [
        {"name": "sku", "kind": "string"},
        {"name": "pet_type", "kind": "string"},
        {"name": "price", "kind": "float"},
        {"name": "in_stock", "kind": "boolean"},
    ]
    assert read("products").equals(PRODUCTS)
    state = stored(workdir / "warehouse.duckdb")
    assert state is not None
    assert state["storage"] == [(f"data_rows_{loaded.version[:16]}",)]


def test_identical_content_reuses_its_version_and_every_version_is_kept(workdir: Path) -> None:
    first = api.load_table("products", write(PRODUCTS, workdir / "a.parquet"), key="sku")
    again = api.load_table("products", write(PRODUCTS, workdir / "a.csv"), key="sku")
    assert (again.version, again.new) == (first.version, False)
    changed = PRODUCTS.with_columns(pl.col("price").fill_null(9.5))
    second = api.load_table("products", write(changed, workdir / "b.parquet"), key="sku")
    assert second.new is True and second.version != first.version
    assert read("products").equals(changed)  # the head moved
    assert read("products", first.version).equals(PRODUCTS)  # the old version is kept
    assert read("products", first.version[:12]).equals(PRODUCTS)  # a prefix will do
    reordered = api.load_table("products", write(PRODUCTS.reverse(), workdir / "c.jsonl"))
    assert reordered.version not in (first.version, second.version)  # order counts
    back = api.load_table("products", workdir / "a.parquet", key="sku")
    assert (back.version, back.new) == (first.version, False)
    shown = api.show_table("products", limit=2)
    assert shown.version == first.version and shown.current is True
    assert [v.version for v in shown.versions] == [
        first.version,
        second.version,
        reordered.version,
    ]
    assert [v.current for v in shown.versions] == [True, False, False]
    assert list(shown.first_rows) == PRODUCTS.head(2).to_dicts()
    old = api.show_table("products", version=second.version[:10])
    assert old.current is False and old.rows == 5
    state = stored(workdir / "warehouse.duckdb")
    assert state is not None and len(state["versions"]) == 3 and len(state["storage"]) == 3


def test_links_name_a_keyed_table(workdir: Path) -> None:
    api.load_table("products", write(PRODUCTS, workdir / "p.parquet"), key="sku")
    orders = api.load_table(
        "orders",
        write(ORDERS, workdir / "o.csv"),
        key="order_id",
        links={"product": "products"},
    )
    assert orders.links == {"product": "products"}
    listed = api.list_tables()
    assert [(t.name, t.key, t.links) for t in listed] == [
        ("orders", "order_id", {"product": "products"}),
        ("products", "sku", {}),
    ]
    with connect(workdir / "warehouse.duckdb", read_only=True) as conn:
        source = data_tables_store.read_source(conn, "orders")
    assert (source.kind, source.version, source.key) == ("table", orders.version, "order_id")
    assert dict(source.links) == {"product": "products"}
    assert source.frame.equals(ORDERS)


def test_a_table_may_link_to_itself(workdir: Path) -> None:
    staff = pl.DataFrame({"id": [1, 2, 3], "manager": [None, 1, 1]})
    loaded = api.load_table(
        "staff", write(staff, workdir / "s.parquet"), key="id", links={"manager": "staff"}
    )
    assert loaded.links == {"manager": "staff"}


BAD_FILES = [
    ("Products", PRODUCTS, {}, "table", "a table name is"),
    ("p", PRODUCTS.rename({"price": "unit price"}), {}, "table.columns", "must match"),
    ("p", PRODUCTS.rename({"price": "__price"}), {}, "table.columns", "must match"),
    ("p", PRODUCTS.with_columns(s=pl.struct("price")), {}, "table.s", "unsupported"),
    ("p", PRODUCTS.clear(), {}, "table.rows", "no rows"),
    ("p", PRODUCTS.with_columns(sku=pl.lit("x")), {"key": "sku"}, "table.sku", "unique"),
    ("p", PRODUCTS, {"key": "price"}, "key", "strings or integers"),
    ("p", PRODUCTS, {"key": "nope"}, "key", "not found"),
    ("p", PRODUCTS, {"links": {"price": "other"}}, "links", "is float"),
    ("p", PRODUCTS, {"links": {"pet_type": "pets"}}, "links", "no table named 'pets'"),
    ("p", PRODUCTS, {"links": {"pet_type": "Pets"}}, "links", "a table name is"),
]


@pytest.mark.parametrize(("name", "frame", "kwargs", "field", "rule"), BAD_FILES)
def test_refusals_name_the_field_and_write_nothing(
    workdir: Path, name: str, frame: pl.DataFrame, kwargs: dict, field: str, rule: str
) -> None:
    warehouse = workdir / "warehouse.duckdb"
    path = write(frame, workdir / "bad.parquet")
    with pytest.raises(InputError, match=rule) as error:
        api.load_table(name, path, **kwargs)
    assert error.value.field == field
    assert not warehouse.exists()  # refused before any write: not even an empty warehouse
    # The same refusals against a warehouse that holds a table leave it as it was.
    api.load_table("kept", write(PRODUCTS, workdir / "kept.parquet"))
    before = stored(warehouse)
    with pytest.raises(InputError, match=rule):
        api.load_table(name, path, **kwargs)
    assert stored(warehouse) == before


@pytest.mark.parametrize(
    ("suffix", "content", "rule"),
    [("xlsx", b"PK", "unsupported file type"), ("csv", b"", "the file is empty")],
)
def test_unreadable_files_write_nothing(
    workdir: Path, suffix: str, content: bytes, rule: str
) -> None:
    path = workdir / f"t.{suffix}"
    path.write_bytes(content)
    with pytest.raises(InputError, match=rule) as error:
        api.load_table("t", path)
    assert error.value.field == "path"
    assert not (workdir / "warehouse.duckdb").exists()


@pytest.mark.parametrize(
    ("target", "rule"),
    [
        ("plain", "table 'plain' has no key column"),
        ("numbered", "'product' is string but numbered.n \\(the key\\) is integer"),
        ("ghost", "no table named 'ghost'"),
    ],
)
def test_a_link_to_a_keyless_table_or_another_key_kind_writes_nothing(
    workdir: Path, target: str, rule: str
) -> None:
    api.load_table("plain", write(PRODUCTS, workdir / "plain.parquet"))
    api.load_table("numbered", write(pl.DataFrame({"n": [1, 2]}), workdir / "n.csv"), key="n")
    before = stored(workdir / "warehouse.duckdb")
    with pytest.raises(InputError, match=rule) as error:
        api.load_table("orders", write(ORDERS, workdir / "o.parquet"), links={"product": target})
    assert (error.value.field, error.value.value) == ("links", f"product={target}")
    assert stored(workdir / "warehouse.duckdb") == before


def test_a_name_a_case_has_is_refused_and_writes_nothing(workdir: Path, small_case: str) -> None:
    before = stored(workdir / "warehouse.duckdb")
    assert before == {"versions": [], "heads": [], "storage": []}
    with pytest.raises(InputError, match="a case has this name") as error:
        api.load_table(small_case, write(PRODUCTS, workdir / "p.parquet"))
    assert (error.value.field, error.value.value) == ("table", small_case)
    assert stored(workdir / "warehouse.duckdb") == before


def test_a_case_reads_as_a_table_of_its_records(workdir: Path, small_case: str) -> None:
    with connect(workdir / "warehouse.duckdb", read_only=True) as conn:
        source = data_tables_store.read_source(conn, small_case)
        records_version = conn.execute(
            "SELECT records_version FROM cases WHERE case_id = ?", [small_case]
        ).fetchone()
    assert records_version is not None
    assert (source.kind, source.version, source.key) == ("case", records_version[0], "record_key")
    assert source.n_rows == 3049
    assert source.frame.columns == [
        "record_key",
        "text",
        "label",
        "base_code",
        "block",
        "category",
        "chapter",
        "group_key",
        "parent",
        "source",
        "variant_family",
    ]
    assert all(dtype == pl.String for dtype in source.frame.dtypes)
    keys = source.frame.get_column("record_key")
    assert keys.is_sorted() and keys.n_unique() == 3049
    assert set(source.frame.get_column("chapter").unique()) == {"3", "8", "10", "16"}


def test_a_table_is_read_before_a_case_and_unknown_names_are_not_found(workdir: Path) -> None:
    api.load_table("products", write(PRODUCTS, workdir / "p.parquet"), key="sku")
    with connect(workdir / "warehouse.duckdb", read_only=True) as conn:
        assert data_tables_store.read_source(conn, "products").kind == "table"
        with pytest.raises(NotFoundError, match="no table or case named 'nope'; .*table list"):
            data_tables_store.read_source(conn, "nope")
    with pytest.raises(NotFoundError, match="no table named 'nope'"):
        api.show_table("nope")


def test_listing_and_showing_before_the_warehouse_exists(workdir: Path) -> None:
    assert api.list_tables() == ()
    with pytest.raises(NotFoundError, match="does not exist yet"):
        api.show_table("cars")
    assert not (workdir / "warehouse.duckdb").exists()


def test_the_demo_cars_table_loads(workdir: Path) -> None:
    path, rows = write_cars(workdir / "demo")
    assert (path.name, rows) == ("cars.parquet", 406)
    loaded = api.load_table("cars", path)
    assert loaded.rows == 406
    assert loaded.to_json()["columns"] == [
        {"name": "Name", "kind": "string"},
        {"name": "Miles_per_Gallon", "kind": "float"},
        {"name": "Cylinders", "kind": "integer"},
        {"name": "Displacement", "kind": "float"},
        {"name": "Horsepower", "kind": "integer"},
        {"name": "Weight_in_lbs", "kind": "integer"},
        {"name": "Acceleration", "kind": "float"},
        {"name": "Year", "kind": "integer"},
        {"name": "Origin", "kind": "string"},
    ]
    cars = read("cars")
    assert cars.row(0, named=True) == {
        "Name": "chevrolet chevelle malibu",
        "Miles_per_Gallon": 18.0,
        "Cylinders": 8,
        "Displacement": 307.0,
        "Horsepower": 130,
        "Weight_in_lbs": 3504,
        "Acceleration": 12.0,
        "Year": 1970,
        "Origin": "USA",
    }
    assert (cars["Year"].min(), cars["Year"].max()) == (1970, 1982)
    assert set(cars["Origin"]) == {"USA", "Europe", "Japan"}
    assert cars["Miles_per_Gallon"].null_count() == 8  # as in the source file


def test_two_names_with_equal_content_share_their_rows(workdir: Path) -> None:
    path = write(PRODUCTS, workdir / "p.parquet")
    a = api.load_table("shop_a", path, key="sku")
    b = api.load_table("shop_b", path, key="sku")
    assert a.version == b.version and b.new is True  # new for shop_b
    state = stored(workdir / "warehouse.duckdb")
    assert state is not None and len(state["versions"]) == 2 and len(state["storage"]) == 1
    assert read("shop_a").equals(read("shop_b"))
