"""Partitions: one dynamic key per evaluation (e.g. ``icd10cm-e0007-s7``, carrying the seed)."""

import dagster as dg

EVALUATIONS = "evaluations"

evaluations_partitions = dg.DynamicPartitionsDefinition(name=EVALUATIONS)
