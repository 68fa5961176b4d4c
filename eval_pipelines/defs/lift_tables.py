"""Column schemas of the DuckDB tables behind the live-lift assets (checked against the
migrated warehouse by a test, like the holdout and golden ones)."""

from eval_pipelines.defs.holdout_tables import table_schema

LIFT_DAY_CELLS_SCHEMA = table_schema(
    ("day", "DATE", "the partition: the UTC day of the rows"),
    ("workspace_id", "VARCHAR", "cell: workspace"),
    ("claim_type", "VARCHAR", "cell: claim type"),
    ("situation_class", "VARCHAR", "cell: situation class"),
    ("exposure_arm", "VARCHAR", "cell: exposure arm (never pooled)"),
    ("source", "VARCHAR", "cell: declared, inferred or imported"),
    ("exposure_epoch", "VARCHAR", "the epoch the rows were stamped with"),
    ("total", "BIGINT", "rows"),
    ("resolved", "BIGINT", "rows with an outcome"),
    ("successes", "BIGINT", "resolved rows whose outcome is true"),
    ("censored", "BIGINT", "rows still unresolved (always reported)"),
    ("clusters", "BIGINT", "distinct cluster tokens"),
)
LIFT_CLAIMS_SCHEMA = table_schema(
    ("claim_id", "VARCHAR", "workspace/claim type/epoch/candidate"),
    ("workspace_id", "VARCHAR", "scope: workspace"),
    ("claim_type", "VARCHAR", "scope: claim type"),
    ("epoch", "VARCHAR", "the one epoch compared"),
    ("candidate", "VARCHAR", "the lever the treated arm was served"),
    ("status", "VARCHAR", "open, confirmed, parked or invalidated"),
    ("reason", "VARCHAR", "why parked or invalidated (stale_head, app_config_changed, ...)"),
    ("verdict", "VARCHAR", "superior, not_established, inferior, parked, insufficient_evidence"),
    ("estimate", "DOUBLE", "treated minus lever_holdout success rate"),
    ("low", "DOUBLE", "always-valid 95% interval (confidence sequence), lower bound"),
    ("high", "DOUBLE", "upper bound"),
    ("mde", "DOUBLE", "minimum detectable effect (a power diagnostic)"),
    ("n_treated", "BIGINT", "resolved treated rows"),
    ("n_control", "BIGINT", "resolved lever_holdout rows"),
    ("clusters_treated", "BIGINT", "treated clusters"),
    ("clusters_control", "BIGINT", "lever_holdout clusters"),
    ("aa_json", "VARCHAR", "the A/A check"),
    ("baseline_head", "VARCHAR", "the baseline the confirmation is bound to"),
    ("app_config", "VARCHAR", "the application config it is bound to"),
    ("offline_json", "VARCHAR", "the offline screening of the same candidate, beside"),
    ("lift_json", "VARCHAR", "the full lift result"),
    ("opened_at", "TIMESTAMP", "first reported (UTC)"),
    ("updated_at", "TIMESTAMP", "last reported (UTC)"),
    (
        "cost_json",
        "VARCHAR",
        "the cost bar: the intent and frozen cost bound stored when the claim opened, and its "
        "cost verdict (no number when ineligible)",
    ),
)
