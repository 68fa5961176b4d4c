"""Partitions, one line each: every kind of evaluation has its own dynamic partitions, so no
asset family ever lists another family's keys as missing."""

import warnings

import dagster as dg

# Asset checks are partitioned like their assets (each evaluation and each revision shows its
# own verdict). Dagster 1.13 calls that a preview and warns at every import; it is pinned
# exactly, so the warning says nothing a user can act on.
warnings.filterwarnings(
    "ignore",
    message="Specifying a partitions_def on an AssetCheckSpec",
    category=dg.PreviewWarning,
)

# Binding resources to a sensor's op job makes Dagster 1.13 rebuild the sensor internally,
# passing its (unset) owners along, which warns that owners are a beta parameter. Nothing here
# sets sensor owners: the warning would only put a line on every CLI command's stderr.
warnings.filterwarnings(
    "ignore",
    message="Parameter `owners` of initializer `SensorDefinition.__init__`",
    category=dg.BetaWarning,
)

HOLDOUT_EVALUATIONS = "holdout_evaluations"

holdout_evaluations = dg.DynamicPartitionsDefinition(name=HOLDOUT_EVALUATIONS)
WORKFLOW_REVISIONS = "workflow_revisions"

workflow_revisions = dg.DynamicPartitionsDefinition(name=WORKFLOW_REVISIONS)
QUERY_EVALUATIONS = "query_evaluations"

query_evaluations = dg.DynamicPartitionsDefinition(name=QUERY_EVALUATIONS)
CASES = "cases"

cases = dg.DynamicPartitionsDefinition(name=CASES)
