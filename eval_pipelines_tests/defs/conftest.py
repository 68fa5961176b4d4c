"""The Dagster instance the executor tests run the holdout job in: persistent, so worker
processes load it from its ref."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from eval_pipelines.runs.instance import set_pool_limit


@pytest.fixture
def instance(workdir: Path, eval_id: str) -> Iterator[dg.DagsterInstance]:
    """A persistent instance (workers load it from its ref) with the partition and the
    ``duckdb`` pool limited to one step, as ``make install`` configures it."""
    home = workdir / "executor_home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        set_pool_limit(instance)
        instance.add_dynamic_partitions("holdout_evaluations", [eval_id])
        yield instance
