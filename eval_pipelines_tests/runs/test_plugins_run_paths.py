"""A plug-in classifier from the package installed after the project (the example package,
``make install``) runs the same way on every run path: executed by the command that waits,
and submitted to the queue, where the dispatcher starts it in a code server and a run worker
process, the path the Dagster daemon takes. Both store the same report, plug-in identity
included (the Dask executor's path: defs/test_plugins_dask.py)."""

from __future__ import annotations

import os

from eval_pipelines import api, runs
from eval_pipelines.runs.instance import dagster_instance

VARIANTS = [
    {"name": "baseline"},
    {"name": "by-name", "config": {"classifier": "most-similar"}},
    {
        "name": "by-path",
        "config": {"classifier": "eval_pipelines_example.classifiers:most_similar"},
    },
]


def test_a_plugin_variant_gives_one_report_executed_here_and_in_a_run_worker(
    small_case: str,
) -> None:
    here = api.start_holdout_eval(
        small_case, VARIANTS, api.HoldoutOptions(sample_size=40, seed=5), wait=True
    )
    expected = api.get_holdout_eval(small_case, here.eval_id).report

    queued = api.start_holdout_eval(
        small_case, VARIANTS, api.HoldoutOptions(sample_size=40, seed=5), wait=False
    )
    final = api.wait_for_eval(small_case, queued.eval_id, timeout=300, run_id=queued.run_id)
    assert final.status == "complete"
    worker = runs.run_worker_pid(dagster_instance(), queued.run_id)
    assert worker is not None and worker != os.getpid()  # another process ran it

    report = final.report
    assert report["sample"]["sampleHash"] == expected["sample"]["sampleHash"]
    for got, want in zip(report["variants"], expected["variants"], strict=True):
        assert got.get("plugin") == want.get("plugin")
        assert got["score"] == want["score"] and got["failedRows"] == want["failedRows"] == 0
    assert report["variants"][1]["plugin"]["source"] == "entry point"
    assert report["comparisons"] == expected["comparisons"]
