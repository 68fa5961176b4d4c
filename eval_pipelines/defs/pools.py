"""The concurrency pool of the steps that open the DuckDB warehouse, and its limit.

The definitions put those steps in the pool; the instance's ``dagster.yaml``
(:mod:`eval_pipelines.runs.instance`) gives the pool its limit.
"""

DUCKDB_POOL = "duckdb"
# One at a time: DuckDB lets one process at a time open the file for writing.
DUCKDB_POOL_LIMIT = 1
