"""The leave-out step, in three parts so the exact TF-IDF search can run as shards on any
worker: plan (the sample's positions, and the groups when they are decided outside the
TF-IDF search), one search per shard of the records (a record-id range, global IDF: the
vectors are the case's own), and the merge, which is exactly the unsharded result
(:mod:`eval_pipelines.core.text.shards`), then the searches in other spaces and the store.

``leave_out_stage`` runs the three in one process; the Dagster ``leave_out`` asset runs
each shard as its own step.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from eval_pipelines.core.errors import ConflictError, InputError
from eval_pipelines.core.holdout.spec import HoldoutSpec, Retrieval
from eval_pipelines.stages.holdout import OpenWarehouse, _records_and_index
from eval_pipelines.storage import holdout
from eval_pipelines.storage.warehouse import transaction

if TYPE_CHECKING:
    # The search modules load numba: the Dagster definitions import this module, and only
    # the steps that search need them (imported in the functions below).
    from eval_pipelines.core.holdout.grouping import Groups
    from eval_pipelines.core.text.retrieval import SearchResult

TFIDF = Retrieval().key
SHARDS_MAX = 256


@dataclass(frozen=True)
class RetrievalPlan:
    """What every shard needs, decided once.

    Attributes
    ----------
    eval_id
        The evaluation.
    positions
        Index positions of the sampled records, in sample order (the queries).
    ranges
        ``(lo, hi)`` record-id range of each shard.
    groups
        Held-out groups decided before the shards (field grouping, or near-duplicates in a
        space other than TF-IDF); None when the shards find them in the TF-IDF search.
    shard_depth
        Neighbours each shard keeps from the TF-IDF search (0: no TF-IDF search at all).
    tfidf_evidence
        Whether a variant takes its evidence from the TF-IDF search.
    logs
        How the searches of the plan step ran (rows of ``eval_retrievals``).
    """

    eval_id: str
    positions: np.ndarray
    ranges: tuple[tuple[int, int], ...]
    groups: Groups | None
    shard_depth: int
    tfidf_evidence: bool
    logs: tuple[dict[str, Any], ...] = field(default=())


@dataclass(frozen=True)
class ShardResult:
    shard: int
    result: SearchResult | None
    seconds: float


def validate_shards(shards: Any) -> int:
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= SHARDS_MAX:
        raise InputError("shards", shards, f"must be an integer in 1..{SHARDS_MAX}")
    return shards


def _positions(open_warehouse: OpenWarehouse, eval_id: str, record_keys: list[str]) -> np.ndarray:
    with open_warehouse(read_only=True) as conn:
        sample = holdout.load_sample(conn, eval_id)
    if sample.height == 0:
        raise ConflictError(f"evalId={eval_id!r}: no sample stored; materialise holdout_sample")
    position_of = {key: i for i, key in enumerate(record_keys)}
    return np.array([position_of[k] for k in sample.get_column("record_key")], np.int64)


def _tfidf_in_shards(spec: HoldoutSpec) -> tuple[bool, bool]:
    """(the grouping searches TF-IDF, a variant takes its evidence from TF-IDF)."""
    grouping = spec.grouping.mode == "nearDuplicate" and spec.grouping.retrieval.key == TFIDF
    return grouping, any(r.key == TFIDF for r in spec.retrievals)


def plan_retrieval(
    open_warehouse: OpenWarehouse,
    eval_id: str,
    *,
    index_dir: Path,
    threads: int,
    shards: int = 1,
) -> RetrievalPlan:
    """Positions, shard ranges, and the groups when they are not the TF-IDF search's own."""
    from eval_pipelines.core.holdout.grouping import field_grouping, leave_out_searches
    from eval_pipelines.core.text.shards import shard_ranges
    from eval_pipelines.stages.retrievers import evaluation_searchers

    validate_shards(shards)
    spec, records, handle = _records_and_index(open_warehouse, eval_id, index_dir)
    record_keys = records.get_column("record_key").to_list()
    positions = _positions(open_warehouse, eval_id, record_keys)
    groups: Groups | None = None
    logs: list[dict[str, Any]] = []
    grouping_in_tfidf, tfidf_evidence = _tfidf_in_shards(spec)
    if spec.grouping.mode == "field" and spec.grouping.field is not None:
        groups = field_grouping(
            records.get_column("metadata").to_list(), positions, spec.grouping.field
        )
    elif spec.grouping.mode == "nearDuplicate" and not grouping_in_tfidf:
        searchers, found_logs = evaluation_searchers(
            spec, handle, open_warehouse, index_dir=index_dir, threads=threads
        )
        key = spec.grouping.retrieval.key
        _, groups = leave_out_searches(
            {key: searchers[key]}, positions, spec.grouping, candidates={}
        )
        logs = [log.to_json() for log in found_logs if log.retrieval.key == key]
    depth = spec.candidates_for(Retrieval()) if tfidf_evidence else (1 if grouping_in_tfidf else 0)
    return RetrievalPlan(
        eval_id=eval_id,
        positions=positions,
        ranges=tuple(shard_ranges(handle.index.n_docs, shards)) if depth else (),
        groups=groups,
        shard_depth=depth,
        tfidf_evidence=tfidf_evidence,
        logs=tuple(logs),
    )


def retrieve_shard(
    open_warehouse: OpenWarehouse,
    plan: RetrievalPlan,
    shard: int,
    *,
    index_dir: Path,
    threads: int,
) -> ShardResult:
    """The exact TF-IDF search among one shard's records (ids stay global)."""
    from eval_pipelines.core.holdout.grouping import leave_out_searches
    from eval_pipelines.core.text.shards import search_shard

    spec, _, handle = _records_and_index(open_warehouse, plan.eval_id, index_dir)
    started = time.perf_counter()
    searcher = functools.partial(
        search_shard, handle.index, doc_range=plan.ranges[shard], n_threads=threads
    )
    results, _ = leave_out_searches(
        {TFIDF: searcher},
        plan.positions,
        spec.grouping,
        candidates={TFIDF: plan.shard_depth},
        groups=plan.groups,
    )
    return ShardResult(shard, results[TFIDF], time.perf_counter() - started)


def store_leave_out(
    open_warehouse: OpenWarehouse,
    plan: RetrievalPlan,
    parts: list[ShardResult],
    *,
    index_dir: Path,
    threads: int,
) -> dict[str, Any]:
    """Merge the shards, search the other spaces with the same groups, store everything."""
    from eval_pipelines.core.holdout.grouping import (
        Groups,
        leave_out_frames,
        leave_out_searches,
        no_groups,
    )
    from eval_pipelines.core.text.shards import merge_shard_results
    from eval_pipelines.stages.retrievers import evaluation_searchers

    started = time.perf_counter()
    spec, records, handle = _records_and_index(open_warehouse, plan.eval_id, index_dir)
    if sorted(p.shard for p in parts) != list(range(len(plan.ranges))):
        raise ConflictError(
            f"evalId={plan.eval_id!r}: got shards {sorted(p.shard for p in parts)} of "
            f"{len(plan.ranges)}"
        )
    candidates = {r.key: spec.candidates_for(r) for r in spec.retrievals}
    results: dict[str, SearchResult] = {}
    groups = plan.groups
    logs = list(plan.logs)
    if plan.ranges:
        ordered = [p.result for p in sorted(parts, key=lambda p: p.shard) if p.result is not None]
        merged = merge_shard_results(ordered, k=plan.shard_depth)
        if groups is None:
            groups = Groups(merged.near_duplicate_indptr, merged.near_duplicate_indices)
        if plan.tfidf_evidence:
            results[TFIDF] = merged
        grouping_in_tfidf, _ = _tfidf_in_shards(spec)
        logs.insert(
            0,
            {
                "retrieval": TFIDF,
                "purpose": "grouping+evidence"
                if grouping_in_tfidf and plan.tfidf_evidence
                else ("grouping" if grouping_in_tfidf else "evidence"),
                "space": "tfidf",
                "backend": "exact",
                "requestedBackend": "exact",
                "queries": int(len(plan.positions)),
                "seconds": round(sum(p.seconds for p in parts), 3),
            },
        )
    rest = {key: depth for key, depth in candidates.items() if key not in results}
    if rest:
        searchers, found_logs = evaluation_searchers(
            spec, handle, open_warehouse, index_dir=index_dir, threads=threads
        )
        more, groups = leave_out_searches(
            {key: searchers[key] for key in rest},
            plan.positions,
            spec.grouping,
            candidates=rest,
            groups=groups if groups is not None else no_groups(len(plan.positions)),
        )
        results.update(more)
        logs += [log.to_json() for log in found_logs if log.retrieval.key in rest]
    assert groups is not None
    result = leave_out_frames(
        records.get_column("record_key").to_list(),
        plan.positions,
        results,
        groups,
        candidates=candidates,
    )
    with open_warehouse() as conn, transaction(conn):
        holdout.save_leave_out(conn, plan.eval_id, result.excluded, result.candidates)
        holdout.save_retrievals(conn, plan.eval_id, logs)
    n_queries = len(plan.positions)
    short = 0
    for key, requested in result.requested_by_retrieval.items():
        per_record = (
            result.candidates.filter(pl.col("retrieval") == key).group_by("sample_key").len()
        )
        short += n_queries - per_record.filter(pl.col("len") >= requested).height
    return {
        "grouping": spec.grouping.mode,
        "excluded_records": result.excluded_records,
        "group_members_excluded": result.group_members_excluded,
        "requested_candidates": result.requested,
        "rows_short": short,
        "shards": len(plan.ranges),
        "retrieval_seconds": round(
            sum(p.seconds for p in parts) + time.perf_counter() - started, 3
        ),
        "retrievals": logs,
    }


def leave_out_stage(
    open_warehouse: OpenWarehouse,
    eval_id: str,
    *,
    index_dir: Path,
    threads: int,
    shards: int = 1,
) -> dict[str, Any]:
    """Plan, search every shard and store, in this process."""
    plan = plan_retrieval(
        open_warehouse, eval_id, index_dir=index_dir, threads=threads, shards=shards
    )
    parts = [
        retrieve_shard(open_warehouse, plan, shard, index_dir=index_dir, threads=threads)
        for shard in range(len(plan.ranges))
    ]
    return store_leave_out(open_warehouse, plan, parts, index_dir=index_dir, threads=threads)
