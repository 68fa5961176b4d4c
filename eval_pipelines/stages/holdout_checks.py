"""The recounts behind the holdout asset checks, from the stored rows: neighbours that break
the leave-out rule, and rows short of the candidates asked for."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np

from eval_pipelines.stages.holdout_spec import load_spec
from eval_pipelines.storage import holdout as holdout_store


@dataclass(frozen=True)
class Leakage:
    """Retrieved neighbours that should never have been retrieved, counted three ways.

    Attributes
    ----------
    on_leave_out_list
        The sampled record itself, or a record on its stored leave-out list.
    sharing_group_field
        Field grouping: neighbours sharing the group field's value, recomputed from the
        records (None for other groupings).
    near_duplicates
        Near-duplicate grouping: neighbours at or above the threshold (less the float32
        tolerance), i.e. members of the record's group (None for other groupings).
    """

    on_leave_out_list: int
    sharing_group_field: int | None
    near_duplicates: int | None

    @property
    def total(self) -> int:
        return (
            self.on_leave_out_list + (self.sharing_group_field or 0) + (self.near_duplicates or 0)
        )


def leakage(conn: duckdb.DuckDBPyConnection, eval_id: str) -> Leakage:
    """Recount, from the stored rows, the neighbours that break the leave-out rule."""
    from eval_pipelines.core.search_request import NEAR_DUPLICATE_TOLERANCE

    spec = load_spec(conn, eval_id)
    field_count = near_count = None
    if spec.grouping.mode == "field" and spec.grouping.field is not None:
        field_count = holdout_store.evidence_sharing_group_field(
            conn, eval_id, spec.case_id, spec.records_version, spec.grouping.field
        )
    if spec.grouping.mode == "nearDuplicate" and spec.grouping.threshold is not None:
        # The same float32 cut-off the search applies.
        cut = float(np.float32(spec.grouping.threshold - NEAR_DUPLICATE_TOLERANCE))
        near_count = holdout_store.evidence_at_or_above(
            conn, eval_id, cut, space=spec.grouping.retrieval.space
        )
    return Leakage(
        on_leave_out_list=holdout_store.evidence_inside_leave_out(conn, eval_id),
        sharing_group_field=field_count,
        near_duplicates=near_count,
    )


def candidate_shortfall(conn: duckdb.DuckDBPyConnection, eval_id: str) -> tuple[int, int]:
    """``(rows with fewer neighbours than requested, neighbours requested)``."""
    spec = load_spec(conn, eval_id)
    short = sum(
        holdout_store.rows_short_of(conn, eval_id, spec.candidates_for(r), r.key)
        for r in spec.retrievals
    )
    return short, spec.max_candidates
