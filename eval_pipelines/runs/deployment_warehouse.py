"""The warehouse a team's deployment runs on, recorded in its shared instance.

The ``duckdb`` pool's limit lives in the instance's storage, shared by every machine, and each
machine sets it from its own ``EVAL_PIPELINES_WAREHOUSE`` (one writer for a DuckDB file, more
for PostgreSQL): a machine naming another warehouse would reset the limit for everyone, and
write its runs' results where the others never read them. So the first machine records which
warehouse the limit was set for (its URL without the password, or "a DuckDB file") in Dagster's
key-value store, and a machine naming another one is refused before it writes anything. Only an
instance in PostgreSQL has several machines; the local default has one user, free to switch
their warehouse between a file and a URL.
"""

from __future__ import annotations

from pathlib import Path

from dagster import DagsterInstance

from eval_pipelines.core.errors import InputError
from eval_pipelines.runs.shared_locks import WAREHOUSE_RECORD_LOCK_KEY, instance_lock
from eval_pipelines.settings import WAREHOUSE_ENV, PostgresWarehouse, WarehouseLocation

# Dagster's key-value store (run storage), under a name of the project's own.
RECORD_KEY = "eval_pipelines/deployment_warehouse"
A_DUCKDB_FILE = "a DuckDB file"
SAME_WAREHOUSE_RULE = "every machine of a deployment must name the same warehouse"


def warehouse_name(warehouse: WarehouseLocation) -> str:
    """What the record holds: a PostgreSQL warehouse's URL (never with a password), or
    :data:`A_DUCKDB_FILE` (a file's path is each machine's own)."""
    return warehouse.url if isinstance(warehouse, PostgresWarehouse) else A_DUCKDB_FILE


def claim_deployment_warehouse(
    instance: DagsterInstance, home: Path, warehouse: WarehouseLocation
) -> None:
    """Record ``warehouse`` as the deployment's when none is, or refuse it when another is.

    Raises
    ------
    InputError
        Named after ``EVAL_PIPELINES_WAREHOUSE``: the deployment's pool limit was set for
        another warehouse. Nothing is written.
    """
    name = warehouse_name(warehouse)
    # Two machines starting a new deployment at once: the second reads what the first wrote.
    with instance_lock(home, WAREHOUSE_RECORD_LOCK_KEY, wait=True):
        recorded = instance.run_storage.get_cursor_values({RECORD_KEY}).get(RECORD_KEY)
        if recorded is None:
            instance.run_storage.set_cursor_values({RECORD_KEY: name})
            return
    if recorded != name:
        raise InputError(
            WAREHOUSE_ENV,
            name,
            f"this deployment's duckdb pool limit was set for {recorded}: {SAME_WAREHOUSE_RULE}",
        )
