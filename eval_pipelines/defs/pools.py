"""The concurrency pool of the steps that open the warehouse, and its limit.

The definitions put those steps in the pool; the instance setup
(:mod:`eval_pipelines.runs.instance`) gives the pool its limit in the instance's storage.
"""

from eval_pipelines.settings import WarehouseLocation, single_writer

DUCKDB_POOL = "duckdb"
# One at a time: DuckDB lets one process at a time open the file for writing.
DUCKDB_POOL_LIMIT = 1
# A warehouse in PostgreSQL takes writers from several machines at once; the limit only keeps
# the connections they open well under PostgreSQL's default max_connections (100), beside the
# Dagster instance's own: eight steps, two machines running four evaluations each.
SHARED_WAREHOUSE_POOL_LIMIT = 8


def pool_limit(warehouse: WarehouseLocation) -> int:
    """The pool's limit for a warehouse: one for a DuckDB file (:func:`single_writer`),
    :data:`SHARED_WAREHOUSE_POOL_LIMIT` for PostgreSQL."""
    return DUCKDB_POOL_LIMIT if single_writer(warehouse) else SHARED_WAREHOUSE_POOL_LIMIT
