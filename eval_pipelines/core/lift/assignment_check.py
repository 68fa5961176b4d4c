"""The assignment check of a live experiment's logs, before its lift is read.

Assignment is a pure function of the workspace, the cluster key and the split: every
logged row whose cluster is the hashed key itself (an artifact key, trace id or request
id; a conversation's ``conv-`` token is one-way and is skipped) is re-assigned with
:func:`~eval_pipelines.core.lift.assignment.assign_many` and compared with its stamped
arm. A single disagreement fails: the logged keys or arms are not the ones the
assignment used (keys logged per request while arms were assigned per trace, an arm
stamped from the outcome path, another split or lever).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from eval_pipelines.core.lift.assignment import ARMS, LiftConfig, assign_many

__all__ = ["AssignmentCheck", "assignment_check"]


@dataclass(frozen=True)
class AssignmentCheck:
    """Rows re-assigned from their logged cluster key, and how many disagree with their arm."""

    checked_rows: int
    mismatched_rows: int
    skipped_rows: int
    ran: bool

    @property
    def passed(self) -> bool:
        return self.mismatched_rows == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "checkedRows": self.checked_rows,
            "mismatchedRows": self.mismatched_rows,
            "skippedRows": self.skipped_rows,
            "ran": self.ran,
            "passed": self.passed,
        }


def assignment_check(
    contrast: pl.DataFrame,
    *,
    conversation: pl.Series,
    workspace_id: str,
    config: LiftConfig | None,
) -> AssignmentCheck:
    """The assignment check of one scope's ``treated`` and ``lever_holdout`` rows (with
    ``exposure_arm`` and ``cluster``); ``conversation`` marks the rows keyed on a one-way
    conversation token (skipped). Not run without the workspace's own split ``config``."""
    derivable = contrast.filter(~conversation)
    mismatched = 0
    ran = config is not None and config.workspace_id == workspace_id
    if ran and config is not None and derivable.height:
        keys = derivable.get_column("cluster").unique().to_list()
        codes = assign_many(workspace_id, keys, config)
        derived = pl.DataFrame(
            {"cluster": keys, "derived": [str(ARMS[int(c)]) for c in np.asarray(codes)]}
        )
        joined = derivable.join(derived, on="cluster", how="left")
        mismatched = int((joined.get_column("derived") != joined.get_column("exposure_arm")).sum())
    return AssignmentCheck(
        checked_rows=derivable.height if ran else 0,
        mismatched_rows=mismatched,
        skipped_rows=contrast.height - derivable.height if ran else contrast.height,
        ran=ran,
    )
