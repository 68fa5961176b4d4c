"""The holdout score and report stages: each variant's per-record outcomes scored per level,
and the report built from them (comparisons, A/A noise floor, leakage gap, trials)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

from eval_pipelines.core.errors import ConflictError, InputError
from eval_pipelines.core.holdout.compare import compare_outcomes
from eval_pipelines.core.holdout.cost import (
    VariantCost,
    calls_a_model,
    compare_costs,
    variant_cost,
)
from eval_pipelines.core.holdout.diagnostics import evaluation_diagnostics
from eval_pipelines.core.holdout.noise_floor import aa_noise_floor
from eval_pipelines.core.holdout.report import Comparison, VariantResult, build_report
from eval_pipelines.core.holdout.report_json import report_to_json, score_to_json, supply_to_json
from eval_pipelines.core.holdout.report_markdown import report_markdown
from eval_pipelines.core.holdout.scoring import (
    CandidateSupply,
    VariantScore,
    candidate_supply,
    memo_rule_rows,
    row_outcomes,
    score_variant,
)
from eval_pipelines.core.holdout.spec import HoldoutSpec
from eval_pipelines.core.holdout.trials import TrialsSummary, summarize_trials
from eval_pipelines.core.tree import CodeTree
from eval_pipelines.stages.holdout_spec import load_spec, pinned_tree
from eval_pipelines.storage import holdout as holdout_store
from eval_pipelines.storage import holdout_evaluations as holdout_evaluations_store


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
    clusters = evaluation_clusters(conn, eval_id)
    costs: dict[str, VariantCost] = {}
    variants = []
    for variant in spec.variants:
        figures = _figures(outcomes[variant.name], tree, spec)
        usage = json.loads(runs[variant.name]["usage_json"])
        costs[variant.name] = variant_cost(
            outcomes[variant.name], variant.config, usage, clusters=clusters, seed=spec.seed
        )
        variants.append(
            VariantResult(
                name=variant.name,
                memo_include=variant.memo_include,
                memo_version=runs[variant.name]["memo_version"],
                config=variant.config,
                score=figures.score,
                failed_rows=figures.failed_rows,
                usage=usage,
                supply=figures.supply,
                # Rows each of the variant's memo entries fired on (entries that never fired
                # read 0; evaluations stored before memo snapshots list only what fired).
                memo_rules=memo_rule_rows(outcomes[variant.name], spec.memo_ids_of(variant) or ()),
                cost=costs[variant.name],
            )
        )
    baseline = variants[0]
    comparisons = tuple(
        Comparison(
            baseline=baseline.name,
            candidate=variant.name,
            levels=compare_outcomes(
                outcomes[baseline.name],
                outcomes[variant.name],
                tree,
                clusters=clusters,
                seed=spec.seed,
            ),
            cost=compare_costs(
                costs[baseline.name], costs[variant.name], clusters=clusters, seed=spec.seed
            )
            if calls_a_model(costs[baseline.name], costs[variant.name])
            else None,
        )
        for variant in variants[1:]
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
