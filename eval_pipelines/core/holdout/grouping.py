"""Leave-out: which records each sampled record may not see, and its retrieved evidence.

Leave-one-group-out: a sampled record's evidence excludes the record itself and its group
(near-duplicates by cosine on the TF-IDF vectors, or records sharing ``groupField``'s value).
The list is computed once per evaluation and shared by every variant. Retrieval masks the
excluded records inside the exact scan, so no row falls short because of the leave-out; a row
falls short only when fewer records than requested share any text feature with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import polars as pl

from eval_pipelines.core.holdout.spec import Grouping
from eval_pipelines.core.text.retrieval import TextIndex, search


@dataclass(frozen=True)
class LeaveOut:
    """Leave-out list and retrieved evidence for one evaluation.

    Attributes
    ----------
    excluded
        ``sample_key, excluded_key, reason`` (``self`` or ``group``).
    candidates
        ``sample_key, rank, evidence_key, similarity``: up to ``requested`` per sampled record.
    requested
        Candidates asked for per sampled record (the largest any variant uses).
    """

    excluded: pl.DataFrame
    candidates: pl.DataFrame
    requested: int

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


def compute_leave_out(
    index: TextIndex,
    record_keys: list[str],
    metadata: list[str],
    positions: np.ndarray,
    grouping: Grouping,
    *,
    candidates: int,
    n_threads: int = 2,
) -> LeaveOut:
    """Compute the leave-out list and retrieve ``candidates`` evidence records per sampled one.

    ``record_keys`` and ``metadata`` are the case's records in index order (sorted by key).
    """
    exclude_indptr = exclude_indices = None
    if grouping.mode == "field":
        assert grouping.field is not None
        groups = field_groups(metadata, positions, grouping.field)
        exclude_indptr = np.zeros(len(groups) + 1, dtype=np.int64)
        exclude_indptr[1:] = np.cumsum([len(g) for g in groups])
        exclude_indices = (
            np.concatenate(groups).astype(np.int32) if groups else np.zeros(0, dtype=np.int32)
        )
    threshold = grouping.threshold if grouping.mode == "nearDuplicate" else None
    result = search(
        index,
        positions.astype(np.int64),
        k=candidates,
        near_duplicate_threshold=threshold,
        exclude_indptr=exclude_indptr,
        exclude_indices=exclude_indices,
        n_threads=n_threads,
    )
    if grouping.mode == "nearDuplicate":
        group_indptr, group_indices = result.near_duplicate_indptr, result.near_duplicate_indices
    elif grouping.mode == "field":
        assert exclude_indptr is not None and exclude_indices is not None
        group_indptr, group_indices = exclude_indptr, exclude_indices
    else:
        group_indptr = np.zeros(len(positions) + 1, dtype=np.int64)
        group_indices = np.zeros(0, dtype=np.int32)

    keys = np.asarray(record_keys, dtype=object)
    sample_keys = keys[positions]
    group_sizes = np.diff(group_indptr)
    excluded = pl.concat(
        [
            pl.DataFrame(
                {"sample_key": sample_keys, "excluded_key": sample_keys, "reason": "self"},
                schema={"sample_key": pl.String, "excluded_key": pl.String, "reason": pl.String},
            ),
            pl.DataFrame(
                {
                    "sample_key": np.repeat(sample_keys, group_sizes),
                    "excluded_key": keys[group_indices],
                    "reason": "group",
                },
                schema={"sample_key": pl.String, "excluded_key": pl.String, "reason": pl.String},
            ),
        ]
    ).sort("sample_key", "reason", "excluded_key")

    found = result.neighbours >= 0
    rows, ranks = np.nonzero(found)
    candidates_frame = pl.DataFrame(
        {
            "sample_key": sample_keys[rows],
            "rank": (ranks + 1).astype(np.int32),
            "evidence_key": keys[result.neighbours[rows, ranks]],
            "similarity": result.similarities[rows, ranks].astype(np.float32),
        },
        schema={
            "sample_key": pl.String,
            "rank": pl.Int32,
            "evidence_key": pl.String,
            "similarity": pl.Float32,
        },
    )
    return LeaveOut(excluded=excluded, candidates=candidates_frame, requested=candidates)
