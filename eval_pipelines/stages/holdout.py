"""The holdout stages, Dagster-free: each reads its inputs from the warehouse, calls the core
and writes its rows back (replacing the evaluation's previous rows). The Dagster assets in
``eval_pipelines.defs.holdout`` are thin adapters over these functions.

Every stage reads the records version, tree version and memo entries the evaluation pinned
when it was registered, so a re-run reproduces the report even after the case was replaced or
its memo changed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

from eval_pipelines.core.errors import ConflictError, InputError, NotFoundError
from eval_pipelines.core.holdout.classify import (
    Prediction,
    RecordToClassify,
    evidence_tree,
    get_classifier,
    neighbours_from_frame,
)
from eval_pipelines.core.holdout.classify_config import CHAT_CLASSIFIER
from eval_pipelines.core.holdout.compare import compare_outcomes
from eval_pipelines.core.holdout.diagnostics import evaluation_diagnostics
from eval_pipelines.core.holdout.memo import MemoEntry, memo_version, parse_memo_entry
from eval_pipelines.core.holdout.noise_floor import aa_noise_floor
from eval_pipelines.core.holdout.report import Comparison, VariantResult, build_report
from eval_pipelines.core.holdout.report_json import report_to_json, score_to_json, supply_to_json
from eval_pipelines.core.holdout.report_markdown import report_markdown
from eval_pipelines.core.holdout.sampling import draw_sample
from eval_pipelines.core.holdout.scoring import (
    CandidateSupply,
    VariantScore,
    candidate_supply,
    memo_rule_rows,
    row_outcomes,
    score_variant,
)
from eval_pipelines.core.holdout.spec import HoldoutSpec, spec_from_json
from eval_pipelines.core.holdout.trials import TrialsSummary, summarize_trials
from eval_pipelines.core.plugins import check_pinned
from eval_pipelines.core.tree import CodeTree
from eval_pipelines.stages.classify_task import ClassifyTask
from eval_pipelines.stages.text_index import IndexHandle, records_index
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import holdout as holdout_store
from eval_pipelines.storage import holdout_evaluations as holdout_evaluations_store
from eval_pipelines.storage import memo as memo_store

KIND = "holdout"
OpenWarehouse = Callable[..., AbstractContextManager[duckdb.DuckDBPyConnection]]

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


def load_spec(conn: duckdb.DuckDBPyConnection, eval_id: str) -> HoldoutSpec:
    """The stored spec of a holdout evaluation, with its pinned records version present.

    Raises
    ------
    NotFoundError
        When no holdout evaluation has this id: evaluations are registered by the CLI or the
        API (``eval-pipelines eval holdout``), never by adding a partition in the UI.
    """
    try:
        row = holdout_evaluations_store.evaluation_row(conn, eval_id)
    except NotFoundError:
        raise NotFoundError(
            f"No holdout evaluation is registered under the key {eval_id!r}: create "
            "evaluations with 'eval-pipelines eval holdout CASE --variants-file FILE' (or "
            "api.start_holdout_eval), which stores the spec and adds the partition, instead of "
            "adding a partition in the UI."
        ) from None
    if row.kind != KIND:
        raise ConflictError(f"evalId={eval_id!r}: is a {row.kind} evaluation, not {KIND}")
    spec = spec_from_json(row.spec)
    cases_store.require_records_version(conn, spec.case_id, spec.records_version)
    return spec


def pinned_tree(conn: duckdb.DuckDBPyConnection, spec: HoldoutSpec) -> CodeTree:
    return cases_store.load_tree(conn, spec.case_id, spec.tree_version)


def sample_stage(conn: duckdb.DuckDBPyConnection, eval_id: str) -> dict[str, Any]:
    """Draw and store the seeded sample."""
    spec = load_spec(conn, eval_id)
    keys = cases_store.record_keys(conn, spec.case_id, spec.records_version)
    sample = draw_sample(keys, spec.sample_size, seed=spec.seed)
    holdout_store.save_sample(conn, eval_id, sample.keys, sample.sample_hash, spec.sample_size)
    return {
        "size": sample.size,
        "requested_size": spec.sample_size,
        "seed": spec.seed,
        "sample_hash": sample.sample_hash,
    }


def _records_and_index(
    open_warehouse: OpenWarehouse, eval_id: str, index_dir: Path
) -> tuple[HoldoutSpec, pl.DataFrame, IndexHandle]:
    """The spec, the records without their texts (searches read the index instead) and the
    text index, whose texts are read only if it must be built."""
    with open_warehouse(read_only=True) as conn:
        spec = load_spec(conn, eval_id)
        records = cases_store.load_records(
            conn,
            spec.case_id,
            spec.records_version,
            columns=("record_key", "label", "label_node", "metadata"),
        )
    handle = records_index(
        open_warehouse,
        index_dir,
        spec.case_id,
        spec.records_version,
        n_records=records.height,
    )
    return spec, records, handle


def index_stage(
    open_warehouse: OpenWarehouse,
    eval_id: str,
    *,
    index_dir: Path,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Open the cached text index of the evaluation's records version, checked against the
    number of stored records, or build it (reading the texts only then; ``log`` hears of
    each segment written)."""
    with open_warehouse(read_only=True) as conn:
        spec = load_spec(conn, eval_id)
        n_records = cases_store.count_records(conn, spec.case_id, spec.records_version)

    def progress(written: int, segments: int) -> None:
        if log is not None:
            log(f"text index of {n_records:,} records: segment {written} of {segments} written")

    handle = records_index(
        open_warehouse,
        index_dir,
        spec.case_id,
        spec.records_version,
        n_records=n_records,
        progress=progress,
    )
    return {
        "case": spec.case_id,
        "records_version": spec.records_version,
        "records": handle.index.n_docs,
        "segments": len(handle.index.segments),
        "nonzeros": handle.index.nnz,
        "features": handle.index.n_features,
        "built": handle.built,
        "seconds": round(handle.seconds, 3),
        "path": str(handle.path),
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
    conn: duckdb.DuckDBPyConnection, eval_id: str, *, warehouse: Path | None = None
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


def variant_outcomes(
    conn: duckdb.DuckDBPyConnection, eval_id: str
) -> tuple[HoldoutSpec, CodeTree, dict[str, pl.DataFrame]]:
    """Per variant (in spec order), the per-record outcome rows."""
    spec = load_spec(conn, eval_id)
    tree = pinned_tree(conn, spec)
    predictions = holdout_store.load_predictions(conn, eval_id)
    labels = holdout_store.sample_labels(conn, eval_id, spec.case_id, spec.records_version)
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


LEVEL_SCHEMA = {
    "variant": pl.String,
    "position": pl.Int32,
    "depth": pl.Int32,
    "level_name": pl.String,
    "is_target": pl.Boolean,
    "n": pl.Int32,
    "right_count": pl.Int32,
    "accuracy": pl.Float64,
    "accuracy_low": pl.Float64,
    "accuracy_high": pl.Float64,
    "declined": pl.Int32,
    "ceiling_count": pl.Int32,
}


def _level_rows(name: str, position: int, score: VariantScore) -> list[dict[str, Any]]:
    return [
        {
            "variant": name,
            "position": position,
            "depth": level.depth,
            "level_name": level.name,
            "is_target": level.depth in score.target_depth,
            "n": level.accuracy.n,
            "right_count": level.accuracy.k,
            "accuracy": level.accuracy.estimate,
            "accuracy_low": level.accuracy.interval.low if level.accuracy.interval else None,
            "accuracy_high": level.accuracy.interval.high if level.accuracy.interval else None,
            "declined": level.declined,
            "ceiling_count": level.candidate_ceiling.k,
        }
        for level in score.levels
    ]


@dataclass(frozen=True)
class _VariantFigures:
    score: VariantScore
    failed_rows: int
    supply: CandidateSupply


def _figures(outcomes: pl.DataFrame, tree: CodeTree, spec: HoldoutSpec) -> _VariantFigures:
    """One variant's scores, failed rows and candidate supply: what ``variant_scores`` stores
    and the report shows, computed one way for both."""
    return _VariantFigures(
        score=score_variant(outcomes, tree, spec.target_depth),
        failed_rows=int(outcomes.get_column("error").is_not_null().sum()),
        supply=candidate_supply(outcomes),
    )


def scores_stage(conn: duckdb.DuckDBPyConnection, eval_id: str) -> pl.DataFrame:
    """Score every variant; returns the per-level rows it stored (one per variant and level)."""
    spec, tree, outcomes = variant_outcomes(conn, eval_id)
    variant_rows = []
    level_rows: list[dict[str, Any]] = []
    for position, variant in enumerate(spec.variants):
        figures = _figures(outcomes[variant.name], tree, spec)
        variant_rows.append(
            {
                "variant": variant.name,
                "position": position,
                "score_json": json.dumps(score_to_json(figures.score)),
                "failed_rows": figures.failed_rows,
                "leave_out_json": json.dumps(supply_to_json(figures.supply)),
            }
        )
        level_rows += _level_rows(variant.name, position, figures.score)
    levels = pl.DataFrame(level_rows, schema=LEVEL_SCHEMA)
    holdout_store.save_scores(
        conn,
        eval_id,
        pl.DataFrame(
            variant_rows,
            schema={
                "variant": pl.String,
                "position": pl.Int32,
                "score_json": pl.String,
                "failed_rows": pl.Int32,
                "leave_out_json": pl.String,
            },
        ),
        levels,
    )
    return levels


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


def evaluation_clusters(conn: duckdb.DuckDBPyConnection, eval_id: str) -> dict[str, int]:
    """Each sampled record's cluster: records held out together resample together."""
    from eval_pipelines.core.holdout.clusters import sample_clusters

    # Numbered in order of first appearance over the records sorted by key: the order the
    # bootstrap numbers them in, so the ids in `eval rows` can be used as they are.
    keys = sorted(holdout_store.load_sample(conn, eval_id).get_column("record_key").to_list())
    return dict(
        zip(keys, sample_clusters(keys, holdout_store.held_out_pairs(conn, eval_id)), strict=True)
    )


def evaluation_trials(
    conn: duckdb.DuckDBPyConnection,
    spec: HoldoutSpec,
    tree: CodeTree,
    clusters: dict[str, int],
) -> dict[str, TrialsSummary] | None:
    """The repeated trials' figures of the variants asked N > 1 times (``variant_trials``), or
    None when no variant was (the report then has no trials block)."""
    trials = holdout_store.load_trials(conn, spec.eval_id)
    if not trials.height:
        return None
    labels = holdout_store.sample_labels(conn, spec.eval_id, spec.case_id, spec.records_version)
    try:
        summaries = summarize_trials(
            trials,
            labels,
            tree,
            target_depth=spec.target_depth,
            clusters=clusters,
            seed=spec.seed,
        )
    except InputError as error:
        raise ConflictError(
            f"the stored trials do not match the sample ({error}): re-materialise "
            "variant_predictions"
        ) from error
    return summaries or None


def report_stage(
    conn: duckdb.DuckDBPyConnection, eval_id: str, *, run_id: str | None
) -> tuple[dict[str, Any], str]:
    """Build, store and return the report (JSON) and its markdown summary."""
    spec, tree, outcomes = variant_outcomes(conn, eval_id)
    runs = {
        row["variant"]: row for row in holdout_store.load_variant_runs(conn, eval_id).to_dicts()
    }
    stored_scores = holdout_store.load_scores(conn, eval_id)
    if stored_scores.height != len(spec.variants) or set(runs) != {v.name for v in spec.variants}:
        raise ConflictError("variant_scores is missing variants: re-materialise variant_scores")
    variants = []
    for variant in spec.variants:
        figures = _figures(outcomes[variant.name], tree, spec)
        variants.append(
            VariantResult(
                name=variant.name,
                memo_include=variant.memo_include,
                memo_version=runs[variant.name]["memo_version"],
                config=variant.config,
                score=figures.score,
                failed_rows=figures.failed_rows,
                usage=json.loads(runs[variant.name]["usage_json"]),
                supply=figures.supply,
                # Rows each of the variant's memo entries fired on (entries that never fired
                # read 0; evaluations stored before memo snapshots list only what fired).
                memo_rules=memo_rule_rows(outcomes[variant.name], spec.memo_ids_of(variant) or ()),
            )
        )
    baseline = spec.variants[0].name
    clusters = evaluation_clusters(conn, eval_id)
    comparisons = tuple(
        Comparison(
            baseline=baseline,
            candidate=variant.name,
            levels=compare_outcomes(
                outcomes[baseline],
                outcomes[variant.name],
                tree,
                clusters=clusters,
                seed=spec.seed,
            ),
        )
        for variant in spec.variants[1:]
    )
    sample_hash, sample_size = holdout_store.sample_summary(conn, eval_id)
    excluded_records, group_members = holdout_store.leave_out_counts(conn, eval_id)
    aa = aa_noise_floor(spec, outcomes, clusters) if spec.aa_twin is not None else None
    gap = None
    if spec.leakage_check:
        gap = holdout_store.load_leakage_gap(conn, eval_id)
        if gap is None:
            raise ConflictError(
                "the evaluation asks for a leakage check but none is stored: materialise "
                "leakage_gap"
            )
    report = build_report(
        spec,
        tree.levels,
        sample_hash=sample_hash,
        sample_size=sample_size,
        group_members_excluded=group_members,
        excluded_records=excluded_records,
        variants=tuple(variants),
        comparisons=comparisons,
        retrievals=tuple(holdout_store.load_retrievals(conn, eval_id)),
        diagnostics=evaluation_diagnostics(
            {v.name: outcomes[v.name] for v in spec.variants},
            tree,
            target_depth=min(spec.target_depth),
            auto_above={v.name: v.config.auto_above for v in spec.variants},
        ),
        aa_check=aa,
        leakage_gap=gap,
        trials=evaluation_trials(conn, spec, tree, clusters),
    )
    report_json = report_to_json(report)
    markdown = report_markdown(report_json)
    holdout_evaluations_store.save_report(conn, eval_id, report_json, markdown, run_id=run_id)
    return report_json, markdown


@dataclass(frozen=True)
class Leakage:
    """Retrieved neighbours that should never have been retrieved, counted three ways.

    Attributes
    ----------
    on_leave_out_list
        The sampled record itself, or a record on its stored leave-out list.
    sharing_group_field
        Field grouping: neighbours sharing the group field's value, recomputed from the
        records (None for other groupings).
    near_duplicates
        Near-duplicate grouping: neighbours at or above the threshold (less the float32
        tolerance), i.e. members of the record's group (None for other groupings).
    """

    on_leave_out_list: int
    sharing_group_field: int | None
    near_duplicates: int | None

    @property
    def total(self) -> int:
        return (
            self.on_leave_out_list + (self.sharing_group_field or 0) + (self.near_duplicates or 0)
        )


def leakage(conn: duckdb.DuckDBPyConnection, eval_id: str) -> Leakage:
    """Recount, from the stored rows, the neighbours that break the leave-out rule."""
    from eval_pipelines.core.search_request import NEAR_DUPLICATE_TOLERANCE

    spec = load_spec(conn, eval_id)
    field_count = near_count = None
    if spec.grouping.mode == "field" and spec.grouping.field is not None:
        field_count = holdout_store.evidence_sharing_group_field(
            conn, eval_id, spec.case_id, spec.records_version, spec.grouping.field
        )
    if spec.grouping.mode == "nearDuplicate" and spec.grouping.threshold is not None:
        # The same float32 cut-off the search applies.
        cut = float(np.float32(spec.grouping.threshold - NEAR_DUPLICATE_TOLERANCE))
        near_count = holdout_store.evidence_at_or_above(
            conn, eval_id, cut, space=spec.grouping.retrieval.space
        )
    return Leakage(
        on_leave_out_list=holdout_store.evidence_inside_leave_out(conn, eval_id),
        sharing_group_field=field_count,
        near_duplicates=near_count,
    )


def candidate_shortfall(conn: duckdb.DuckDBPyConnection, eval_id: str) -> tuple[int, int]:
    """``(rows with fewer neighbours than requested, neighbours requested)``."""
    spec = load_spec(conn, eval_id)
    short = sum(
        holdout_store.rows_short_of(conn, eval_id, spec.candidates_for(r), r.key)
        for r in spec.retrievals
    )
    return short, spec.max_candidates
