"""Column schemas of the DuckDB tables behind the golden assets, shown on each asset's page
(compared with the migrated warehouse by a test, like the holdout ones)."""

from eval_pipelines.defs.holdout_tables import table_schema

WORKFLOW_REVISIONS_SCHEMA = table_schema(
    ("revision", "VARCHAR", "content hash of the workflow's name and prepared content"),
    ("workflow", "VARCHAR", "workflow name"),
    ("kind", "VARCHAR", "extract or classify"),
    ("content", "VARCHAR", "the prepared workflow (templates folded in), JSON"),
    ("source", "VARCHAR", "cli:FILE, file:PATH (committed under data/workflows/)"),
    ("saved_by", "VARCHAR", "who saved it, when given"),
    ("saved_at", "TIMESTAMP", "first saved (UTC)"),
    ("last_saved_at", "TIMESTAMP", "last saved (UTC): the newest revision is the last saved"),
)

GOLDEN_RUNS_SCHEMA = table_schema(
    ("golden_run_id", "VARCHAR", "one set's run against one revision"),
    ("set_name", "VARCHAR", "the golden set"),
    ("workflow", "VARCHAR", "the workflow scored"),
    ("revision", "VARCHAR", "the revision scored (the partition key)"),
    ("dagster_run_id", "VARCHAR", "the Dagster run that made it"),
    ("status", "VARCHAR", "running, completed, stopped or failed"),
    ("started_at", "TIMESTAMP", "UTC"),
    ("finished_at", "TIMESTAMP", "UTC"),
    ("executed_steps", "INTEGER", "node steps executed (charged)"),
    ("cached_steps", "INTEGER", "node steps served from cache (free)"),
    ("cost_units", "DOUBLE", "cost units charged by executed steps"),
    ("threshold", "DOUBLE", "the set's pass threshold at the time"),
    ("reason", "VARCHAR", "why a run left running by a killed process was closed as failed"),
    ("model_calls", "INTEGER", "chat calls the endpoint answered now (paid); NULL: no chat node"),
    ("model_calls_from_cache", "INTEGER", "chat calls served from a cache (free)"),
    ("model_calls_failed", "INTEGER", "chat calls that got no answer"),
    ("input_tokens", "BIGINT", "input tokens the endpoint reported for the calls made now"),
    ("output_tokens", "BIGINT", "output tokens the endpoint reported for the calls made now"),
    ("model_cost", "DOUBLE", "their cost from the node's price table; NULL: unknown"),
    ("model_cost_note", "VARCHAR", "why model_cost is unknown (the model has no price)"),
)
