"""The leakage gap (`--leakage-check`): the baseline scored again on the same sample with only
each record itself held out (no grouping), and compared level by level with the grouped
baseline: the number 000 describes in words, with its paired interval.

The search and the classification run outside the warehouse lock; the warehouse is opened
briefly to read and once to store the result.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from eval_pipelines.core.holdout.classify import evidence_tree
from eval_pipelines.core.holdout.compare import compare_outcomes
from eval_pipelines.core.holdout.grouping_settings import Grouping
from eval_pipelines.core.holdout.report_json import paired_levels_to_json
from eval_pipelines.core.holdout.scoring import row_outcomes
from eval_pipelines.core.holdout.spec import HoldoutSpec
from eval_pipelines.stages.holdout_classify import classify_tasks, classify_variant, evidence_frame
from eval_pipelines.stages.holdout_report import evaluation_clusters, variant_outcomes
from eval_pipelines.stages.holdout_spec import load_spec, pinned_tree
from eval_pipelines.stages.text_index import IndexHandle, OpenWarehouse, records_index
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import holdout as holdout_store
from eval_pipelines.storage.warehouse import transaction


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


def leakage_gap_stage(
    open_warehouse: OpenWarehouse, eval_id: str, *, index_dir: Path, threads: int
) -> dict[str, Any]:
    """Compute and store the leakage gap when the spec asks for it; returns a summary."""
    from eval_pipelines.core.holdout.grouping import compute_leave_out_in_spaces
    from eval_pipelines.stages.retrievers import evaluation_searchers

    with open_warehouse(read_only=True) as conn:
        if not load_spec(conn, eval_id).leakage_check:
            return {"requested": False}
    spec, records, handle = _records_and_index(open_warehouse, eval_id, index_dir)
    with open_warehouse(read_only=True) as conn:
        sample = holdout_store.load_sample(conn, eval_id).get_column("record_key").to_list()
        (task, *_) = classify_tasks(conn, eval_id)
        tree = pinned_tree(conn, spec)
        labels = holdout_store.sample_labels(conn, eval_id, spec.case_id, spec.records_version)
        _, outcome_tree, outcomes = variant_outcomes(conn, eval_id)
        clusters = evaluation_clusters(conn, eval_id)
    keys = records.get_column("record_key").to_list()
    position = {key: i for i, key in enumerate(keys)}
    # The baseline searched the way it searched in the evaluation, without the groups.
    ungrouping = Grouping(mode="none", threshold=None, field=None)
    searchers, _ = evaluation_searchers(
        replace(spec, grouping=ungrouping, variants=(task.variant,)),
        handle,
        open_warehouse,
        index_dir=index_dir,
        threads=threads,
    )
    ungrouped = compute_leave_out_in_spaces(
        searchers,
        keys,
        records.get_column("metadata").to_list(),
        np.array([position[k] for k in sample], dtype=np.int64),
        ungrouping,
        candidates={task.variant.config.retrieval.key: task.variant.config.candidates},
    )
    label_of = dict(zip(keys, records.get_column("label_node").to_list(), strict=True))
    evidence = evidence_frame(ungrouped.candidates, label_of)
    result = classify_variant(
        replace(task, evidence=evidence, tree=evidence_tree(tree, evidence, task.memo))
    )
    baseline = task.variant.name
    levels = compare_outcomes(
        outcomes[baseline],
        row_outcomes(result.predictions, labels, outcome_tree),
        outcome_tree,
        clusters=clusters,
        seed=spec.seed,
    )
    payload: dict[str, Any] = {
        "baseline": baseline,
        "groupedWith": spec.grouping.to_json(),
        "comparedWith": {"mode": "none"},
        "note": "difference = ungrouped minus grouped accuracy of the baseline on the same "
        "records: how much holding out the groups moved each level",
        "levels": paired_levels_to_json(levels),
    }
    with open_warehouse() as conn, transaction(conn):
        holdout_store.save_leakage_gap(conn, eval_id, payload)
    summary: dict[str, Any] = {"requested": True}
    readings = {"better": "grouping lowered it", "worse": "grouping raised it"}
    for depth in map(str, spec.target_depth):
        level = payload["levels"][depth]
        summary[f"gap_L{depth}"] = level["difference"]
        summary[f"reading_L{depth}"] = readings.get(level["verdict"], level["verdict"])
    summary["levels"] = json.dumps(payload["levels"])
    return summary
