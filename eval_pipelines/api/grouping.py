"""Near-duplicate threshold sweep (issue 7 item 5): calibrate the nearDuplicate threshold of a
case by reading, per threshold, the evidence it holds out and the baseline's accuracy per level.

Computed in this process on one seeded sample (no Dagster run, nothing written): see
:mod:`eval_pipelines.stages.grouping_sweep`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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

THRESHOLDS_FLAG = "--thresholds"
THRESHOLD_RULE = "each threshold must be a number above 0 and at most 1"


def validate_thresholds(thresholds: Any) -> tuple[float, ...]:
    """At least one threshold, each a number in (0, 1], no two equal. Returned highest first
    (so the evidence held out grows down the sweep)."""
    from eval_pipelines.core.search_request import NEAR_DUPLICATE_TOLERANCE

    if isinstance(thresholds, str | bytes) or not isinstance(thresholds, Sequence):
        raise InputError(THRESHOLDS_FLAG, thresholds, "give a list of thresholds, e.g. [0.9, 0.95]")
    if not thresholds:
        raise InputError(THRESHOLDS_FLAG, list(thresholds), "give at least one threshold")
    for value in thresholds:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or math.isnan(value)
            or not 0 < value <= 1
        ):
            raise InputError(THRESHOLDS_FLAG, value, THRESHOLD_RULE)
        if value <= NEAR_DUPLICATE_TOLERANCE:
            raise InputError(
                THRESHOLDS_FLAG,
                value,
                f"{THRESHOLD_RULE}, and above the search tolerance {NEAR_DUPLICATE_TOLERANCE:g}",
            )
    seen: set[float] = set()
    for value in thresholds:
        if float(value) in seen:
            raise InputError(THRESHOLDS_FLAG, value, "each threshold may be given only once")
        seen.add(float(value))
    return tuple(sorted(seen, reverse=True))


def grouping_sweep(
    case_id: str,
    *,
    thresholds: Any,
    sample_size: Any = SAMPLE_SIZE_DEFAULT,
    seed: Any = DEFAULT_SEED,
    config: Any = None,
    warehouse: Path | str | None = None,
) -> dict[str, Any]:
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
    from eval_pipelines.stages.grouping_sweep import grouping_sweep_stage, sweep_to_json

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
        index_dir=settings.index_dir(path),
        threads=settings.thread_count(),
    )
    return sweep_to_json(sweep)
