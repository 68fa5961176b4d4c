"""Near-duplicate threshold sweep: calibrate the nearDuplicate threshold of a
case by reading, per threshold, the evidence it holds out and the baseline's accuracy per level.

Computed in this process on one seeded sample (no Dagster run, nothing written): see
:mod:`eval_pipelines.stages.grouping_sweep`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipelines import settings
from eval_pipelines.api._shared import resolve_warehouse
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout.spec import (
    DEFAULT_SEED,
    SAMPLE_SIZE_DEFAULT,
    validate_case_id,
    validate_sample_size,
    validate_seed,
)
from eval_pipelines.core.results import JsonResult
from eval_pipelines.core.stats.proportion import Proportion
from eval_pipelines.stages.shared_files import run_index_dir

if TYPE_CHECKING:
    from eval_pipelines.stages.grouping_sweep import Sweep, SweepRow

__all__ = [
    "GroupingSweep",
    "HeldOut",
    "SweepLevel",
    "SweepLevelScore",
    "SweepSample",
    "SweepBaseline",
    "ThresholdRow",
    "grouping_sweep",
    "validate_thresholds",
]

THRESHOLD_RULE = "each threshold must be a number above 0 and at most 1"
DEFINITIONS = {
    "groupMembers": "records held out besides the sampled record itself, summed over "
    "the sample (its near-duplicates at the threshold)",
    "recordsWithGroup": "sampled records with at least one near-duplicate held out",
    "sameLabel": "held-out group members whose label equals the sampled record's",
    "rowsShort": "sampled records for which retrieval found fewer evidence records "
    "than the config's candidates",
    "accuracy": "the baseline right at the level over the sampled records whose label "
    "reaches it, Wilson 95% interval; below n=20 insufficient_evidence",
}


@dataclass(frozen=True)
class SweepSample(JsonResult):
    """The one seeded sample every row scores (``size`` below ``requested_size`` only when
    the case has fewer records)."""

    size: int
    requested_size: int
    seed: int
    sample_hash: str


@dataclass(frozen=True)
class SweepBaseline(JsonResult):
    """The baseline scored: its name and its resolved config (the config document)."""

    name: str
    config: Mapping[str, object]


@dataclass(frozen=True)
class SweepLevel(JsonResult):
    """A level of the case's tree; ``is_target`` when the baseline's target depth has it."""

    depth: int
    name: str
    is_target: bool


@dataclass(frozen=True)
class HeldOut(JsonResult):
    """The evidence a grouping holds out besides each sampled record itself (see
    ``GroupingSweep.definitions``)."""

    group_members: int
    group_members_per_record: float
    records_with_group: int
    same_label: int


@dataclass(frozen=True)
class SweepLevelScore(JsonResult):
    """The baseline at one level: its accuracy (a :class:`Proportion`, written as the
    ``{k, n, value, interval}`` document) and how many records it declined."""

    name: str
    is_target: bool
    accuracy: Proportion
    declined: int

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        document["accuracy"] = self.accuracy.to_json()
        return document


@dataclass(frozen=True)
class ThresholdRow(JsonResult):
    """One grouping of the sweep: ``threshold`` is ``"none"`` for the ungrouped first row;
    ``levels`` maps each depth (as a string) to the baseline's score there."""

    threshold: float | str | None
    grouping: Mapping[str, object]
    held_out: HeldOut
    rows_short: int
    levels: Mapping[str, SweepLevelScore]
    seconds: float


@dataclass(frozen=True)
class GroupingSweep(JsonResult):
    """The sweep: its pins (records, tree and memo versions), the sample, the baseline, the
    tree's levels, what each count means, then one row per grouping (ungrouped first, then
    each threshold, highest first)."""

    case_id: str
    records_version: str
    tree_version: str
    memo_version: str
    active_memo_entries: int
    sample: SweepSample
    baseline: SweepBaseline
    target_depth: tuple[int, ...]
    levels: tuple[SweepLevel, ...]
    definitions: Mapping[str, str]
    rows: tuple[ThresholdRow, ...]
    index_built: bool
    seconds: float


def _row(row: SweepRow, sample_size: int) -> ThresholdRow:
    held_out = row.group_members_held_out
    grouping = row.grouping
    return ThresholdRow(
        threshold=grouping.threshold if grouping.mode == "nearDuplicate" else "none",
        grouping=grouping.to_json(),
        held_out=HeldOut(
            group_members=held_out,
            group_members_per_record=round(held_out / sample_size, 4) if sample_size else 0.0,
            records_with_group=row.records_with_group,
            same_label=row.same_label_held_out,
        ),
        rows_short=row.rows_short,
        levels={
            str(level.depth): SweepLevelScore(
                name=level.name,
                is_target=level.depth in row.score.target_depth,
                accuracy=level.accuracy,
                declined=level.declined,
            )
            for level in row.score.levels
        },
        seconds=round(row.seconds, 3),
    )


def _result(sweep: Sweep) -> GroupingSweep:
    from eval_pipelines.stages.grouping_sweep import BASELINE

    target_depth = tuple(sweep.config.target_depth)
    return GroupingSweep(
        case_id=sweep.case_id,
        records_version=sweep.records_version,
        tree_version=sweep.tree_version,
        memo_version=sweep.memo_version,
        active_memo_entries=sweep.memo_entries,
        sample=SweepSample(
            size=sweep.sample.size,
            requested_size=sweep.sample.requested_size,
            seed=sweep.sample.seed,
            sample_hash=sweep.sample.sample_hash,
        ),
        baseline=SweepBaseline(name=BASELINE, config=sweep.config.to_json()),
        target_depth=target_depth,
        levels=tuple(
            SweepLevel(depth=level.depth, name=level.name, is_target=level.depth in target_depth)
            for level in sweep.tree.levels
        ),
        definitions=DEFINITIONS,
        rows=tuple(_row(row, sweep.sample.size) for row in sweep.rows),
        index_built=sweep.index_built,
        seconds=round(sweep.seconds, 3),
    )


def validate_thresholds(thresholds: object) -> tuple[float, ...]:
    """At least one threshold, each a number in (0, 1], no two equal. Returned highest first
    (so the evidence held out grows down the sweep)."""
    from eval_pipelines.core.search_request import NEAR_DUPLICATE_TOLERANCE

    if isinstance(thresholds, str | bytes) or not isinstance(thresholds, Sequence):
        raise InputError("thresholds", thresholds, "give a list of thresholds, e.g. [0.9, 0.95]")
    if not thresholds:
        raise InputError("thresholds", list(thresholds), "give at least one threshold")
    for value in thresholds:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or math.isnan(value)
            or not 0 < value <= 1
        ):
            raise InputError("thresholds", value, THRESHOLD_RULE)
        if value <= NEAR_DUPLICATE_TOLERANCE:
            raise InputError(
                "thresholds",
                value,
                f"{THRESHOLD_RULE}, and above the search tolerance {NEAR_DUPLICATE_TOLERANCE:g}",
            )
    seen: set[float] = set()
    for value in thresholds:
        if float(value) in seen:
            raise InputError("thresholds", value, "each threshold may be given only once")
        seen.add(float(value))
    return tuple(sorted(seen, reverse=True))


def grouping_sweep(
    case_id: str,
    *,
    thresholds: Sequence[float],
    sample_size: int = SAMPLE_SIZE_DEFAULT,
    seed: int = DEFAULT_SEED,
    config: Mapping[str, object] | None = None,
    warehouse: Path | str | None = None,
) -> GroupingSweep:
    """Per nearDuplicate threshold, the evidence held out and the baseline's accuracy per level.

    One seeded sample (the one a holdout evaluation with this ``sample_size`` and ``seed``
    draws) is scored once without grouping (the first row, ``threshold: "none"``) and once
    per threshold, highest first. ``config`` is the baseline's config (as
    ``eval holdout --config-file`` takes it; default: the built-in knn-vote settings and the
    case's target depth); the case's active memo entries apply, as they do to a baseline.

    Each row's per-level ``accuracy`` (``k``, ``n``, Wilson interval; ``insufficient_evidence``
    below n = 20) equals the baseline's of a holdout evaluation with grouping nearDuplicate at
    that threshold, the same sample size, seed and config.

    Raises
    ------
    InputError
        A bad threshold list, sample size, seed or config (naming it, the value and the rule).
    NotFoundError
        When the case does not exist.
    """
    from eval_pipelines.stages.grouping_sweep import grouping_sweep_stage

    validate_case_id(case_id)
    ordered = validate_thresholds(thresholds)
    validate_sample_size(sample_size)
    validate_seed(seed)
    path = resolve_warehouse(warehouse)
    sweep = grouping_sweep_stage(
        path,
        case_id,
        thresholds=ordered,
        sample_size=sample_size,
        seed=seed,
        config=config,
        index_dir=run_index_dir(path),
        threads=settings.thread_count(),
    )
    return _result(sweep)
