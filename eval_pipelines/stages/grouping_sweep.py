"""Near-duplicate threshold sweep: how much evidence each nearDuplicate
threshold holds out, and what the baseline scores per tree level with it, on one seeded sample.

A calibration tool, computed directly (no Dagster run, nothing written to the warehouse): the
warehouse is opened read-only once, briefly, for the case's current records, tree and active
memo entries; the sample is drawn once and the text index loaded (or built) once, so every
threshold sees the same sampled records. Per threshold the stage computes the leave-out list
and retrieval exactly as the holdout ``leave_out`` stage does, classifies with the baseline
config exactly as ``classify_variant`` does and scores exactly as ``variant_scores`` does, so a
row equals the baseline's scores of a holdout evaluation with that grouping, sample size and
seed (checked by the tests).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout.classify import RecordToClassify, evidence_tree, known_classifiers
from eval_pipelines.core.holdout.classify_config import ClassifyConfig, parse_config
from eval_pipelines.core.holdout.grouping_settings import Grouping
from eval_pipelines.core.holdout.memo import MemoEntry, memo_version
from eval_pipelines.core.holdout.sampling import Sample, draw_sample
from eval_pipelines.core.holdout.scoring import VariantScore, row_outcomes, score_variant
from eval_pipelines.core.holdout.variants import Variant
from eval_pipelines.core.plugins import PluginError, resolve_classifier
from eval_pipelines.core.tree import CodeTree
from eval_pipelines.settings import WarehouseLocation
from eval_pipelines.stages.classify_task import ClassifyTask
from eval_pipelines.stages.holdout_classify import classify_variant, evidence_frame
from eval_pipelines.stages.text_index import load_or_build_index
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import memo as memo_store
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, connect

BASELINE = "baseline"


@dataclass(frozen=True)
class SweepRow:
    """One grouping of the sweep.

    Attributes
    ----------
    grouping
        ``Grouping(mode="none")`` for the reference row, else nearDuplicate at a threshold.
    group_members_held_out
        Records held out besides the sampled records themselves, summed over the sample.
    records_with_group
        Sampled records with at least one group member held out.
    same_label_held_out
        Of the held-out group members, those whose label is the sampled record's own label.
    rows_short
        Sampled records for which retrieval found fewer evidence records than requested.
    score
        The baseline's scores (every tree level) with this leave-out.
    seconds
        Wall time of this row's retrieval, classification and scoring.
    """

    grouping: Grouping
    group_members_held_out: int
    records_with_group: int
    same_label_held_out: int
    rows_short: int
    score: VariantScore
    seconds: float


@dataclass(frozen=True)
class Sweep:
    case_id: str
    records_version: str
    tree_version: str
    memo_version: str
    memo_entries: int
    sample: Sample
    config: ClassifyConfig
    tree: CodeTree
    rows: tuple[SweepRow, ...]
    index_built: bool
    seconds: float


def baseline_config(raw: Any, max_depth: int, case_target_depth: tuple[int, ...]) -> ClassifyConfig:
    """The baseline's config, resolved as :func:`parse_holdout_request` resolves the shared
    config of an evaluation whose only variant has no config of its own."""
    config = parse_config(raw, where="config", max_depth=max_depth)
    if config.classifier not in known_classifiers():
        try:  # a plug-in (core.plugins), checked as an evaluation checks it
            resolve_classifier(config.classifier)
        except PluginError as error:
            raise InputError(
                "config.classifier",
                config.classifier,
                f"must be a registered classifier {known_classifiers()} or a plug-in: {error}",
            ) from None
    return replace(config, target_depth=config.target_depth or case_target_depth)


def grouping_sweep_stage(
    warehouse: WarehouseLocation,
    case_id: str,
    *,
    thresholds: Sequence[float],
    sample_size: int,
    seed: int,
    config: Any,
    index_dir: Path,
    threads: int,
) -> Sweep:
    """Sweep ``thresholds`` (validated by the caller), after a no-grouping reference row.

    ``config`` is the baseline's raw config object (None: the defaults), parsed as a holdout
    evaluation's shared config is; its target depth is the case's unless it names one.

    Raises
    ------
    InputError
        A bad config (naming the key, the value and the rule); checked before any search.
    NotFoundError
        When the case does not exist.
    """
    from eval_pipelines.core.holdout.grouping import compute_leave_out

    started = time.perf_counter()
    with connect(warehouse, read_only=True, wait_seconds=CLI_WAIT_SECONDS) as conn:
        info = cases_store.load_case(conn, case_id)
        records = cases_store.load_records(conn, case_id, info.records_version)
        tree = cases_store.load_tree(conn, case_id, info.tree_version)
        entries: list[MemoEntry] = [
            e for e in memo_store.load_entries(conn, case_id, tree) if e.status == "active"
        ]
    entries.sort(key=lambda e: e.entry_id)
    parsed = baseline_config(config, tree.max_depth, info.target_depth)
    variant = Variant(name=BASELINE, memo_include=(), config=parsed, step_key=BASELINE)

    record_keys = records.get_column("record_key").to_list()
    label_nodes = records.get_column("label_node").to_list()
    metadata = records.get_column("metadata").to_list()
    label_of = dict(zip(record_keys, label_nodes, strict=True))
    handle = load_or_build_index(
        index_dir, case_id, info.records_version, records.get_column("text").to_list()
    )
    sample = draw_sample(record_keys, sample_size, seed=seed)
    texts = records.get_column("text").to_list()
    to_classify = [
        RecordToClassify(record_keys[p], texts[p], json.loads(metadata[p] or "{}"))
        for p in sample.positions.tolist()
    ]
    labels = records.select("record_key", "label", "label_node").filter(
        pl.col("record_key").is_in(list(sample.keys))
    )

    groupings = [
        Grouping(mode="none", threshold=None),
        *[Grouping(mode="nearDuplicate", threshold=float(t)) for t in thresholds],
    ]
    rows = []
    for grouping in groupings:
        row_started = time.perf_counter()
        leave_out = compute_leave_out(
            handle.index,
            record_keys,
            metadata,
            sample.positions,
            grouping,
            candidates=parsed.candidates,
            n_threads=threads,
        )
        group = leave_out.excluded.filter(pl.col("reason") == "group")
        same_label = int(
            sum(
                label_of[s] == label_of[e]
                for s, e in zip(
                    group.get_column("sample_key").to_list(),
                    group.get_column("excluded_key").to_list(),
                    strict=True,
                )
            )
        )
        evidence = evidence_frame(leave_out.candidates, label_of)
        supplied = dict(evidence.group_by("sample_key").len().iter_rows())
        predictions = classify_variant(
            ClassifyTask(
                eval_id=f"{case_id}-grouping-sweep",
                position=0,
                variant=variant,
                records=to_classify,
                evidence=evidence,
                memo=entries,
                memo_version=memo_version(entries),
                tree=evidence_tree(tree, evidence, entries),
            )
        ).predictions
        outcomes = row_outcomes(predictions, labels, tree)
        rows.append(
            SweepRow(
                grouping=grouping,
                group_members_held_out=group.height,
                records_with_group=group.get_column("sample_key").n_unique(),
                same_label_held_out=same_label,
                rows_short=sum(supplied.get(k, 0) < parsed.candidates for k in sample.keys),
                score=score_variant(outcomes, tree, parsed.target_depth),
                seconds=time.perf_counter() - row_started,
            )
        )
    return Sweep(
        case_id=case_id,
        records_version=info.records_version,
        tree_version=info.tree_version,
        memo_version=memo_version(entries),
        memo_entries=len(entries),
        sample=sample,
        config=parsed,
        tree=tree,
        rows=tuple(rows),
        index_built=handle.built,
        seconds=time.perf_counter() - started,
    )
