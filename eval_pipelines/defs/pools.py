"""The concurrency pool of the steps that open the warehouse, and its limit.

The definitions put those steps in the pool; the instance setup
(:mod:`eval_pipelines.runs.instance`) gives the pool its limit in the instance's storage.
"""

DUCKDB_POOL = "duckdb"
# One at a time: DuckDB lets one process at a time open the file for writing.
DUCKDB_POOL_LIMIT = 1
# A warehouse in PostgreSQL takes writers from several machines at once; the limit only keeps
# the connections they open well under PostgreSQL's default max_connections (100), beside the
# Dagster instance's own: eight steps, two machines running four evaluations each.
SHARED_WAREHOUSE_POOL_LIMIT = 8
SHARED_WAREHOUSE_PREFIXES = ("postgresql://", "postgres://")


def pool_limit(warehouse: str) -> int:
    """The pool's limit for the warehouse setting (``EVAL_PIPELINES_WAREHOUSE``): one for a
    DuckDB file, :data:`SHARED_WAREHOUSE_POOL_LIMIT` for a PostgreSQL URL."""
    if warehouse.startswith(SHARED_WAREHOUSE_PREFIXES):
        return SHARED_WAREHOUSE_POOL_LIMIT
    return DUCKDB_POOL_LIMIT
