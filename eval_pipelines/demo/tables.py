"""Build the demo's numeric data table: ``python -m eval_pipelines.demo.tables OUT_DIR``.

Writes ``OUT_DIR/cars.parquet`` from the ``cars.json`` that the PyPI package
``vega_datasets==0.9.0`` ships (406 cars from the 1970s and early 80s; the StatLib
"auto-mpg" data, as used in the Vega examples): ``Name, Miles_per_Gallon, Cylinders,
Displacement, Horsepower, Weight_in_lbs, Acceleration, Year, Origin``, rows in the file's
order, ``Year`` as the integer year of its ``YYYY-01-01`` date string. Missing values (some
cars lack a mileage or a horsepower) stay missing.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import polars as pl

from eval_pipelines.core.queries.table_schema import read_table_file, validate_table

CARS_COLUMNS = (
    "Name",
    "Miles_per_Gallon",
    "Cylinders",
    "Displacement",
    "Horsepower",
    "Weight_in_lbs",
    "Acceleration",
    "Year",
    "Origin",
)


def vega_cars_json() -> Path:
    """``vega_datasets/_data/cars.json``, found without importing the package (its
    ``__init__`` imports pandas)."""
    spec = importlib.util.find_spec("vega_datasets")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the package vega_datasets is not installed: pip install vega_datasets==0.9.0"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "_data" / "cars.json"
        if path.exists():
            return path
    raise FileNotFoundError("vega_datasets ships no _data/cars.json")


def build_cars() -> pl.DataFrame:
    """The cars table, validated as a data table would be on load."""
    raw = read_table_file(vega_cars_json())
    cars = raw.select(CARS_COLUMNS).with_columns(
        pl.col("Year").str.slice(0, 4).cast(pl.Int64, strict=True)
    )
    return validate_table(cars)


def write_cars(out_dir: Path) -> tuple[Path, int]:
    """Write ``out_dir/cars.parquet``; returns its path and row count."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cars = build_cars()
    path = out_dir / "cars.parquet"
    cars.write_parquet(path)
    return path, cars.height


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m eval_pipelines.demo.tables OUT_DIR", file=sys.stderr)
        return 2
    path, rows = write_cars(Path(args[0]))
    print(f"{path}: {rows} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
