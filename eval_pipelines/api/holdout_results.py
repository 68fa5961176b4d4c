"""What a holdout evaluation holds once complete: its per-record rows; and the case's
evaluations, listed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipelines.api._holdout_state import KIND, REPORT_ASSET, own_evaluation
from eval_pipelines.api._shared import resolve_warehouse, stored_by_a_succeeded_step
from eval_pipelines.core.errors import ConflictError, InputError
from eval_pipelines.core.results import JsonResult
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import holdout_evaluations as holdout_evaluations_store
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, connect


@dataclass(frozen=True)
class EvalRow(JsonResult):
    """One sampled record as one variant classified it (:func:`eval_rows`): correctness per
    level (``correct``: depth -> right), the record's cluster, the route, the candidates and
    the memo entries applied."""

    record_key: str
    cluster: int
    variant: str
    label: str
    prediction: str | None
    confidence: float
    route: str
    correct: Mapping[str, bool]
    candidates: tuple[dict[str, Any], ...]
    effective_candidates: int
    memo_applied: tuple[str, ...]
    error: str | None


@dataclass(frozen=True)
class EvalSummary(JsonResult):
    """One evaluation of a case (:func:`list_evals`)."""

    eval_id: str
    kind: str
    created_at: str
    seed: int
    sample_size: int
    grouping: dict[str, Any]
    variants: tuple[str, ...]
    records_version: str
    memo_version: str
    complete: bool


def eval_rows(
    case_id: str,
    eval_id: str,
    *,
    variant: str | None = None,
    errors_only: bool = False,
    warehouse: Path | str | None = None,
) -> list[EvalRow]:
    """One row per sampled record and variant, with correctness per level and the record's
    cluster (records held out together share one; the paired intervals resample clusters),
    so every figure of the report can be recomputed from the rows.

    ``errors_only`` keeps the rows that are not right at every target depth (wrong, declined
    or failed).
    """
    from eval_pipelines.stages.holdout_report import evaluation_clusters, variant_outcomes

    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        own_evaluation(conn, case_id, eval_id)
        if not holdout_evaluations_store.has_report(conn, eval_id):
            raise ConflictError(
                f"evalId={eval_id!r}: not complete yet; rows exist once the report does "
                f"(eval-pipelines eval status {case_id} {eval_id} --wait)"
            )
        spec, tree, outcomes = variant_outcomes(conn, eval_id)
        clusters = evaluation_clusters(conn, eval_id)
    names = [v.name for v in spec.variants]
    if variant is not None and variant not in names:
        raise InputError("variant", variant, f"is not a variant of {eval_id}: {names}")
    rows = []
    for name in names:
        if variant is not None and name != variant:
            continue
        for record in outcomes[name].iter_rows(named=True):
            correct = {
                str(level.depth): record[f"right_{level.depth}"]
                for level in tree.levels
                if record[f"right_{level.depth}"] is not None
            }
            if errors_only and all(correct.get(str(d), True) for d in spec.target_depth):
                continue
            rows.append(
                EvalRow(
                    record_key=record["record_key"],
                    cluster=clusters[record["record_key"]],
                    variant=name,
                    label=record["label"],
                    prediction=record["code"],
                    confidence=record["confidence"],
                    route=record["route"],
                    correct=correct,
                    candidates=tuple(json.loads(record["candidates"])),
                    effective_candidates=record["effective_candidates"],
                    memo_applied=tuple(json.loads(record["memo_applied"])),
                    error=record["error"],
                )
            )
    return rows


def list_evals(case_id: str, *, warehouse: Path | str | None = None) -> list[EvalSummary]:
    """The case's evaluations, oldest first: id, kind, seed, sample size, grouping, versions,
    whether a report exists."""
    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        cases_store.load_case(conn, case_id)
        frame = holdout_evaluations_store.list_evaluations(conn, case_id)
    instance = None
    if frame["has_report"].any():
        from eval_pipelines.runs.instance import dagster_instance

        instance = dagster_instance()
    listed = []
    for row in frame.iter_rows(named=True):
        spec = json.loads(row["spec_json"])
        listed.append(
            EvalSummary(
                eval_id=row["eval_id"],
                kind=row["kind"] or KIND,
                created_at=str(row["created_at"]),
                seed=row["seed"],
                sample_size=spec["sampleSize"],
                grouping=spec["grouping"],
                variants=tuple(v["name"] for v in spec["variants"]),
                records_version=spec["recordsVersion"],
                memo_version=spec["memoVersion"],
                complete=bool(row["has_report"])
                and stored_by_a_succeeded_step(instance, row["report_run_id"], REPORT_ASSET),
            )
        )
    return listed
