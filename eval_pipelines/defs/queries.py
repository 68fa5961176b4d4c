"""Query evaluation assets (spec 003), partitioned by query evaluation.

``evaluate_query -> evaluate_result`` (+ the ``evaluate_not_truncated`` check, WARN). A
partition is one query on one version of the data it reads: ``q-`` and 12 hex digits of the
query's hash with the tables' versions.
"""

from typing import Any

import dagster as dg

from eval_pipelines.core.queries import report
from eval_pipelines.core.queries.query import parse_query
from eval_pipelines.defs.families import QUIET_CONSOLE, REFUSALS, AssetFamily, refusal, shown
from eval_pipelines.defs.holdout_tables import table_metadata, table_schema
from eval_pipelines.defs.partitions import partitioned_asset_check, query_evaluations
from eval_pipelines.defs.pools import DUCKDB_POOL
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines.defs.run_tags import KIND_TAG
from eval_pipelines.stages import queries as stage
from eval_pipelines.storage import query_evaluations as query_evaluations_store

NOT_TRUNCATED = "evaluate_not_truncated"
# Failure metadata that tells the API a refused query from a failed run.
REFUSED = "refused"
HOW_TO_CREATE = (
    "Partitions are query evaluations, created with `eval-pipelines evaluate --file "
    "QUERY.json` (or `api.run_query`), which stores the query and adds the partition. A "
    "partition added in the Materialize dialog has no query: its run fails in "
    "`evaluate_query` and says so. Materialise existing partitions freely: the result is "
    "replaced, computed on the table versions the evaluation pins."
)

QUERY_EVALUATIONS_SCHEMA = table_schema(
    ("eval_id", "VARCHAR", "evaluation id and partition key: q- and 12 hex digits"),
    ("query_json", "VARCHAR", "the validated query (spec 003)"),
    ("folds", "INTEGER", "fold count of a k-fold sweep; null: the query's own test set"),
    ("sources_json", "VARCHAR", "the tables read (links included): names, kinds, pinned versions"),
    ("created_at", "TIMESTAMP", "registration time (UTC)"),
)
QUERY_RESULTS_SCHEMA = table_schema(
    ("eval_id", "VARCHAR", "evaluation id"),
    ("run_id", "VARCHAR", "the Dagster run that wrote the result"),
    ("result_json", "VARCHAR", "the 003 response: selected metrics, cases, truncation"),
    ("metrics_json", "VARCHAR", "every scalar metric, whatever the select"),
    ("sources_json", "VARCHAR", "the tables the run read: name, kind, version, rows"),
    ("elapsed_seconds", "DOUBLE", "engine wall time"),
    ("created_at", "TIMESTAMP", "UTC"),
)


FAMILY = AssetFamily(query_evaluations, "query_evaluations", "query", HOW_TO_CREATE)


def _refusal(error: Exception) -> dg.Failure:
    """A query the run refuses reads as one sentence in the UI (and the API says so)."""
    return refusal(error, {REFUSED: type(error).__name__})


@dg.asset(
    **FAMILY.options(
        "The stored query, validated again, and the versions of the tables it reads (the run "
        "refuses when a table was reloaded since the query was submitted)."
    ),
    pool=DUCKDB_POOL,
    metadata=table_metadata("query_evaluations", QUERY_EVALUATIONS_SCHEMA),
)
def evaluate_query(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    try:
        with warehouse.connect(read_only=True) as conn:
            stored, query = stage.load_pinned_query(conn, context.partition_key)
    except REFUSALS as error:
        raise _refusal(error) from None
    return dg.MaterializeResult(
        metadata={
            "query": dg.MetadataValue.json(stored.document),
            "kind": query.kind,
            "target": query.target,
            "experiment": report.experiment_label(stored.folds, query.holdout),
            "folds": stored.folds or 0,
            "max_time_seconds": query.max_time,
            "sources": dg.MetadataValue.json([s.to_json() for s in stored.sources]),
        }
    )


@dg.asset(
    **FAMILY.options(
        "The query run against its tables (one engine pass, or the average of a k-fold "
        "sweep): every scalar metric as plotted metadata (keyed `metric @ table.target/hash`: "
        "only evaluations of the same tables, target and test rows share a plot), truncation, "
        "the sources read and a report headed by the model against its baseline. Row in "
        "`query_results`."
    ),
    deps=[evaluate_query],
    metadata=table_metadata("query_results", QUERY_RESULTS_SCHEMA),
)
def evaluate_result(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    eval_id = context.partition_key
    try:
        outcome = stage.run_stored_query(
            warehouse.connect, eval_id, run_id=context.run_id, log=context.log.info
        )
    except REFUSALS as error:
        raise _refusal(error) from None
    sources = [s.to_json() for s in outcome.sources]
    with warehouse.connect(read_only=True) as conn:
        stored = query_evaluations_store.load_query(conn, eval_id)
    query = parse_query(stored.document)
    setup = report.setup_lines(query, stored.folds)
    comparable = report.comparable_as(query, stored.folds, sources)
    setup.append(f"- comparable as `{comparable}` (plots key each metric by it)")
    # Numeric metadata is plotted across materialisations; the key carries what makes two
    # evaluations comparable, so a plot never mixes different tables, targets or test rows.
    plotted = {
        f"{name} @ {comparable}": shown(value)
        for name, value in outcome.metrics.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }
    return dg.MaterializeResult(
        metadata={
            "report": dg.MetadataValue.md(
                report.report_markdown(eval_id, outcome.metrics, outcome.result, sources, setup)
            ),
            **plotted,
            "comparable_as": comparable,
            "truncated": outcome.truncated,
            "sources": dg.MetadataValue.json(sources),
            "elapsed_seconds": round(outcome.elapsed_seconds, 3),
        }
    )


# Partitioned like its asset, so the UI shows each evaluation's own verdict (a preview feature
# in Dagster 1.13, pinned exactly).
@partitioned_asset_check(
    asset=evaluate_result, name=NOT_TRUNCATED, partitions_def=query_evaluations
)
def evaluate_not_truncated(
    context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
) -> dg.AssetCheckResult:
    """The evaluation scored every test row within maxTime (a truncated result covers only the
    rows scored before the limit)."""
    with warehouse.connect(read_only=True) as conn:
        stored = query_evaluations_store.find_result(
            conn, context.op_execution_context.partition_key
        )
    if stored is None:
        return dg.AssetCheckResult(
            passed=False, severity=dg.AssetCheckSeverity.WARN, description="no result stored"
        )
    metadata: dict[str, Any] = {"n": int(stored.metrics.get("n") or 0)}
    if stored.truncated:
        metadata["requested"] = stored.result.get("requested")
    return dg.AssetCheckResult(
        passed=not stored.truncated,
        severity=dg.AssetCheckSeverity.WARN,
        description=stored.result.get("message") if stored.truncated else None,
        metadata=metadata,
    )


query_assets = [evaluate_query, evaluate_result]
query_checks = [evaluate_not_truncated]


evaluate_query_job = dg.define_asset_job(
    "evaluate_query_job",
    selection=dg.AssetSelection.assets(*query_assets),
    tags={KIND_TAG: "query"},
    config=QUIET_CONSOLE,
    description="Evaluate one stored query (spec 003) on the table versions it pins and store "
    "its result (with the `evaluate_not_truncated` check).",
)
