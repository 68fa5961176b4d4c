"""A chat variant's classify step runs on Dask workers (other processes, calling the stand-in
over real HTTP and writing the call cache in the warehouse): the report equals the in-process
run's, which then sends no request (every answer from the cache the Dask workers filled)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from eval_pipelines import api
from eval_pipelines.chat_standin.server import StandinServer, serve_standin
from eval_pipelines.defs.executors import executor_run_config
from eval_pipelines_tests.helpers.chat_variant import chat_config
from eval_pipelines_tests.helpers.holdout_runs import (
    run_holdout,
    stored_report,
    without_wall_times,
)


@pytest.fixture
def server() -> Iterator[StandinServer]:
    with serve_standin() as running:
        yield running


@pytest.fixture
def eval_id(small_case: str, server: StandinServer) -> str:
    variants = [{"name": "baseline"}, {"name": "chat", "config": chat_config(server.base_url)}]
    return api.start_holdout_eval(
        small_case, variants, api.HoldoutOptions(sample_size=30, seed=9), register_only=True
    ).eval_id


def _without_call_counts(report: dict[str, Any]) -> dict[str, Any]:
    """The report minus wall times and the counters that say where answers came from."""
    report = without_wall_times(report)
    for variant in report["variants"]:
        variant["usage"].pop("chat", None)
    return copy.deepcopy(report)


@pytest.mark.slow  # a local Dask cluster of two worker processes
def test_a_chat_variant_runs_on_dask_workers_with_the_in_process_report(
    workdir: Path,
    eval_id: str,
    server: StandinServer,
    instance: dg.DagsterInstance,
) -> None:
    run_holdout(instance, eval_id, executor_run_config("dask", workers=2))
    on_dask = stored_report(workdir, eval_id)
    assert server.request_count == 30
    assert on_dask.report["variants"][1]["usage"]["chat"]["callsMade"] == 30

    run_holdout(instance, eval_id, {})
    in_process = stored_report(workdir, eval_id)
    assert server.request_count == 30  # all from the cache the Dask workers wrote
    assert in_process.report["variants"][1]["usage"]["chat"]["callsFromCache"] == 30
    assert _without_call_counts(in_process.report) == _without_call_counts(on_dask.report)
