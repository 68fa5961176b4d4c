"""Fixtures the live-lift core tests share."""

import polars as pl
import pytest

from eval_pipelines.core.lift.lift import SUPERIOR, LiftResult, live_lift


@pytest.fixture(scope="module")
def superior_lift() -> LiftResult:
    # 300 unclustered outcomes a side, 0.80 against 0.50: superior at any seed.
    rows = [
        ("w1", "fact", "routine", arm, "e1", "declared", f"{arm}{i}", i < right)
        for arm, right in (("treated", 240), ("lever_holdout", 150))
        for i in range(300)
    ]
    columns = (
        "workspace_id",
        "claim_type",
        "situation_class",
        "exposure_arm",
        "exposure_epoch",
        "source",
        "cluster",
        "outcome",
    )
    frame = pl.DataFrame([list(r) for r in rows], schema=list(columns), orient="row")
    result = live_lift(frame, workspace_id="w1", epoch="e1", rng=0, n_resamples=500)
    assert result.verdict == SUPERIOR
    return result
