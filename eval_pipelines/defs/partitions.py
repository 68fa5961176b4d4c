"""Partitions: one dynamic key per evaluation (e.g. ``icd10cm-e0007-s7``, carrying the seed)
and one per case (its evidence index)."""

import dagster as dg

EVALUATIONS = "evaluations"

evaluations_partitions = dg.DynamicPartitionsDefinition(name=EVALUATIONS)

CASES = "cases"

cases_partitions = dg.DynamicPartitionsDefinition(name=CASES)
