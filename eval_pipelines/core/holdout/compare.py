"""Paired comparison of two variants on the same sampled records, per level: McNemar exact,
a cluster-bootstrap interval of the difference (clusters: records held out together), the
verdict it supports and the minimum detectable effect at this n."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from eval_pipelines.core.errors import ConflictError
from eval_pipelines.core.stats import McNemarResult, mcnemar_exact
from eval_pipelines.core.stats.bootstrap import PairedDifference, paired_difference
from eval_pipelines.core.stats.power import minimum_detectable_effect
from eval_pipelines.core.stats.verdict import verdict
from eval_pipelines.core.tree import CodeTree

BOOTSTRAP_RESAMPLES = 2000


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
    paired: PairedDifference

    @property
    def verdict(self) -> str:
        """``better`` / ``worse`` only when the interval excludes zero, else ``no detectable
        difference`` (``insufficient_evidence`` below the minimum n)."""
        return verdict(self.paired)

    @property
    def minimum_detectable_effect(self) -> float | None:
        """The difference this n detects with 80% power (a power diagnostic, never the
        verdict); None when it cannot (no discordant pair, or far too few)."""
        if not self.pairs or not self.paired.sufficient:
            return None
        mde = minimum_detectable_effect(self.pairs, self.mcnemar.discordant / self.pairs)
        return None if math.isinf(mde) else mde

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
    baseline: pl.DataFrame,
    candidate: pl.DataFrame,
    tree: CodeTree,
    *,
    clusters: Mapping[str, int] | None = None,
    seed: int,
) -> tuple[PairedLevel, ...]:
    """Pair two variants' outcome rows (from
    :func:`eval_pipelines.core.holdout.scoring.row_outcomes`) on ``record_key`` and compare
    them at every level of the tree.

    ``clusters`` maps each sampled record to its cluster (records held out together); the
    bootstrap resamples clusters, seeded by ``seed`` and the level, so a report is
    reproducible. Without clusters each record is its own.
    """
    columns = ["record_key", *(f"right_{level.depth}" for level in tree.levels)]
    # Sorted by record key: the bootstrap numbers clusters in row order, so a fixed order is
    # what makes a seeded interval reproducible.
    paired = (
        baseline.select(columns)
        .join(candidate.select(columns), on="record_key", how="inner", suffix="_candidate")
        .sort("record_key")
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
        keys = scored.get_column("record_key").to_list()
        groups = [clusters[k] for k in keys] if clusters is not None else None
        levels.append(
            PairedLevel(
                depth=level.depth,
                pairs=scored.height,
                both_right=int((a & b).sum()),
                both_wrong=int((~a & ~b).sum()),
                mcnemar=mcnemar_exact(int((a & ~b).sum()), int((~a & b).sum())),
                paired=paired_difference(
                    a.to_numpy(),
                    b.to_numpy(),
                    clusters=groups,
                    n_resamples=BOOTSTRAP_RESAMPLES,
                    rng=np.random.default_rng([seed, level.depth]),
                ),
            )
        )
    return tuple(levels)
