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
from eval_pipelines.core.holdout.retrieval import Retrieval
from eval_pipelines.core.holdout.spec import HoldoutSpec
from eval_pipelines.stages.holdout_spec import load_spec
from eval_pipelines.stages.text_index import IndexHandle, OpenWarehouse, records_index
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import holdout as holdout_store
from eval_pipelines.storage.warehouse import transaction

if TYPE_CHECKING:
    # The search modules load numba: the Dagster definitions import this module, and only
    # the steps that search need them (imported in the functions below).
    from eval_pipelines.core.holdout.grouping import Groups, LeaveOut
    from eval_pipelines.core.text.search_result import SearchResult

TFIDF = Retrieval().key
SHARDS_MAX = 256
# Figures of a retrieval's log that add up when it ran in two steps (its grouping search in
# the plan, its evidence search in the store).
_ADDITIVE_FIGURES = ("seconds", "queries", "fallbackQueries", "indexSeconds")
_PURPOSES = ("grouping", "evidence")


@dataclass(frozen=True)
class RetrievalPlan:
    """What every shard and the store need, decided once, so that neither reads the spec or
    the records again.

    Attributes
    ----------
    eval_id
        The evaluation.
    spec
        Its stored spec.
    n_records
        Records of the pinned version (what the text index covers).
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
    spec: HoldoutSpec
    n_records: int
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


def _positions(eval_id: str, record_keys: pl.Series, sample: pl.DataFrame) -> np.ndarray:
    """Index positions (ranks in ``record_key`` order) of the sampled records, in draw order."""
    if sample.height == 0:
        raise ConflictError(f"evalId={eval_id!r}: no sample stored; materialise holdout_sample")
    found = sample.select("record_key").join(
        record_keys.to_frame().with_row_index("position"),
        on="record_key",
        how="left",
        maintain_order="left",
    )
    if found.get_column("position").null_count():
        raise ConflictError(f"evalId={eval_id!r}: its sample holds records of another version")
    return found.get_column("position").to_numpy().astype(np.int64)


def _tfidf_in_shards(spec: HoldoutSpec) -> tuple[bool, bool]:
    """(the grouping searches TF-IDF, a variant takes its evidence from TF-IDF)."""
    grouping = spec.grouping.mode == "nearDuplicate" and spec.grouping.retrieval.key == TFIDF
    return grouping, any(r.key == TFIDF for r in spec.retrievals)


def _groups_by_field(spec: HoldoutSpec) -> bool:
    return spec.grouping.mode == "field" and spec.grouping.field is not None


def _text_index(open_warehouse: OpenWarehouse, plan: RetrievalPlan, index_dir: Path) -> IndexHandle:
    """The evaluation's TF-IDF index: memory-mapped (or this process's copy), read from the
    records only if it is missing."""
    spec = plan.spec
    return records_index(
        open_warehouse, index_dir, spec.case_id, spec.records_version, n_records=plan.n_records
    )


def _groups_before_shards(
    open_warehouse: OpenWarehouse,
    spec: HoldoutSpec,
    records: pl.DataFrame,
    positions: np.ndarray,
    *,
    index_dir: Path,
    threads: int,
) -> tuple[Groups | None, list[dict[str, Any]]]:
    """The groups when they are not the TF-IDF search's own, and the log of the search that
    found them: records sharing the group field, or near-duplicates in another space."""
    from eval_pipelines.core.holdout.grouping import field_grouping, leave_out_searches
    from eval_pipelines.stages.retrievers import evaluation_searchers

    if _groups_by_field(spec):
        assert spec.grouping.field is not None
        metadata = records.get_column("metadata").to_list()
        return field_grouping(metadata, positions, spec.grouping.field), []
    grouping_in_tfidf, _ = _tfidf_in_shards(spec)
    if spec.grouping.mode != "nearDuplicate" or grouping_in_tfidf:
        return None, []
    key = spec.grouping.retrieval.key
    # When variants also retrieve their evidence this way, the store searches it again and
    # measures the approximate index's recall there, on the search that gives the evidence.
    evidence = {r.key for r in spec.retrievals}
    searchers, found_logs = evaluation_searchers(
        spec,
        None,
        open_warehouse,
        index_dir=index_dir,
        threads=threads,
        keys={key},
        unprobed={key} & evidence,
    )
    _, groups = leave_out_searches({key: searchers[key]}, positions, spec.grouping, candidates={})
    return groups, [log.to_json() for log in found_logs]


def plan_retrieval(
    open_warehouse: OpenWarehouse,
    eval_id: str,
    *,
    index_dir: Path,
    threads: int,
    shards: int = 1,
) -> RetrievalPlan:
    """Positions, shard ranges, and the groups when they are not the TF-IDF search's own.

    Reads the record keys (and their metadata for field grouping), never their texts.
    """
    from eval_pipelines.core.text.shards import shard_ranges

    validate_shards(shards)
    with open_warehouse(read_only=True) as conn:
        spec = load_spec(conn, eval_id)
        records = cases_store.load_records(
            conn,
            spec.case_id,
            spec.records_version,
            columns=("record_key", "metadata") if _groups_by_field(spec) else ("record_key",),
        )
        sample = holdout_store.load_sample(conn, eval_id)
    positions = _positions(eval_id, records.get_column("record_key"), sample)
    groups, logs = _groups_before_shards(
        open_warehouse, spec, records, positions, index_dir=index_dir, threads=threads
    )
    grouping_in_tfidf, tfidf_evidence = _tfidf_in_shards(spec)
    depth = spec.candidates_for(Retrieval()) if tfidf_evidence else (1 if grouping_in_tfidf else 0)
    return RetrievalPlan(
        eval_id=eval_id,
        spec=spec,
        n_records=records.height,
        positions=positions,
        ranges=tuple(shard_ranges(records.height, shards)) if depth else (),
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
    """The exact TF-IDF search among one shard's records (ids stay global).

    The spec comes with the plan and the index is memory-mapped, so a shard reads nothing from
    the warehouse (unless the index is missing and must be built).
    """
    from eval_pipelines.core.holdout.grouping import leave_out_searches
    from eval_pipelines.core.text.retrieval import search

    handle = _text_index(open_warehouse, plan, index_dir)
    started = time.perf_counter()
    searcher = functools.partial(
        search, handle.index, doc_range=plan.ranges[shard], n_threads=threads
    )
    results, _ = leave_out_searches(
        {TFIDF: searcher},
        plan.positions,
        plan.spec.grouping,
        candidates={TFIDF: plan.shard_depth},
        groups=plan.groups,
    )
    return ShardResult(shard, results[TFIDF], time.perf_counter() - started)


def _check_parts(plan: RetrievalPlan, parts: list[ShardResult]) -> None:
    got = sorted(p.shard for p in parts)
    if got != list(range(len(plan.ranges))):
        raise ConflictError(f"evalId={plan.eval_id!r}: got shards {got} of {len(plan.ranges)}")


def _tfidf_log(plan: RetrievalPlan, parts: list[ShardResult]) -> dict[str, Any]:
    """How the sharded TF-IDF search ran (its row of ``eval_retrievals``)."""
    grouping_in_tfidf, _ = _tfidf_in_shards(plan.spec)
    purposes = [
        purpose
        for purpose, used in zip(_PURPOSES, (grouping_in_tfidf, plan.tfidf_evidence), strict=True)
        if used
    ]
    return {
        "retrieval": TFIDF,
        "purpose": "+".join(purposes),
        "space": "tfidf",
        "backend": "exact",
        "requestedBackend": "exact",
        "queries": int(len(plan.positions)),
        "seconds": round(sum(p.seconds for p in parts), 3),
    }


def _merged_log(earlier: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """One row for a retrieval that ran in two steps: time, queries and fallbacks add up, the
    purposes join, and the later step's details (its recall probe) win."""
    merged = {**earlier, **later}
    for name in _ADDITIVE_FIGURES:
        if name in earlier and name in later:
            merged[name] = round(earlier[name] + later[name], 3)
    if "indexBuilt" in earlier or "indexBuilt" in later:
        merged["indexBuilt"] = bool(earlier.get("indexBuilt") or later.get("indexBuilt"))
    used = {*earlier["purpose"].split("+"), *later["purpose"].split("+")}
    merged["purpose"] = "+".join(p for p in _PURPOSES if p in used)
    return merged


def one_row_per_retrieval(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The logs of an evaluation's steps with one row per retrieval key, in first-run order."""
    rows: dict[str, dict[str, Any]] = {}
    for log in logs:
        key = log["retrieval"]
        rows[key] = _merged_log(rows[key], log) if key in rows else log
    return list(rows.values())


def _other_spaces(
    open_warehouse: OpenWarehouse,
    plan: RetrievalPlan,
    rest: dict[str, int],
    groups: Groups,
    *,
    index_dir: Path,
    threads: int,
) -> tuple[dict[str, SearchResult], list[dict[str, Any]]]:
    """Evidence in the retrievals the shards did not search, with the plan's groups masked;
    only their searchers are built."""
    from eval_pipelines.core.holdout.grouping import leave_out_searches
    from eval_pipelines.stages.retrievers import evaluation_searchers

    text = _text_index(open_warehouse, plan, index_dir) if TFIDF in rest else None
    searchers, found_logs = evaluation_searchers(
        plan.spec, text, open_warehouse, index_dir=index_dir, threads=threads, keys=rest
    )
    results, _ = leave_out_searches(
        searchers, plan.positions, plan.spec.grouping, candidates=rest, groups=groups
    )
    return results, [log.to_json() for log in found_logs]


def _rows_short(result: LeaveOut, n_queries: int) -> int:
    """Sampled records given fewer candidates than requested, summed over retrievals."""
    short = 0
    for key, requested in result.requested_by_retrieval.items():
        per_record = (
            result.candidates.filter(pl.col("retrieval") == key).group_by("sample_key").len()
        )
        short += n_queries - per_record.filter(pl.col("len") >= requested).height
    return short


def store_leave_out(
    open_warehouse: OpenWarehouse,
    plan: RetrievalPlan,
    parts: list[ShardResult],
    *,
    index_dir: Path,
    threads: int,
) -> dict[str, Any]:
    """Merge the shards, search the other spaces with the same groups, store everything.

    Reads only the record keys; every retrieval gets one row in ``eval_retrievals``, also one
    the plan searched for the grouping and this step for evidence.
    """
    from eval_pipelines.core.holdout.grouping import Groups, leave_out_frames, no_groups
    from eval_pipelines.core.text.shards import merge_shard_results

    started = time.perf_counter()
    spec = plan.spec
    _check_parts(plan, parts)
    candidates = {r.key: spec.candidates_for(r) for r in spec.retrievals}
    results: dict[str, SearchResult] = {}
    groups = plan.groups
    logs: list[dict[str, Any]] = []
    if plan.ranges:
        ordered = [p.result for p in sorted(parts, key=lambda p: p.shard) if p.result is not None]
        merged = merge_shard_results(ordered, k=plan.shard_depth)
        if groups is None:
            groups = Groups(merged.near_duplicate_indptr, merged.near_duplicate_indices)
        if plan.tfidf_evidence:
            results[TFIDF] = merged
        logs.append(_tfidf_log(plan, parts))
    logs += plan.logs
    if groups is None:
        groups = no_groups(len(plan.positions))
    rest = {key: depth for key, depth in candidates.items() if key not in results}
    if rest:
        more, more_logs = _other_spaces(
            open_warehouse, plan, rest, groups, index_dir=index_dir, threads=threads
        )
        results.update(more)
        logs += more_logs
    logs = one_row_per_retrieval(logs)
    with open_warehouse() as conn:
        record_keys = cases_store.load_records(
            conn, spec.case_id, spec.records_version, columns=("record_key",)
        )
        result = leave_out_frames(
            record_keys.get_column("record_key").to_list(),
            plan.positions,
            results,
            groups,
            candidates=candidates,
        )
        with transaction(conn):
            holdout_store.save_leave_out(conn, plan.eval_id, result.excluded, result.candidates)
            holdout_store.save_retrievals(conn, plan.eval_id, logs)
    return {
        "grouping": spec.grouping.mode,
        "excluded_records": result.excluded_records,
        "group_members_excluded": result.group_members_excluded,
        "requested_candidates": result.requested,
        "rows_short": _rows_short(result, len(plan.positions)),
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
