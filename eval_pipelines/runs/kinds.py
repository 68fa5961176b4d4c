"""The kinds of run (holdout, golden, query, lift ingest, lift report, the ANN index): how
each maps onto a Dagster job and its dynamic partitions."""

from __future__ import annotations

from dataclasses import dataclass

from dagster import DagsterInstance

from eval_pipelines.defs.partitions import (
    CASES,
    HOLDOUT_EVALUATIONS,
    QUERY_EVALUATIONS,
    WORKFLOW_REVISIONS,
)


@dataclass(frozen=True)
class EvaluationKind:
    """How one kind of run maps onto Dagster: its job and its dynamic partitions (none for
    the lift jobs: a lift ingest is one file, a lift report covers every day)."""

    name: str
    job_name: str
    partitions: str | None


KINDS = {
    "holdout": EvaluationKind("holdout", "holdout_eval", HOLDOUT_EVALUATIONS),
    "golden": EvaluationKind("golden", "golden_gate", WORKFLOW_REVISIONS),
    "query": EvaluationKind("query", "evaluate_query_job", QUERY_EVALUATIONS),
    "lift_ingest": EvaluationKind("lift_ingest", "lift_ingest_job", None),
    "lift_report": EvaluationKind("lift_report", "lift_report_job", None),
    # Not an evaluation: the ANN index of a case's embeddings, built by `case embed`.
    "embedding_index": EvaluationKind("embedding_index", "embedding_index", CASES),
}


def kind_of(name: str) -> EvaluationKind:
    return KINDS[name]


def register_partition(
    instance: DagsterInstance, kind: EvaluationKind, eval_id: str | None
) -> None:
    """Add the evaluation's key to its kind's dynamic partitions (idempotent)."""
    if kind.partitions is None or eval_id is None:
        return
    if not instance.has_dynamic_partition(kind.partitions, eval_id):
        instance.add_dynamic_partitions(kind.partitions, [eval_id])


def prune_partitions(instance: DagsterInstance, kind: EvaluationKind, keep: set[str]) -> list[str]:
    """Delete the kind's partition keys that name no registered evaluation (added by hand in
    the UI); returns them."""
    if kind.partitions is None:
        return []
    stray = [key for key in instance.get_dynamic_partitions(kind.partitions) if key not in keep]
    for key in stray:
        instance.delete_dynamic_partition(kind.partitions, key)
    return stray
