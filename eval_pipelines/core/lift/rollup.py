"""Claim outcomes rolled up per cell, never pooled across exposure arms, sources or epochs.

A cell is workspace x claim type x situation class x exposure arm x source
(:data:`CELL_KEYS`), within one exposure epoch. The rollup splits the events by arm first and
stamps each cell's arm from the key of the split it was computed from, so two arms cannot
collapse into one cell; declared, inferred and imported sources are separate cells. Every
cell reports its raw counts and censored share (an unresolved claim is counted, never
dropped); its success rate is a :class:`~eval_pipelines.core.stats.proportion.Proportion`,
which reads ``insufficient_evidence`` below the minimum sample.

Events are one row per claim outcome, as ingest stores them: ``workspace_id``,
``claim_type``, ``situation_class``, ``exposure_arm``, ``exposure_epoch``, ``source``,
``cluster`` (str) and ``outcome`` (bool, null while unresolved). Other columns are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import polars as pl

from eval_pipelines.core.errors import EvalPipelinesError, InputError
from eval_pipelines.core.lift.assignment import ExposureArm
from eval_pipelines.core.stats.proportion import Proportion, estimate_proportion

__all__ = [
    "CELL_KEYS",
    "EVENT_COLUMNS",
    "CellRollup",
    "EpochMixError",
    "require_one_epoch",
    "rollup",
]

#: The columns that name a cell. The epoch is not among them: one rollup is one epoch.
CELL_KEYS = ("workspace_id", "claim_type", "situation_class", "exposure_arm", "source")

#: The event columns this module reads.
EVENT_COLUMNS = (*CELL_KEYS, "exposure_epoch", "cluster", "outcome")

_TEXT_COLUMNS = (*CELL_KEYS, "exposure_epoch", "cluster")
_ARMS = tuple(arm.value for arm in ExposureArm)


class EpochMixError(EvalPipelinesError, ValueError):
    """Events of more than one exposure epoch were about to be combined.

    If the holdout fraction or the lever split changed, arm membership moved: observations of
    two epochs come from two different experiments, and pooling them is refused.

    Parameters
    ----------
    epochs
        The epochs found (kept sorted in :attr:`epochs`, named in the message), or a
        message string, kept as written.
    scope
        What held them, for the message.
    """

    def __init__(self, epochs: Iterable[str] | str, *, scope: str = "the events") -> None:
        if isinstance(epochs, str):
            # A caller's own message, kept as written.
            self.epochs: tuple[str, ...] = ()
            super().__init__(epochs)
            return
        self.epochs = tuple(sorted(epochs))
        super().__init__(
            f"combining epochs {', '.join(self.epochs)} would pool two experiments: "
            f"{scope} hold more than one exposure_epoch, and arm membership may have moved "
            "between them; roll up or compare one epoch at a time (pass epoch=...)"
        )


@dataclass(frozen=True)
class CellRollup:
    """The claim outcomes of one cell in one epoch.

    Attributes
    ----------
    workspace_id, claim_type, situation_class, exposure_arm, source
        The cell (:data:`CELL_KEYS`). ``exposure_arm`` is stamped from the arm the rows were
        split by, never read back from an aggregate.
    epoch
        The exposure epoch every row of the cell carries.
    total
        Rows (claim outcomes), resolved or not.
    resolved
        Rows with an outcome (true or false).
    successes
        Rows whose outcome is true.
    censored
        Rows still unresolved (null outcome): counted, never scored.
    censored_share
        ``censored / total``, reported at every n.
    clusters
        Distinct cluster tokens among the cell's rows, censored ones included.
    rate
        ``successes`` of ``resolved`` with its Wilson interval, or ``insufficient_evidence``
        below the minimum sample of resolved rows (the counts are always there).
    """

    workspace_id: str
    claim_type: str
    situation_class: str
    exposure_arm: str
    source: str
    epoch: str
    total: int
    resolved: int
    successes: int
    censored: int
    censored_share: float
    clusters: int
    rate: Proportion

    def to_json(self) -> dict[str, Any]:
        """The cell as every report writes it: camelCase keys, shares rounded to 6 decimals,
        the rate as :meth:`Proportion.to_json` (``insufficient_evidence`` below the minimum
        sample)."""
        return {
            "workspaceId": self.workspace_id,
            "claimType": self.claim_type,
            "situationClass": self.situation_class,
            "exposureArm": self.exposure_arm,
            "source": self.source,
            "epoch": self.epoch,
            "total": self.total,
            "resolved": self.resolved,
            "successes": self.successes,
            "censored": self.censored,
            "censoredShare": round(self.censored_share, 6),
            "clusters": self.clusters,
            "rate": self.rate.to_json(),
        }


def rollup(events: pl.DataFrame, *, epoch: str | None = None) -> tuple[CellRollup, ...]:
    """Roll claim outcomes up per cell: one :class:`CellRollup` per arm-keyed cell.

    Parameters
    ----------
    events
        One row per claim outcome with the columns of :data:`EVENT_COLUMNS`.
    epoch
        The exposure epoch to roll up; rows of other epochs are left out. None takes the one
        epoch the events hold and refuses events of several.

    Returns
    -------
    tuple of CellRollup
        Sorted by :data:`CELL_KEYS`. Empty when there are no events (of ``epoch``, when
        given).

    Raises
    ------
    EpochMixError
        When ``epoch`` is None and the events hold more than one epoch.
    InputError
        (a ``ValueError``) when a column is missing, a key, epoch or cluster is null, the
        outcome is not boolean, or a row's arm is outside the closed set of exposure arms
        (the message names it).

    Notes
    -----
    The Wilson interval of each rate treats the cell's resolved rows as independent. Rows of
    one cluster (artifact, trace, conversation) are correlated, so with large clusters the
    interval is too narrow; a lift is compared with the cluster bootstrap instead
    (:func:`eval_pipelines.core.lift.lift.live_lift`).
    """
    frame = _validated(events)
    if epoch is None:
        if frame.height == 0:
            return ()
        epoch = require_one_epoch(frame)
    else:
        frame = frame.filter(pl.col("exposure_epoch") == epoch)
    by_arm = frame.partition_by("exposure_arm", as_dict=True, include_key=False)
    within_arm = [key for key in CELL_KEYS if key != "exposure_arm"]
    cells = []
    for (arm,), rows in by_arm.items():
        counts = rows.group_by(within_arm).agg(
            pl.len().alias("total"),
            pl.col("outcome").is_not_null().sum().alias("resolved"),
            pl.col("outcome").sum().alias("successes"),
            pl.col("cluster").n_unique().alias("clusters"),
        )
        for row in counts.iter_rows(named=True):
            cells.append(_cell(row, arm=str(arm), epoch=epoch))
    return tuple(sorted(cells, key=lambda cell: tuple(getattr(cell, k) for k in CELL_KEYS)))


def require_one_epoch(events: pl.DataFrame) -> str:
    """The one exposure epoch the events hold.

    Raises
    ------
    EpochMixError
        When they hold more than one (the message names them).
    InputError
        When there are no events (no epoch at all), or the column is missing or has nulls.
    """
    if "exposure_epoch" not in events.columns:
        raise InputError("events.columns", "exposure_epoch", "required column is missing")
    epochs = events.get_column("exposure_epoch")
    if epochs.null_count():
        raise InputError("exposure_epoch", None, "must be present on every row")
    distinct = sorted(str(value) for value in epochs.unique().to_list())
    if not distinct:
        raise InputError("events", "no rows", "there is no epoch in an empty set of events")
    if len(distinct) > 1:
        raise EpochMixError(distinct)
    return distinct[0]


def _cell(row: dict[str, Any], *, arm: str, epoch: str) -> CellRollup:
    total, resolved = int(row["total"]), int(row["resolved"])
    successes = int(row["successes"] or 0)
    return CellRollup(
        workspace_id=row["workspace_id"],
        claim_type=row["claim_type"],
        situation_class=row["situation_class"],
        exposure_arm=arm,
        source=row["source"],
        epoch=epoch,
        total=total,
        resolved=resolved,
        successes=successes,
        censored=total - resolved,
        censored_share=(total - resolved) / total,
        clusters=int(row["clusters"]),
        rate=estimate_proportion(successes, resolved),
    )


def _validated(events: pl.DataFrame) -> pl.DataFrame:
    """The event columns, checked once: present, text keys without nulls, arms in the closed
    set, a boolean (nullable) outcome."""
    missing = [column for column in EVENT_COLUMNS if column not in events.columns]
    if missing:
        raise InputError(
            "events.columns",
            ", ".join(missing),
            f"required column is missing (required: {', '.join(EVENT_COLUMNS)})",
        )
    frame = events.select(EVENT_COLUMNS)
    outcome = frame.schema["outcome"]
    if outcome == pl.Null:
        frame = frame.with_columns(pl.col("outcome").cast(pl.Boolean))
    elif outcome != pl.Boolean:
        raise InputError("outcome", str(outcome), "must be boolean (true, false, or null)")
    for column in _TEXT_COLUMNS:
        if frame.schema[column] != pl.String:
            raise InputError(column, str(frame.schema[column]), "must be a string column")
        if frame.get_column(column).null_count():
            raise InputError(column, None, "must be present on every row")
    unknown = sorted(set(frame.get_column("exposure_arm").unique().to_list()) - set(_ARMS))
    if unknown:
        raise InputError(
            "exposure_arm",
            ", ".join(unknown),
            f"not an exposure arm; the arms are a closed set: {', '.join(_ARMS)}",
        )
    return frame
