"""How an evaluation keeps near-duplicates of its sample out of the evidence (000's
``grouping``): the mode, the threshold, the group field, the space near-duplicates are found
in."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout.retrieval import Retrieval, parse_retrieval, retrieval_from_json

GROUPING_MODES = ("nearDuplicate", "field", "none")
GROUPING_KEYS = ("mode", "threshold", "field", "retrieval")
DEFAULT_NEAR_DUPLICATE_THRESHOLD = 0.98


@dataclass(frozen=True)
class Grouping:
    """How near-duplicates of the sample are kept out of its evidence."""

    mode: str = "nearDuplicate"
    threshold: float | None = DEFAULT_NEAR_DUPLICATE_THRESHOLD
    field: str | None = None
    # The space near-duplicates are found in (nearDuplicate mode only). A threshold means
    # different things in different spaces, so a non-default space is part of the JSON and
    # of what makes two evaluations comparable.
    retrieval: Retrieval = Retrieval()

    def to_json(self) -> dict[str, Any]:
        if self.mode == "nearDuplicate":
            data: dict[str, Any] = {"mode": self.mode, "threshold": self.threshold}
            if not self.retrieval.is_default:
                data["retrieval"] = self.retrieval.to_json()
            return data
        if self.mode == "field":
            return {"mode": self.mode, "field": self.field}
        return {"mode": self.mode}


def parse_grouping(
    mode: str | None,
    threshold: float | None,
    group_field: str | None,
    retrieval: Any = None,
    *,
    n_records: int | None = None,
    n_queries: int | None = None,
) -> Grouping:
    """Resolve grouping flags as 000 states them.

    ``groupField`` alone means mode ``field``; with any other mode it is an error. A threshold
    belongs to ``nearDuplicate`` only and must lie in (0, 1]; so does a retrieval space.
    """
    if mode is None:
        mode = "field" if group_field is not None else "nearDuplicate"
    if mode not in GROUPING_MODES:
        raise InputError("grouping.mode", mode, f"must be one of {', '.join(GROUPING_MODES)}")
    if group_field is not None and mode != "field":
        raise InputError(
            "groupField", group_field, f"can only be combined with grouping mode field, not {mode}"
        )
    if threshold is not None:
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, int | float)
            or math.isnan(threshold)
            or not 0 < threshold <= 1
        ):
            raise InputError("grouping.threshold", threshold, "must be above 0 and at most 1")
        if mode != "nearDuplicate":
            raise InputError(
                "grouping.threshold", threshold, f"applies to mode nearDuplicate only, not {mode}"
            )
    if retrieval is not None and mode != "nearDuplicate":
        raise InputError(
            "grouping.retrieval", retrieval, f"applies to mode nearDuplicate only, not {mode}"
        )
    if mode == "field":
        if not group_field:
            raise InputError("groupField", group_field, "grouping mode field needs a groupField")
        return Grouping(mode="field", threshold=None, field=group_field)
    if mode == "none":
        return Grouping(mode="none", threshold=None, field=None)
    return Grouping(
        mode="nearDuplicate",
        threshold=float(threshold) if threshold is not None else DEFAULT_NEAR_DUPLICATE_THRESHOLD,
        field=None,
        retrieval=parse_retrieval(
            retrieval, where="grouping.retrieval", n_records=n_records, n_queries=n_queries
        ),
    )


def grouping_from_json(raw: dict[str, Any]) -> Grouping:
    """Rebuild a stored grouping (already validated when it was written)."""
    return Grouping(
        mode=raw["mode"],
        threshold=raw.get("threshold"),
        field=raw.get("field"),
        retrieval=retrieval_from_json(raw.get("retrieval")),
    )
