"""Step payloads (classify tasks and results) do not pile up: a run's folder goes once its
predictions are stored, and folders older than the retention go on the next write."""

from __future__ import annotations

import os
import time
from pathlib import Path

import dagster as dg

from eval_pipelines import api
from eval_pipelines.defs.io_managers import PAYLOAD_FOLDER


def test_a_successful_run_leaves_no_payloads_and_old_ones_are_swept(small_case: str) -> None:
    instance = dg.DagsterInstance.get()
    root = Path(instance.storage_directory()) / PAYLOAD_FOLDER
    stale = root / "an-old-failed-run"
    stale.mkdir(parents=True)
    (stale / "result.pickle").write_bytes(b"x")
    week_and_a_day = time.time() - 8 * 24 * 3600
    os.utime(stale, (week_and_a_day, week_and_a_day))
    recent = root / "a-recent-failed-run"
    recent.mkdir()

    started = api.start_holdout_eval(
        small_case,
        [{"name": "baseline"}, {"name": "k5", "config": {"candidates": 5}}],
        api.HoldoutOptions(sample_size=20),
        wait=True,
    )
    assert started.status == "complete"
    assert not (root / started.run_id).exists()  # removed once predictions were stored
    assert not stale.exists()  # older than the retention
    assert recent.exists()  # kept for "re-execute from failure"
