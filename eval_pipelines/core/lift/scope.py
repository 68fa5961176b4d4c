"""The rows a live comparison reads: one scope (workspace, and optionally claim type,
situation class, source) in one exposure epoch, the treated and lever_holdout arms, without
mixed clusters. The quality lift (:mod:`eval_pipelines.core.lift.lift`) and the cost bar
(:mod:`eval_pipelines.core.lift.cost`) read the same rows through it."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.assignment import ExposureArm

__all__ = [
    "CONTROL_ARM",
    "TREATED_ARM",
    "Contrast",
    "contrast_rows",
    "mixed_clusters",
    "scope_words",
]

#: The arm served the candidate, and the arm served the frozen baseline beside it.
TREATED_ARM = ExposureArm.TREATED.value
CONTROL_ARM = ExposureArm.LEVER_HOLDOUT.value

Scope = dict[str, str | None]


@dataclass(frozen=True)
class Contrast:
    """The rows of one scope and epoch a comparison reads.

    Attributes
    ----------
    epoch_rows
        Every row of the scope and epoch, any arm (the checks before reading look at them).
    treated, control
        The ``treated`` and ``lever_holdout`` rows, mixed clusters left out.
    mixed
        Cluster tokens seen in more than one arm of the scope and epoch, left out of both.
    """

    epoch_rows: pl.DataFrame
    treated: pl.DataFrame
    control: pl.DataFrame
    mixed: tuple[str, ...]


def contrast_rows(frame: pl.DataFrame, scope: Scope, *, epoch: str) -> Contrast:
    """The rows of ``scope`` (its ``workspace_id``, and ``claim_type``, ``situation_class``
    and ``source`` when not None) in ``epoch``.

    Raises
    ------
    InputError
        When the scope holds no rows of ``epoch`` (the message lists the epochs it holds).
    """
    for column, value in scope.items():
        if value is not None:
            frame = frame.filter(pl.col(column) == value)
    epochs = sorted(frame.get_column("exposure_epoch").unique().to_list())
    if epoch not in epochs:
        held = ", ".join(epochs) if epochs else "none"
        raise InputError(
            "epoch",
            epoch,
            f"no events of this epoch in {scope_words(scope)} (epochs held: {held})",
        )
    epoch_rows = frame.filter(pl.col("exposure_epoch") == epoch)
    mixed = mixed_clusters(epoch_rows)
    compared = epoch_rows.filter(
        pl.col("exposure_arm").is_in([TREATED_ARM, CONTROL_ARM]) & ~pl.col("cluster").is_in(mixed)
    )
    return Contrast(
        epoch_rows=epoch_rows,
        treated=compared.filter(pl.col("exposure_arm") == TREATED_ARM),
        control=compared.filter(pl.col("exposure_arm") == CONTROL_ARM),
        mixed=tuple(mixed),
    )


def mixed_clusters(frame: pl.DataFrame) -> list[str]:
    """Cluster tokens whose rows disagree on their arm (any two arms)."""
    arms = frame.group_by("cluster").agg(pl.col("exposure_arm").n_unique().alias("arms"))
    return sorted(arms.filter(pl.col("arms") > 1).get_column("cluster").to_list())


def scope_words(scope: Scope) -> str:
    """``workspace w1, claim type c, every situation class, every source``."""
    named = {
        "claim_type": "claim type",
        "situation_class": "situation class",
        "source": "source",
    }
    parts = [f"workspace {scope['workspace_id']}"]
    for column, words in named.items():
        value = scope.get(column)
        parts.append(f"{words} {value}" if value is not None else f"every {words}")
    return ", ".join(parts)
