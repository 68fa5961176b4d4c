"""The query tests' tables and readers, shared by the API, CLI, Dagster and run-path tests of
queries (spec 003).

The table ``products`` (built by :func:`write_products`) has 100 rows: four categories in
turn (row i has category i mod 4); a name that carries its category's word, except on the rows
i = 5 mod 20, which carry the next category's (a quarter of the test rows of fold 0 of 5); three
stores, five weeks, and units that are a function of store and week. ``orders`` links to
``catalogue`` (:func:`load_linked`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg
import duckdb
import polars as pl

from eval_pipelines import settings
from eval_pipelines.core.errors import NotFoundError
from eval_pipelines.core.queries.query import parse_query
from eval_pipelines.stages import queries as stage
from eval_pipelines.storage import query_evaluations as query_evaluations_store
from eval_pipelines.storage.warehouse import connect, transaction

if TYPE_CHECKING:
    from eval_pipelines.api.queries import QueryResult, StoredQueryResult

CATEGORIES = ("tools", "food", "toys", "books")
WORDS = {"tools": "hammer", "food": "bread", "toys": "puzzle", "books": "novel"}
STORES = ("north", "south", "east")

PREDICT: dict[str, Any] = {
    "test": {"$index": {"$mod": [5, 0]}},
    "evaluate": {
        "from": "products",
        "where": {"name": {"$get": "name"}},
        "predict": "category",
    },
    "select": ["n", "accuracy", "baseAccuracy", "meanRank", "trainSamples", "testSamples"],
}
# The engine checks maxTime before each chunk of test rows (the first is one row): a limit of
# a microsecond stops it before it scores any of the 1,500 test rows of the 3,000-row table.
HURRIED_ROWS = 3000
HURRIED: dict[str, Any] = {
    "test": {"$index": {"$mod": [2, 0]}},
    "evaluate": {
        "from": "products",
        "where": {"store": {"$get": "store"}, "week": {"$get": "week"}},
        "estimate": "units",
    },
    "maxTime": 1e-6,
}
ESTIMATE: dict[str, Any] = {
    "test": {"$index": {"$mod": [5, 0]}},
    "evaluate": {
        "from": "products",
        "where": {"store": {"$get": "store"}, "week": {"$get": "week"}},
        "estimate": "units",
    },
    "select": ["n", "mae", "rmse", "baselineMae", "maeGain"],
}


def products_frame(*, rows: int = 100, shift: int = 0) -> pl.DataFrame:
    """The demo table; ``shift`` changes every unit count (another version of the data)."""
    categories = [CATEGORIES[i % 4] for i in range(rows)]
    words = [
        WORDS[CATEGORIES[(i + 1) % 4]] if i % 20 == 5 else WORDS[c]
        for i, c in enumerate(categories)
    ]
    return pl.DataFrame(
        {
            "sku": [f"p{i:03d}" for i in range(rows)],
            "name": [f"{w} model {i % 7}" for i, w in enumerate(words)],
            "category": categories,
            "store": [STORES[i % 3] for i in range(rows)],
            "week": [i % 5 for i in range(rows)],
            "units": [10 * (i % 3) + 2 * (i % 5) + shift for i in range(rows)],
        }
    )


def write_products(folder: Path, *, rows: int = 100, shift: int = 0) -> Path:
    path = folder / f"products_{rows}_{shift}.parquet"
    products_frame(rows=rows, shift=shift).write_parquet(path)
    return path


def load_products(folder: Path, *, rows: int = 100, shift: int = 0) -> str:
    """Load the demo table into the test's warehouse; returns its version."""
    from eval_pipelines import api

    path = write_products(folder, rows=rows, shift=shift)
    return api.load_table("products", path, key="sku").version


def engine_answer(query: dict[str, Any], *, folds: int | None = None) -> Any:
    """The engine's outcome on the warehouse's current data (the oracle)."""
    from eval_pipelines import settings
    from eval_pipelines.core.queries.engine import run_folds, run_query
    from eval_pipelines.core.queries.query import parse_query
    from eval_pipelines.storage import data_tables as data_tables_store
    from eval_pipelines.storage.warehouse import connect

    with connect(settings.warehouse_location(), read_only=True) as conn:
        sources = {"products": data_tables_store.read_source(conn, "products")}

    def resolve(name: str) -> Any:
        if name not in sources:
            raise NotFoundError(name)
        return sources[name]

    parsed = parse_query(query)
    if folds is None:
        return run_query(parsed, resolve)
    return run_folds(parsed, resolve, folds=folds)


def without_evaluation(result: QueryResult | StoredQueryResult) -> dict[str, Any] | None:
    """The 003 response, without what identifies it."""
    return result.response


def stored_counts() -> dict[str, int]:
    from eval_pipelines import settings

    conn = duckdb.connect(str(settings.warehouse_location()), read_only=True)
    try:
        counts = {}
        for table in ("query_evaluations", "query_results"):
            row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            assert row is not None
            counts[table] = int(row[0])
        return counts
    finally:
        conn.close()


def query_runs() -> list[dg.DagsterRun]:
    from eval_pipelines import runs
    from eval_pipelines.runs.instance import dagster_instance

    return list(dagster_instance().get_runs(filters=dg.RunsFilter(tags={runs.KIND_TAG: "query"})))


def partition_keys() -> list[str]:
    from eval_pipelines.defs.partitions import QUERY_EVALUATIONS
    from eval_pipelines.runs.instance import dagster_instance

    return list(dagster_instance().get_dynamic_partitions(QUERY_EVALUATIONS))


LINKED: dict[str, Any] = {
    "test": {"$index": {"$mod": [4, 0]}},
    "evaluate": {
        "from": "orders",
        "where": {"product.pet_type": {"$get": "product.pet_type"}},
        "predict": "channel",
    },
    "select": ["n", "accuracy"],
}


def load_linked(folder: Path, *, constant: bool = False) -> str:
    """``orders`` linked to ``catalogue`` (cat -> web, dog -> shop); ``constant`` reloads the
    catalogue with one pet type for every product. Returns the catalogue's version."""
    from eval_pipelines import api

    pet_types = ["cat"] * 3 if constant else ["cat", "dog", "cat"]
    catalogue = folder / f"catalogue_{constant}.parquet"
    pl.DataFrame({"sku": ["s1", "s2", "s3"], "pet_type": pet_types}).write_parquet(catalogue)
    version = api.load_table("catalogue", catalogue, key="sku").version
    orders = folder / "orders.parquet"
    if not orders.exists():
        pl.DataFrame(
            {
                "product": ["s1", "s2", "s3"] * 20,
                "channel": ["web", "shop", "web"] * 20,
            }
        ).write_parquet(orders)
        api.load_table("orders", orders, links={"product": "catalogue"})
    return version


def register(query: dict[str, Any], folds: int | None = None) -> str:
    """Store the query and return its evaluation id, as the API does before its run."""
    parsed = parse_query(query)
    with connect(settings.warehouse_location()) as conn, transaction(conn):
        pinned = stage.pin_sources(conn, parsed)
        eval_id = stage.evaluation_id(parsed.document, pinned, folds)
        query_evaluations_store.insert_query(
            conn, query_evaluations_store.new_query(eval_id, parsed.document, folds, pinned)
        )
    return eval_id
