"""Paired comparison of two variants on the same sampled records (McNemar exact per level)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from eval_pipelines.core.errors import ConflictError
from eval_pipelines.core.stats import McNemarResult, mcnemar_exact
from eval_pipelines.core.tree import CodeTree


@dataclass(frozen=True)
class PairedLevel:
    """Baseline vs candidate at one tree level, over the records both scored there.

    Attributes
    ----------
    depth
        The level.
    pairs
        Records whose label reaches the level.
    both_right, both_wrong
        Concordant pairs.
    mcnemar
        The exact McNemar test; ``mcnemar.b`` is newly wrong (baseline right, candidate
        wrong), ``mcnemar.c`` newly right.
    """

    depth: int
    pairs: int
    both_right: int
    both_wrong: int
    mcnemar: McNemarResult

    @property
    def newly_right(self) -> int:
        return self.mcnemar.c

    @property
    def newly_wrong(self) -> int:
        return self.mcnemar.b

    @property
    def difference(self) -> float | None:
        """Candidate minus baseline accuracy over the pairs; None when there are none."""
        return (self.newly_right - self.newly_wrong) / self.pairs if self.pairs else None


def compare_outcomes(
    baseline: pl.DataFrame, candidate: pl.DataFrame, tree: CodeTree
) -> tuple[PairedLevel, ...]:
    """Pair two variants' outcome rows (from
    :func:`eval_pipelines.core.holdout.scoring.row_outcomes`) on ``record_key`` and compare
    them at every level of the tree.
    """
    columns = ["record_key", *(f"right_{level.depth}" for level in tree.levels)]
    paired = baseline.select(columns).join(
        candidate.select(columns), on="record_key", how="inner", suffix="_candidate"
    )
    if paired.height != baseline.height or paired.height != candidate.height:
        raise ConflictError(
            f"the two result sets do not cover the same records ({baseline.height} baseline, "
            f"{candidate.height} candidate, {paired.height} paired)"
        )
    levels = []
    for level in tree.levels:
        a_col, b_col = f"right_{level.depth}", f"right_{level.depth}_candidate"
        scored = paired.filter(pl.col(a_col).is_not_null())
        a = scored.get_column(a_col)
        b = scored.get_column(b_col)
        levels.append(
            PairedLevel(
                depth=level.depth,
                pairs=scored.height,
                both_right=int((a & b).sum()),
                both_wrong=int((~a & ~b).sum()),
                mcnemar=mcnemar_exact(int((a & ~b).sum()), int((~a & b).sum())),
            )
        )
    return tuple(levels)
