"""The holdout stages, Dagster-free: each reads its inputs from the warehouse, calls the core
and writes its rows back (replacing the evaluation's previous rows). The Dagster assets in
``eval_pipelines.defs`` are thin adapters over these functions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

from eval_pipelines.core.classify import (
    Evidence,
    Prediction,
    RecordToClassify,
    get_classifier,
)
from eval_pipelines.core.compare import compare_outcomes
from eval_pipelines.core.errors import ConflictError
from eval_pipelines.core.leave_out import compute_leave_out
from eval_pipelines.core.memo import MemoEntry, memo_version
from eval_pipelines.core.report import build_report, report_markdown
from eval_pipelines.core.sampling import draw_sample
from eval_pipelines.core.scoring import leave_out_summary, row_outcomes, score_variant
from eval_pipelines.core.specs import HoldoutSpec, Variant
from eval_pipelines.core.tree import CodeTree
from eval_pipelines.stages.evidence import load_or_build_index
from eval_pipelines.storage import cases, evaluations, memo
from eval_pipelines.storage.warehouse import transaction

PREDICTION_SCHEMA = {
    "variant": pl.String,
    "record_key": pl.String,
    "code": pl.String,
    "confidence": pl.Float64,
    "route": pl.String,
    "candidates": pl.String,
    "requested_candidates": pl.Int32,
    "effective_candidates": pl.Int32,
    "memo_applied": pl.String,
    "error": pl.String,
    "tokens": pl.Int64,
}


def check_spec(conn: duckdb.DuckDBPyConnection, eval_id: str) -> HoldoutSpec:
    """Load the stored spec and check the case still has the versions it pinned."""
    spec = evaluations.load_spec(conn, eval_id)
    info = cases.load_case(conn, spec.case_id)
    if info.records_version != spec.records_version:
        raise ConflictError(
            f"evalId={eval_id}: the case's records changed since the evaluation was registered "
            f"(records version {spec.records_version} -> {info.records_version}); start a new "
            "evaluation"
        )
    if info.tree_version != spec.tree_version:
        raise ConflictError(
            f"evalId={eval_id}: the case's tree changed since the evaluation was registered "
            f"(tree version {spec.tree_version} -> {info.tree_version}); start a new evaluation"
        )
    return spec


def sample_stage(conn: duckdb.DuckDBPyConnection, eval_id: str) -> dict[str, Any]:
    spec = check_spec(conn, eval_id)
    keys = (
        conn.execute(
            "SELECT record_key FROM records WHERE case_id = ? ORDER BY record_key",
            [spec.case_id],
        )
        .pl()
        .get_column("record_key")
        .to_list()
    )
    sample = draw_sample(keys, spec.sample_size, seed=spec.seed)
    evaluations.save_sample(conn, eval_id, sample.keys, sample.sample_hash, spec.sample_size)
    return {
        "size": sample.size,
        "requested_size": spec.sample_size,
        "seed": spec.seed,
        "sample_hash": sample.sample_hash,
    }


def leave_out_stage(
    open_warehouse: Callable[..., AbstractContextManager[duckdb.DuckDBPyConnection]],
    eval_id: str,
    *,
    index_dir: Path,
    threads: int,
) -> dict[str, Any]:
    """Leave-out list and retrieval. The warehouse is opened twice, briefly, around the
    index build and search, so status readers are not locked out during the long part."""
    with open_warehouse(read_only=True) as conn:
        spec = check_spec(conn, eval_id)
        records = cases.load_records(conn, spec.case_id)
        sample = evaluations.load_sample(conn, eval_id)
    record_keys = records.get_column("record_key").to_list()
    handle = load_or_build_index(
        index_dir, spec.case_id, spec.records_version, records.get_column("text").to_list()
    )
    position_of = {key: i for i, key in enumerate(record_keys)}
    positions = np.array([position_of[k] for k in sample.get_column("record_key")], np.int64)
    started = time.perf_counter()
    result = compute_leave_out(
        handle.index,
        record_keys,
        records.get_column("metadata").to_list(),
        positions,
        spec.grouping,
        candidates=spec.max_candidates,
        n_threads=threads,
    )
    retrieval_seconds = time.perf_counter() - started
    with open_warehouse() as conn, transaction(conn):
        evaluations.save_stage_rows(conn, "leave_out", eval_id, result.excluded)
        evaluations.save_stage_rows(conn, "candidates", eval_id, result.candidates)
    per_record = result.candidates.group_by("sample_key").len()
    short = sample.height - per_record.filter(pl.col("len") >= result.requested).height
    return {
        "grouping": spec.grouping.mode,
        "excluded_records": result.excluded_records,
        "group_members_excluded": result.group_members_excluded,
        "requested_candidates": result.requested,
        "rows_short": short,
        "index_built": handle.built,
        "index_seconds": round(handle.seconds, 3),
        "retrieval_seconds": round(retrieval_seconds, 3),
    }


@dataclass(frozen=True)
class VariantJob:
    """Everything one variant's classify step needs, so the step never opens the warehouse."""

    eval_id: str
    position: int
    variant: Variant
    records: list[RecordToClassify]
    evidence: dict[str, list[Evidence]]
    memo: list[MemoEntry]
    memo_version: str
    tree: CodeTree


def variant_jobs(conn: duckdb.DuckDBPyConnection, eval_id: str) -> list[VariantJob]:
    spec = check_spec(conn, eval_id)
    info = cases.load_case(conn, spec.case_id)
    tree = cases.load_tree(conn, info)
    sampled = conn.execute(
        "SELECT s.record_key, r.text, r.metadata FROM holdout_samples s JOIN records r "
        "ON r.case_id = ? AND r.record_key = s.record_key WHERE s.eval_id = ? "
        "ORDER BY s.position",
        [spec.case_id, eval_id],
    ).fetchall()
    records = [RecordToClassify(key, text, json.loads(meta)) for key, text, meta in sampled]
    rows = conn.execute(
        "SELECT c.sample_key, c.evidence_key, c.similarity, r.label_node FROM candidates c "
        "JOIN records r ON r.case_id = ? AND r.record_key = c.evidence_key "
        "WHERE c.eval_id = ? ORDER BY c.sample_key, c.rank",
        [spec.case_id, eval_id],
    ).fetchall()
    evidence: dict[str, list[Evidence]] = {}
    for sample_key, evidence_key, similarity, label_node in rows:
        evidence.setdefault(sample_key, []).append(
            Evidence(evidence_key, float(similarity), label_node)
        )
    entries = {e.entry_id: e for e in memo.load_entries(conn, spec.case_id, tree)}
    active = [e for e in entries.values() if e.status == "active"]
    touched = {item.label_node for items in evidence.values() for item in items}
    touched |= {code for entry in entries.values() for code in entry.rule.codes}
    tree = tree.restricted_to(touched)
    jobs = []
    for position, variant in enumerate(spec.variants):
        included = [entries[m] for m in variant.memo_include if m in entries]
        missing = [m for m in variant.memo_include if m not in entries]
        if missing:
            raise ConflictError(f"memo_include={missing}: entries no longer exist in the case")
        variant_memo = sorted(
            {e.entry_id: e for e in [*active, *included]}.values(), key=lambda e: e.entry_id
        )
        jobs.append(
            VariantJob(
                eval_id=eval_id,
                position=position,
                variant=variant,
                records=records,
                evidence=evidence,
                memo=variant_memo,
                memo_version=memo_version(variant_memo),
                tree=tree,
            )
        )
    return jobs


@dataclass(frozen=True)
class VariantResult:
    name: str
    position: int
    memo_version: str
    predictions: pl.DataFrame
    usage: dict[str, Any]


def classify_variant(job: VariantJob) -> VariantResult:
    """Run the variant's classifier over the shared sample (no warehouse access)."""
    classifier = get_classifier(job.variant.config.classifier)
    started = time.perf_counter()
    predictions: list[Prediction] = classifier(
        job.records, job.evidence, job.memo, job.variant.config, tree=job.tree
    )
    seconds = time.perf_counter() - started
    frame = pl.DataFrame(
        {
            "variant": [job.variant.name] * len(predictions),
            "record_key": [p.record_key for p in predictions],
            "code": [p.code for p in predictions],
            "confidence": [float(p.confidence) for p in predictions],
            "route": [p.route for p in predictions],
            "candidates": [json.dumps(p.candidates) for p in predictions],
            "requested_candidates": [p.requested_candidates for p in predictions],
            "effective_candidates": [p.effective_candidates for p in predictions],
            "memo_applied": [json.dumps(p.memo_applied) for p in predictions],
            "error": [p.error for p in predictions],
            "tokens": [p.tokens for p in predictions],
        },
        schema=PREDICTION_SCHEMA,
    )
    expected = {r.record_key for r in job.records}
    if set(frame.get_column("record_key").to_list()) != expected or frame.height != len(expected):
        raise RuntimeError(
            f"classifier {job.variant.config.classifier!r} returned predictions for other "
            "records than the sample"
        )
    usage = {
        "classifier": job.variant.config.classifier,
        "llmLevel": job.variant.config.llm_level,
        "records": frame.height,
        "tokens": int(frame.get_column("tokens").sum()),
        "seconds": round(seconds, 3),
    }
    return VariantResult(job.variant.name, job.position, job.memo_version, frame, usage)


def store_predictions(
    conn: duckdb.DuckDBPyConnection, eval_id: str, results: list[VariantResult]
) -> dict[str, Any]:
    ordered = sorted(results, key=lambda r: r.position)
    predictions = pl.concat([r.predictions for r in ordered])
    runs = pl.DataFrame(
        {
            "variant": [r.name for r in ordered],
            "position": [r.position for r in ordered],
            "memo_version": [r.memo_version for r in ordered],
            "usage_json": [json.dumps(r.usage) for r in ordered],
        },
        schema={
            "variant": pl.String,
            "position": pl.Int32,
            "memo_version": pl.String,
            "usage_json": pl.String,
        },
    )
    evaluations.save_stage_rows(conn, "predictions", eval_id, predictions)
    evaluations.save_stage_rows(conn, "variant_runs", eval_id, runs)
    return {
        "variants": [r.name for r in ordered],
        "rows": predictions.height,
        "failed_rows": int(predictions.get_column("error").is_not_null().sum()),
    }


def _labels(conn: duckdb.DuckDBPyConnection, spec: HoldoutSpec, eval_id: str) -> pl.DataFrame:
    return conn.execute(
        "SELECT r.record_key, r.label, r.label_node FROM holdout_samples s JOIN records r "
        "ON r.case_id = ? AND r.record_key = s.record_key WHERE s.eval_id = ?",
        [spec.case_id, eval_id],
    ).pl()


def variant_outcomes(
    conn: duckdb.DuckDBPyConnection, eval_id: str
) -> tuple[HoldoutSpec, CodeTree, dict[str, pl.DataFrame]]:
    """Per variant (in spec order), the per-record outcome rows."""
    spec = check_spec(conn, eval_id)
    tree = cases.load_tree(conn, cases.load_case(conn, spec.case_id))
    predictions = evaluations.load_stage_rows(conn, "predictions", eval_id, "variant, record_key")
    labels = _labels(conn, spec, eval_id)
    outcomes = {}
    for variant in spec.variants:
        rows = predictions.filter(pl.col("variant") == variant.name)
        if rows.height != labels.height:
            raise ConflictError(
                f"variant {variant.name!r} has {rows.height} predictions for {labels.height} "
                "sampled records: re-materialise variant_predictions"
            )
        outcomes[variant.name] = row_outcomes(rows, labels, tree)
    return spec, tree, outcomes


def scores_stage(conn: duckdb.DuckDBPyConnection, eval_id: str) -> dict[str, Any]:
    spec, tree, outcomes = variant_outcomes(conn, eval_id)
    rows = []
    summary: dict[str, Any] = {}
    for position, variant in enumerate(spec.variants):
        frame = outcomes[variant.name]
        score = score_variant(frame, tree, spec.target_depth)
        failed = int(frame.get_column("error").is_not_null().sum())
        rows.append(
            {
                "variant": variant.name,
                "position": position,
                "score_json": json.dumps(score),
                "failed_rows": failed,
                "leave_out_json": json.dumps(leave_out_summary(frame)),
            }
        )
        summary[variant.name] = {
            "targetDepth": score["targetDepth"],
            "declineRate": score["declineRate"],
        }
    evaluations.save_stage_rows(
        conn,
        "variant_scores",
        eval_id,
        pl.DataFrame(
            rows,
            schema={
                "variant": pl.String,
                "position": pl.Int32,
                "score_json": pl.String,
                "failed_rows": pl.Int32,
                "leave_out_json": pl.String,
            },
        ),
    )
    return summary


def report_stage(conn: duckdb.DuckDBPyConnection, eval_id: str) -> tuple[dict[str, Any], str]:
    """Build, store and return the report and its markdown summary."""
    spec, tree, outcomes = variant_outcomes(conn, eval_id)
    scores = evaluations.load_stage_rows(conn, "variant_scores", eval_id, "position")
    runs = {
        row["variant"]: row
        for row in evaluations.load_stage_rows(conn, "variant_runs", eval_id, "position").iter_rows(
            named=True
        )
    }
    if scores.height != len(spec.variants):
        raise ConflictError("variant_scores is missing variants: re-materialise variant_scores")
    variants = []
    for row in scores.iter_rows(named=True):
        variant = spec.variants[row["position"]]
        run = runs[variant.name]
        variants.append(
            {
                "name": variant.name,
                "memoInclude": list(variant.memo_include),
                "memoVersion": run["memo_version"],
                "config": variant.config.to_json(),
                "score": json.loads(row["score_json"]),
                "failedRows": row["failed_rows"],
                "usage": json.loads(run["usage_json"]),
                "leaveOut": json.loads(row["leave_out_json"]),
            }
        )
    baseline = spec.variants[0].name
    comparisons = [
        {
            "baseline": baseline,
            "candidate": variant.name,
            "levels": compare_outcomes(outcomes[baseline], outcomes[variant.name], tree),
        }
        for variant in spec.variants[1:]
    ]
    sample = evaluations.load_sample(conn, eval_id)
    excluded = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE reason = 'group') FROM leave_out "
        "WHERE eval_id = ?",
        [eval_id],
    ).fetchone()
    assert excluded is not None
    report = build_report(
        spec,
        tree,
        sample_hash=sample.get_column("sample_hash")[0],
        sample_size=sample.height,
        group_members_excluded=int(excluded[1]),
        excluded_records=int(excluded[0]),
        variants=variants,
        comparisons=comparisons,
    )
    markdown = report_markdown(report)
    evaluations.save_report(conn, eval_id, report, markdown)
    return report, markdown
