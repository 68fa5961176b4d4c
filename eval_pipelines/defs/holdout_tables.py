"""Column schemas of the DuckDB tables behind the holdout assets, shown on each asset's page.

A test compares every schema here with the warehouse's own columns, so they cannot drift from
the migrations.
"""

from typing import Any

import dagster as dg


def table_schema(*columns: tuple[str, str, str]) -> dg.TableSchema:
    return dg.TableSchema(
        columns=[dg.TableColumn(name, kind, description=text) for name, kind, text in columns]
    )


def table_metadata(table: str, schema: dg.TableSchema) -> dict[str, Any]:
    """Definition metadata naming the table and its columns."""
    return {"dagster/table_name": f"warehouse.main.{table}", "dagster/column_schema": schema}


EVALUATIONS_SCHEMA = table_schema(
    ("eval_id", "VARCHAR", "evaluation id and partition key: case, sequence, seed"),
    ("case_id", "VARCHAR", "the case evaluated"),
    ("sequence", "BIGINT", "the case's evaluation number"),
    ("seed", "BIGINT", "sampling seed"),
    ("spec_json", "VARCHAR", "the validated spec, pinned versions and memo snapshot"),
    ("run_id", "VARCHAR", "the run launched last by the CLI or API"),
    ("created_at", "TIMESTAMP", "registration time (UTC)"),
    ("kind", "VARCHAR", "evaluation kind: holdout"),
)
HOLDOUT_SAMPLES_SCHEMA = table_schema(
    ("eval_id", "VARCHAR", "evaluation id"),
    ("position", "INTEGER", "draw order"),
    ("record_key", "VARCHAR", "sampled record"),
    ("sample_hash", "VARCHAR", "hash of the sorted sampled keys"),
    ("requested_size", "INTEGER", "sample size asked for"),
)
CANDIDATES_SCHEMA = table_schema(
    ("eval_id", "VARCHAR", "evaluation id"),
    ("sample_key", "VARCHAR", "sampled record"),
    ("rank", "INTEGER", "1 = most similar"),
    ("evidence_key", "VARCHAR", "retrieved record, never on the sampled record's leave-out list"),
    ("similarity", "FLOAT", "cosine similarity in the retrieval's space"),
    ("retrieval", "VARCHAR", "space:backend that found it, e.g. tfidf:exact"),
)
LEAVE_OUT_SCHEMA = table_schema(
    ("eval_id", "VARCHAR", "evaluation id"),
    ("sample_key", "VARCHAR", "sampled record"),
    ("excluded_key", "VARCHAR", "record held out of its evidence"),
    ("reason", "VARCHAR", "self or group"),
)
PREDICTIONS_SCHEMA = table_schema(
    ("eval_id", "VARCHAR", "evaluation id"),
    ("variant", "VARCHAR", "variant name"),
    ("record_key", "VARCHAR", "sampled record"),
    ("code", "VARCHAR", "predicted code, possibly partial; null when declined"),
    ("confidence", "DOUBLE", "support at the shallowest target depth; routing uses it"),
    ("route", "VARCHAR", "auto, review or declined"),
    ("candidates", "VARCHAR", "JSON list of {code, score, votes}"),
    ("requested_candidates", "INTEGER", "evidence records the variant asked for"),
    ("effective_candidates", "INTEGER", "evidence records retrieval supplied"),
    ("memo_applied", "VARCHAR", "JSON list of memo entry ids that fired"),
    ("error", "VARCHAR", "why the row failed, if it did"),
    ("tokens", "BIGINT", "tokens used (0 for the built-in classifier)"),
    ("input_tokens", "BIGINT", "input tokens of the scored invocation; null before 0017"),
    ("output_tokens", "BIGINT", "output tokens of the scored invocation; null before 0017"),
)
VARIANT_LEVEL_SCORES_SCHEMA = table_schema(
    ("eval_id", "VARCHAR", "evaluation id"),
    ("variant", "VARCHAR", "variant name"),
    ("position", "INTEGER", "variant order; 0 is the baseline"),
    ("depth", "INTEGER", "tree level, 1 = top"),
    ("level_name", "VARCHAR", "readable level name"),
    ("is_target", "BOOLEAN", "a target depth of the evaluation"),
    ("n", "INTEGER", "records whose label reaches the level"),
    ("right_count", "INTEGER", "right at this level"),
    ("accuracy", "DOUBLE", "right_count / n; null below the minimum sample"),
    ("accuracy_low", "DOUBLE", "Wilson 95% lower bound"),
    ("accuracy_high", "DOUBLE", "Wilson 95% upper bound"),
    ("declined", "INTEGER", "predictions not reaching the level"),
    ("ceiling_count", "INTEGER", "label reachable from the retrieved evidence"),
)
# The same rows as the UI table of ``variant_scores``: an estimate below the minimum sample is
# shown as ``insufficient_evidence`` (UI tables need a value in every cell), hence strings.
_DISPLAY_TYPES = {"VARCHAR": "string", "INTEGER": "int", "BOOLEAN": "bool", "DOUBLE": "string"}
VARIANT_LEVEL_SCORES_DISPLAY = dg.TableSchema(
    columns=[
        dg.TableColumn(column.name, _DISPLAY_TYPES[column.type], description=column.description)
        for column in VARIANT_LEVEL_SCORES_SCHEMA.columns
        if column.name not in ("eval_id", "position")
    ]
)
EVAL_REPORTS_SCHEMA = table_schema(
    ("eval_id", "VARCHAR", "evaluation id"),
    ("report_json", "VARCHAR", "the report as the API returns it"),
    ("markdown", "VARCHAR", "the markdown summary"),
    ("created_at", "TIMESTAMP", "when the report was written (UTC)"),
    ("run_id", "VARCHAR", "the run that wrote it"),
)


LEAKAGE_GAPS_SCHEMA = table_schema(
    ("eval_id", "VARCHAR", "evaluation id (only evaluations that asked for the leakage check)"),
    ("payload", "VARCHAR", "per level: ungrouped minus grouped baseline, interval, verdict"),
    ("created_at", "TIMESTAMP", "when it was computed (UTC)"),
)
