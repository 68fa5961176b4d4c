"""Partitions, one line each: every kind of evaluation has its own dynamic partitions, so no
asset family ever lists another family's keys as missing."""

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg

# Asset checks are partitioned like their assets (each evaluation and each revision shows its
# own verdict). Dagster 1.13 calls that a preview and warns each time such a check is defined;
# it is pinned exactly, so the warning says nothing a user can act on. It is silenced only
# while our checks are defined (no filter is left installed: a user's own code still sees it).
PARTITIONED_CHECK_WARNING = "Specifying a partitions_def on an AssetCheckSpec"


@contextmanager
def partitioned_checks() -> Iterator[None]:
    """Define partitioned asset checks without Dagster 1.13's preview warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=PARTITIONED_CHECK_WARNING, category=dg.PreviewWarning
        )
        yield


def partitioned_asset_check(**kwargs: Any) -> Callable[[Callable[..., Any]], Any]:
    """``dg.asset_check(**kwargs)`` for a check partitioned like its asset, defined inside
    :func:`partitioned_checks`."""

    def decorate(function: Callable[..., Any]) -> Any:
        with partitioned_checks():
            return dg.asset_check(**kwargs)(function)

    return decorate


HOLDOUT_EVALUATIONS = "holdout_evaluations"

holdout_evaluations = dg.DynamicPartitionsDefinition(name=HOLDOUT_EVALUATIONS)
WORKFLOW_REVISIONS = "workflow_revisions"

workflow_revisions = dg.DynamicPartitionsDefinition(name=WORKFLOW_REVISIONS)
QUERY_EVALUATIONS = "query_evaluations"

query_evaluations = dg.DynamicPartitionsDefinition(name=QUERY_EVALUATIONS)
CASES = "cases"

cases = dg.DynamicPartitionsDefinition(name=CASES)
LIFT_DAYS = "lift_days"

# A day of live-lift logs gets its partition when a log of it is ingested: the UI lists the
# days that have rows (a daily definition from the first valid day listed thousands, empty).
lift_days = dg.DynamicPartitionsDefinition(name=LIFT_DAYS)
