"""Paired comparison of two variants on the same sampled records (McNemar exact per level)."""

from __future__ import annotations

from typing import Any

import polars as pl

from eval_pipelines.core.errors import ConflictError
from eval_pipelines.core.scoring import level_key
from eval_pipelines.core.stats import mcnemar_exact
from eval_pipelines.core.tree import CodeTree


def compare_outcomes(
    baseline: pl.DataFrame, candidate: pl.DataFrame, tree: CodeTree
) -> dict[str, Any]:
    """Per level: pairs, newly right, newly wrong, both right, both wrong, the difference in
    accuracy (candidate minus baseline, over the pairs) and the McNemar exact p-value.

    Both frames come from :func:`eval_pipelines.core.scoring.row_outcomes` over the same
    records; pairs are matched on ``record_key``.
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
    levels: dict[str, Any] = {}
    for level in tree.levels:
        a_col, b_col = f"right_{level.depth}", f"right_{level.depth}_candidate"
        scored = paired.filter(pl.col(a_col).is_not_null())
        a = scored.get_column(a_col)
        b = scored.get_column(b_col)
        both_right = int((a & b).sum())
        both_wrong = int((~a & ~b).sum())
        newly_wrong = int((a & ~b).sum())
        newly_right = int((~a & b).sum())
        pairs = scored.height
        test = mcnemar_exact(newly_wrong, newly_right)
        levels[level_key(level.depth)] = {
            "pairs": pairs,
            "newlyRight": newly_right,
            "newlyWrong": newly_wrong,
            "bothRight": both_right,
            "bothWrong": both_wrong,
            "difference": round((newly_right - newly_wrong) / pairs, 6) if pairs else None,
            "mcnemarP": test.pvalue,
        }
    return levels
