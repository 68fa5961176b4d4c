"""A plug-in classifier from an installed package (the example package's entry point, and its
import path) is found in the Dask workers' processes: the holdout job stores on Dask the report
it stores in process, plug-in identity included."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from eval_pipelines import api
from eval_pipelines.defs.executors import executor_run_config
from eval_pipelines_tests.helpers.holdout_runs import (
    assert_same_report,
    run_holdout,
    stored_report,
)

VARIANTS = [
    {"name": "baseline"},
    {"name": "by-name", "config": {"classifier": "most-similar"}},
    {
        "name": "by-path",
        "config": {"classifier": "eval_pipelines_example.classifiers:most_similar"},
    },
]


@pytest.fixture
def eval_id(small_case: str) -> str:
    return api.start_holdout_eval(
        "small", VARIANTS, api.HoldoutOptions(sample_size=40, seed=9), register_only=True
    ).eval_id


@pytest.mark.slow  # a local Dask cluster of two worker processes
def test_plugin_classifier_runs_on_dask_workers_with_the_in_process_report(
    workdir: Path,
    eval_id: str,
    instance: dg.DagsterInstance,
) -> None:
    run_holdout(instance, eval_id, {})
    expected = stored_report(workdir, eval_id)
    plugins = [v.get("plugin") for v in expected.report["variants"]]
    assert plugins[0] is None and plugins[1]["source"] == "entry point"
    assert plugins[2]["source"] == "import path"

    run_holdout(instance, eval_id, executor_run_config("dask", workers=2))

    assert_same_report(expected, stored_report(workdir, eval_id))
