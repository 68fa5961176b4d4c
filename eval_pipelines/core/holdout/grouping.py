"""Leave-out: which records each sampled record may not see, and its retrieved evidence.

Leave-one-group-out: a sampled record's evidence excludes the record itself and its group
(near-duplicates by cosine in the grouping's space, TF-IDF by default, or records sharing
``groupField``'s value). The list is computed once per evaluation and shared by every variant,
whatever space each variant retrieves its evidence in. Retrieval masks the
excluded records inside the exact scan, so no row falls short because of the leave-out; a row
falls short only when fewer records than requested share any text feature with it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import polars as pl

from eval_pipelines.core.holdout.grouping_settings import Grouping
from eval_pipelines.core.holdout.retrieval import Retrieval
from eval_pipelines.core.text.inverted_index import SearchIndex
from eval_pipelines.core.text.retrieval import search
from eval_pipelines.core.text.search_result import SearchResult


@dataclass(frozen=True)
class LeaveOut:
    """Leave-out list and retrieved evidence for one evaluation.

    Attributes
    ----------
    excluded
        ``sample_key, excluded_key, reason`` (``self`` or ``group``).
    candidates
        ``sample_key, rank, evidence_key, similarity, retrieval``: per retrieval, up to its
        requested depth per sampled record.
    requested
        Candidates asked for per sampled record (the largest any variant uses).
    requested_by_retrieval
        Candidates asked for per sampled record, per retrieval key.
    """

    excluded: pl.DataFrame
    candidates: pl.DataFrame
    requested: int
    requested_by_retrieval: dict[str, int] = field(default_factory=dict)

    @property
    def group_members_excluded(self) -> int:
        return int((self.excluded.get_column("reason") == "group").sum())

    @property
    def excluded_records(self) -> int:
        return self.excluded.height


def field_groups(metadata: list[str], positions: np.ndarray, field: str) -> list[np.ndarray]:
    """For each sampled position, the other positions sharing its ``field`` value.

    A record whose value is missing (null) forms a group of its own.
    """
    values = [json.loads(m).get(field) for m in metadata]
    members: dict[str, list[int]] = {}
    for row, value in enumerate(values):
        if value is not None:
            members.setdefault(str(value), []).append(row)
    groups = []
    for position in positions:
        value = values[int(position)]
        same = members.get(str(value), []) if value is not None else []
        groups.append(np.array([r for r in same if r != position], dtype=np.int32))
    return groups


class Searcher(Protocol):
    """One retrieval space and backend: the exact sparse scan, the exact dense product or the
    approximate index, all with :func:`eval_pipelines.core.text.retrieval.search`'s semantics."""

    def __call__(
        self,
        query_docs: np.ndarray,
        *,
        k: int,
        near_duplicate_threshold: float | None,
        exclude_indptr: np.ndarray | None,
        exclude_indices: np.ndarray | None,
    ) -> SearchResult: ...


def text_searcher(index: SearchIndex, *, n_threads: int = 2) -> Searcher:
    """The exact sparse scan over a case's TF-IDF vectors as a :class:`Searcher`."""
    return functools.partial(search, index, n_threads=n_threads)


def compute_leave_out(
    index: SearchIndex,
    record_keys: list[str],
    metadata: list[str],
    positions: np.ndarray,
    grouping: Grouping,
    *,
    candidates: int,
    n_threads: int = 2,
) -> LeaveOut:
    """Compute the leave-out list and retrieve ``candidates`` evidence records per sampled one,
    all in the TF-IDF space with the exact scan.

    ``record_keys`` and ``metadata`` are the case's records in index order (sorted by key).
    """
    key = Retrieval().key
    return compute_leave_out_in_spaces(
        {key: text_searcher(index, n_threads=n_threads)},
        record_keys,
        metadata,
        positions,
        grouping,
        candidates={key: candidates},
    )


def _csr(groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    indptr = np.zeros(len(groups) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(g) for g in groups])
    indices = np.concatenate(groups).astype(np.int32) if groups else np.zeros(0, dtype=np.int32)
    return indptr, indices


@dataclass(frozen=True)
class Groups:
    """Each sampled record's group (the records held out besides itself), as CSR rows of
    record positions in query order."""

    indptr: np.ndarray
    indices: np.ndarray


def field_grouping(metadata: list[str], positions: np.ndarray, field: str) -> Groups:
    return Groups(*_csr(field_groups(metadata, positions, field)))


def no_groups(n_queries: int) -> Groups:
    return Groups(np.zeros(n_queries + 1, dtype=np.int64), np.zeros(0, dtype=np.int32))


def leave_out_searches(
    searchers: Mapping[str, Searcher],
    positions: np.ndarray,
    grouping: Grouping,
    *,
    candidates: Mapping[str, int],
    groups: Groups | None = None,
) -> tuple[dict[str, SearchResult], Groups]:
    """Decide the groups (unless given), then search every retrieval with them masked.

    Near-duplicate groups come from the search in the grouping's space, which also serves as
    that space's evidence when a variant retrieves there. ``groups`` skips deciding them:
    records sharing the group field, or groups decided elsewhere (a sharded run decides them
    once, before the shards search).
    """
    queries = positions.astype(np.int64)
    results: dict[str, SearchResult] = {}
    if groups is None:
        if grouping.mode == "field":
            assert grouping.field is not None
            raise ValueError("field grouping: pass groups=field_grouping(...)")
        if grouping.mode == "nearDuplicate":
            assert grouping.threshold is not None
            key = grouping.retrieval.key
            found = searchers[key](
                queries,
                k=candidates.get(key, 1),
                near_duplicate_threshold=grouping.threshold,
                exclude_indptr=None,
                exclude_indices=None,
            )
            if key in candidates:
                results[key] = found
            groups = Groups(found.near_duplicate_indptr, found.near_duplicate_indices)
        else:
            groups = no_groups(len(positions))
    masked = grouping.mode != "none"
    for key, depth in candidates.items():
        if key not in results:
            results[key] = searchers[key](
                queries,
                k=depth,
                near_duplicate_threshold=None,
                exclude_indptr=groups.indptr if masked else None,
                exclude_indices=groups.indices if masked else None,
            )
    return results, groups


def compute_leave_out_in_spaces(
    searchers: Mapping[str, Searcher],
    record_keys: list[str],
    metadata: list[str],
    positions: np.ndarray,
    grouping: Grouping,
    *,
    candidates: Mapping[str, int],
) -> LeaveOut:
    """The leave-out list, then the evidence of every retrieval the variants use.

    The group is decided once: records sharing the group field, or the near-duplicates found
    in the grouping's space. Every retrieval then masks the same held-out records, so each
    space keeps the same leave-out semantics. ``searchers`` maps retrieval keys
    (``space:backend``) to searchers and must hold the grouping's key for near-duplicate
    grouping; ``candidates`` maps each key whose evidence is wanted to its depth.
    """
    groups = (
        field_grouping(metadata, positions, grouping.field)
        if grouping.mode == "field" and grouping.field is not None
        else None
    )
    results, groups = leave_out_searches(
        searchers, positions, grouping, candidates=candidates, groups=groups
    )
    return leave_out_frames(record_keys, positions, results, groups, candidates=candidates)


def leave_out_frames(
    record_keys: list[str],
    positions: np.ndarray,
    results: Mapping[str, SearchResult],
    groups: Groups,
    *,
    candidates: Mapping[str, int],
) -> LeaveOut:
    """The leave-out list and candidates frames of finished searches."""
    group_indptr, group_indices = groups.indptr, groups.indices
    keys = np.asarray(record_keys, dtype=object)
    sample_keys = keys[positions]
    group_sizes = np.diff(group_indptr)
    schema = {"sample_key": pl.String, "excluded_key": pl.String, "reason": pl.String}
    excluded = pl.concat(
        [
            pl.DataFrame(
                {"sample_key": sample_keys, "excluded_key": sample_keys, "reason": "self"},
                schema=schema,
            ),
            pl.DataFrame(
                {
                    "sample_key": np.repeat(sample_keys, group_sizes),
                    "excluded_key": keys[group_indices],
                    "reason": "group",
                },
                schema=schema,
            ),
        ]
    ).sort("sample_key", "reason", "excluded_key")
    frames = [_candidates_frame(key, results[key], keys, sample_keys) for key in candidates]
    return LeaveOut(
        excluded=excluded,
        candidates=pl.concat(frames) if frames else _candidates_frame("", None, keys, sample_keys),
        requested=max(candidates.values(), default=0),
        requested_by_retrieval=dict(candidates),
    )


CANDIDATES_SCHEMA = {
    "sample_key": pl.String,
    "rank": pl.Int32,
    "evidence_key": pl.String,
    "similarity": pl.Float32,
    "retrieval": pl.String,
}


def _candidates_frame(
    key: str, result: SearchResult | None, keys: np.ndarray, sample_keys: np.ndarray
) -> pl.DataFrame:
    if result is None:
        return pl.DataFrame(schema=CANDIDATES_SCHEMA)
    rows, ranks = np.nonzero(result.neighbours >= 0)
    return pl.DataFrame(
        {
            "sample_key": sample_keys[rows],
            "rank": (ranks + 1).astype(np.int32),
            "evidence_key": keys[result.neighbours[rows, ranks]],
            "similarity": result.similarities[rows, ranks].astype(np.float32),
            "retrieval": key,
        },
        schema=CANDIDATES_SCHEMA,
    )
