"""``eval-pipelines table load|list|show`` in-process: output, exit codes, one-line refusals
that write nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from eval_pipelines_tests.helpers.cli_calls import cli, refused, stored

PRODUCTS = pl.DataFrame(
    {
        "sku": ["p3", "p1", "p2"],
        "pet_type": ["cat", "dog", "dog"],
        "price": [2.5, 1.0, None],
    }
)
ORDERS = pl.DataFrame({"order_id": [10, 11], "product": ["p1", "p3"], "units": [1, 5]})


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> Any:
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def products(workdir: Path) -> Path:
    path = workdir / "products.csv"
    PRODUCTS.write_csv(path)
    return path


def test_load_list_show(workdir: Path, capsys: pytest.CaptureFixture[str], products: Path) -> None:
    code, out, err = cli(capsys, "table", "load", "products", "--file", products, "--key", "sku")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("table products: version ") and lines[0].endswith("(new version)")
    assert lines[1] == "  3 rows; columns: sku (string), pet_type (string), price (float)"
    assert lines[2] == "  key: sku; links: none"

    again = cli_json(capsys, "table", "load", "products", "--file", products, "--key", "sku")
    assert again["new"] is False and again["rows"] == 3 and again["key"] == "sku"
    assert again["columns"][2] == {"name": "price", "kind": "float"}

    ORDERS.write_parquet(workdir / "orders.parquet")
    orders = cli_json(
        capsys,
        "table",
        "load",
        "orders",
        "--file",
        workdir / "orders.parquet",
        "--key",
        "order_id",
        "--link",
        "product=products",
    )
    assert orders["links"] == {"product": "products"} and orders["new"] is True

    code, out, _ = cli(capsys, "table", "list")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == ["orders", "products"]
    assert "3 rows  3 columns  key sku" in out.splitlines()[1]
    listed = cli_json(capsys, "table", "list")
    assert [t["name"] for t in listed] == ["orders", "products"]

    code, out, _ = cli(capsys, "table", "show", "orders")
    assert code == 0
    assert out.startswith(f"table orders: version {orders['version'][:16]} (current)\n")
    assert "key: order_id; links: product -> products" in out
    assert "p3" in out  # the first rows
    shown = cli_json(capsys, "table", "show", "products", "--version", again["version"][:8])
    assert shown["firstRows"] == PRODUCTS.to_dicts()
    assert shown["versions"][0]["version"] == again["version"]


def test_a_changed_file_adds_a_version(
    workdir: Path, capsys: pytest.CaptureFixture[str], products: Path
) -> None:
    first = cli_json(capsys, "table", "load", "products", "--file", products)
    PRODUCTS.with_columns(pl.col("price").fill_null(3.0)).write_csv(products)
    code, out, _ = cli(capsys, "table", "load", "products", "--file", products)
    assert code == 0 and "(new version)" in out
    shown = cli_json(capsys, "table", "show", "products", "--version", first["version"])
    assert shown["current"] is False and shown["firstRows"][2]["price"] is None
    assert len(shown["versions"]) == 2
    assert stored(workdir / "warehouse.duckdb") == (2, 1, 2)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["table", "load", "Bad-Name", "--file", "products.csv"], "table='Bad-Name': a table"),
        (["table", "load", "p", "--file", "products.csv", "--key", "price"], "--key='price'"),
        (["table", "load", "p", "--file", "products.csv", "--key", "pet_type"], "unique"),
        (["table", "load", "p", "--file", "products.csv", "--link", "sku"], "COLUMN=TABLE"),
        (["table", "load", "p", "--file", "products.csv", "--link", "sku=pets"], "no table"),
        (["table", "load", "p", "--file", "products.csv", "--link", "price=p"], "is float"),
        (["table", "load", "p", "--file", "missing.csv"], "does not exist"),
        (["table", "load", "p", "--file", "empty.csv"], "the file is empty"),
        (["table", "load", "p", "--file", "bad_names.csv"], "table.columns='unit price'"),
        (["table", "load", "p", "--file", "nested.jsonl"], "table.dims="),
        (["table", "load", "p", "--file", "header_only.csv"], "no rows"),
        (["table", "load", "p", "--file", "products.txt"], "unsupported file type"),
        (["table", "show", "nope"], "no table named 'nope'"),
    ],
)
def test_refusals_are_one_line_exit_2_and_write_nothing(
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    products: Path,
    argv: list[str],
    message: str,
) -> None:
    (workdir / "empty.csv").write_bytes(b"")
    (workdir / "header_only.csv").write_text("a,b\n")
    (workdir / "products.txt").write_text("sku\np1\n")
    PRODUCTS.rename({"price": "unit price"}).write_csv(workdir / "bad_names.csv")
    (workdir / "nested.jsonl").write_text('{"id": 1, "dims": {"w": 2, "h": 3}}\n')
    assert message in refused(capsys, *argv)
    assert stored(workdir / "warehouse.duckdb") is None  # not even an empty warehouse
    cli_json(capsys, "table", "load", "kept", "--file", products)
    before = stored(workdir / "warehouse.duckdb")
    assert message in refused(capsys, *argv)
    assert stored(workdir / "warehouse.duckdb") == before


def test_a_case_name_is_refused(
    workdir: Path, capsys: pytest.CaptureFixture[str], small_case: str, products: Path
) -> None:
    before = stored(workdir / "warehouse.duckdb")
    reason = refused(capsys, "table", "load", small_case, "--file", products)
    assert reason.startswith(f"table={small_case!r}: a case has this name")
    assert stored(workdir / "warehouse.duckdb") == before == (0, 0, 0)


def test_list_before_any_table(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "table", "list")
    assert code == 0 and out.startswith("no tables yet")
    assert cli_json(capsys, "table", "list") == []


def test_demo_tables_writes_the_cars_table(workdir: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "eval_pipelines.demo.tables", str(workdir / "demo")],
        capture_output=True,
        text=True,
        check=True,
    )
    path = workdir / "demo" / "cars.parquet"
    assert out.stdout.strip() == f"{path}: 406 rows"
    cars = pl.read_parquet(path)
    assert cars.shape == (406, 9)
    assert cars.schema["Year"] == pl.Int64
