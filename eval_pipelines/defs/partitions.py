"""Partitions, one line each: every kind of evaluation has its own dynamic partitions, so no
asset family ever lists another family's keys as missing."""

import dagster as dg

HOLDOUT_EVALUATIONS = "holdout_evaluations"

holdout_evaluations = dg.DynamicPartitionsDefinition(name=HOLDOUT_EVALUATIONS)
WORKFLOW_REVISIONS = "workflow_revisions"

workflow_revisions = dg.DynamicPartitionsDefinition(name=WORKFLOW_REVISIONS)
