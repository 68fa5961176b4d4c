"""The holdout classify stages: one task per variant, each variant's predictions over the
shared sample, and their storage."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import duckdb
import polars as pl

from eval_pipelines.core.errors import ConflictError
from eval_pipelines.core.holdout.classify import (
    Prediction,
    RecordToClassify,
    evidence_tree,
    get_classifier,
    neighbours_from_frame,
)
from eval_pipelines.core.holdout.classify_config import CHAT_CLASSIFIER
from eval_pipelines.core.holdout.memo import MemoEntry, memo_version, parse_memo_entry
from eval_pipelines.core.holdout.spec import HoldoutSpec
from eval_pipelines.core.plugins import check_pinned
from eval_pipelines.core.tree import CodeTree
from eval_pipelines.settings import WarehouseLocation
from eval_pipelines.stages.classify_task import ClassifyTask
from eval_pipelines.stages.holdout_spec import load_spec, pinned_tree
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import holdout as holdout_store
from eval_pipelines.storage import memo as memo_store

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
    # The scored invocation's tokens as the endpoint reported them (priced in the report).
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
}


def _variant_memo(
    conn: duckdb.DuckDBPyConnection, spec: HoldoutSpec, tree: CodeTree
) -> dict[str, list[MemoEntry]]:
    """Each variant's memo entries: from the spec's snapshot, or (for evaluations stored before
    snapshots) from the case's current entries."""
    if spec.memo_entries is not None:
        parsed = {i: parse_memo_entry(raw, tree) for i, raw in spec.memo_entries.items()}
        by_variant = {}
        for variant in spec.variants:
            ids = spec.memo_ids_of(variant) or ()
            by_variant[variant.name] = [parsed[i] for i in ids]
        return by_variant
    entries = {e.entry_id: e for e in memo_store.load_entries(conn, spec.case_id, tree)}
    active = [e for e in entries.values() if e.status == "active"]
    by_variant = {}
    for variant in spec.variants:
        missing = [m for m in variant.memo_include if m not in entries]
        if missing:
            raise ConflictError(f"memo_include={missing}: entries no longer exist in the case")
        chosen = {e.entry_id: e for e in [*active, *(entries[m] for m in variant.memo_include)]}
        by_variant[variant.name] = sorted(chosen.values(), key=lambda e: e.entry_id)
    return by_variant


def classify_tasks(
    conn: duckdb.DuckDBPyConnection, eval_id: str, *, warehouse: WarehouseLocation | None = None
) -> list[ClassifyTask]:
    """One task per variant; ``warehouse`` (the file ``conn`` is open on) is handed to chat
    variants for their call cache."""
    spec = load_spec(conn, eval_id)
    full_tree = tree = pinned_tree(conn, spec)
    records = [
        RecordToClassify(key, text, meta)
        for key, text, meta in holdout_store.sampled_records(
            conn, eval_id, spec.case_id, spec.records_version
        )
    ]
    evidence = {
        retrieval.key: holdout_store.retrieved_evidence(
            conn, eval_id, spec.case_id, spec.records_version, retrieval.key
        )
        for retrieval in spec.retrievals
    }
    memo_by_variant = _variant_memo(conn, spec, tree)
    # One tree for every variant: cut to the labels any retrieval brought and any memo names.
    tree = evidence_tree(
        tree,
        pl.concat([frame.select("label_node") for frame in evidence.values()]),
        [e for m in memo_by_variant.values() for e in m],
    )
    tasks = []
    for position, variant in enumerate(spec.variants):
        # The retrieval serves the variant asking for the most; each takes its own share.
        share = evidence[variant.config.retrieval.key].filter(
            pl.col("rank") <= variant.config.candidates
        )
        task = ClassifyTask(
            eval_id=eval_id,
            position=position,
            variant=variant,
            records=records,
            evidence=share,
            memo=memo_by_variant[variant.name],
            memo_version=memo_version(memo_by_variant[variant.name]),
            tree=tree,
        )
        if variant.config.classifier == CHAT_CLASSIFIER:
            labels = share.get_column("label_node").unique().sort().to_list()
            task = replace(
                task,
                tree=full_tree,
                titles=cases_store.load_titles(conn, spec.case_id, spec.tree_version, labels),
                warehouse=None if warehouse is None else str(warehouse),
                estimate=(spec.token_estimate or {}).get(variant.name),
            )
        tasks.append(task)
    return tasks


@dataclass(frozen=True)
class VariantPredictions:
    name: str
    position: int
    memo_version: str
    predictions: pl.DataFrame
    usage: dict[str, Any]
    # Every trial of every record (storage.holdout.TRIALS_SCHEMA) for a chat variant.
    trials: pl.DataFrame | None = None


def classify_variant(
    task: ClassifyTask,
    *,
    log: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
) -> VariantPredictions:
    """Run the variant's classifier over the shared sample (no warehouse access, except a
    chat variant's call cache; ``log`` hears its progress, ``stop`` stops its calls)."""
    started = time.perf_counter()
    trials: pl.DataFrame | None = None
    extra: dict[str, Any] = {}
    if task.variant.config.classifier == CHAT_CLASSIFIER:
        from eval_pipelines.stages.chat_classify import classify_chat

        chat = classify_chat(task, log=log, stop=stop)
        predictions: list[Prediction] = chat.predictions
        trials, extra = chat.trials, chat.usage
    else:
        classifier = get_classifier(task.variant.config.classifier)
        # The code that runs must be the code the spec (and so the report) pins.
        check_pinned(task.variant.config.classifier, task.variant.plugin)
        predictions = classifier(
            task.records,
            neighbours_from_frame(task.evidence),
            task.memo,
            task.variant.config,
            tree=task.tree,
        )
    seconds = time.perf_counter() - started
    frame = pl.DataFrame(
        {
            "variant": [task.variant.name] * len(predictions),
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
            "input_tokens": [p.input_tokens for p in predictions],
            "output_tokens": [p.output_tokens for p in predictions],
        },
        schema=PREDICTION_SCHEMA,
    )
    expected = {r.record_key for r in task.records}
    if set(frame.get_column("record_key").to_list()) != expected or frame.height != len(expected):
        raise RuntimeError(
            f"classifier {task.variant.config.classifier!r} returned predictions for other "
            "records than the sample"
        )
    usage = {
        "classifier": task.variant.config.classifier,
        "llmLevel": task.variant.config.llm_level,
        "records": frame.height,
        # One classify call per record; tokens as the classifier reports them.
        "classifyCalls": len(predictions),
        "tokens": int(frame.get_column("tokens").sum()),
        "inputTokens": sum(p.input_tokens for p in predictions),
        "outputTokens": sum(p.output_tokens for p in predictions),
        **extra,
        "seconds": round(seconds, 3),
    }
    return VariantPredictions(
        task.variant.name, task.position, task.memo_version, frame, usage, trials
    )


def store_predictions(
    conn: duckdb.DuckDBPyConnection, eval_id: str, results: list[VariantPredictions]
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
    holdout_store.save_predictions(conn, eval_id, predictions, runs)
    trials = [r.trials for r in ordered if r.trials is not None]
    holdout_store.save_trials(
        conn,
        eval_id,
        pl.concat(trials) if trials else pl.DataFrame(schema=holdout_store.TRIALS_SCHEMA),
    )
    return {
        "variants": [r.name for r in ordered],
        "rows": predictions.height,
        "failed_rows": int(predictions.get_column("error").is_not_null().sum()),
    }


def evidence_frame(candidates: pl.DataFrame, label_of: dict[str, str]) -> pl.DataFrame:
    """A leave-out's candidates as the evidence frame a classify task carries
    (:data:`~eval_pipelines.core.holdout.classify.EVIDENCE_COLUMNS`, by sample, then rank:
    the order ``classify_tasks`` reads stored candidates back in)."""
    return candidates.sort("sample_key", "rank").select(
        "sample_key",
        "evidence_key",
        "similarity",
        pl.col("evidence_key").replace_strict(label_of, return_dtype=pl.String).alias("label_node"),
    )
