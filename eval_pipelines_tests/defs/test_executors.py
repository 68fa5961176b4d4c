"""The engine is run configuration: the whole holdout job in process, with a process per step,
and as tasks on a real Dask cluster (a scheduler and two worker processes over loopback) stores
the same report; on Dask the ``duckdb`` pool still holds writers back, and writers run on the
worker that declares the ``duckdb`` resource."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster import DagsterEventType
from dask.distributed import Client, LocalCluster, Nanny, Scheduler, SpecCluster

from eval_pipelines import api
from eval_pipelines.defs.executors import executor_run_config
from eval_pipelines.defs.pools import DUCKDB_POOL
from eval_pipelines.settings import INDEX_DIR_ENV, WAREHOUSE_ENV
from eval_pipelines_tests.helpers.holdout_runs import (
    assert_same_report,
    holdout_eval,
    run_holdout,
    stored_report,
)

# How Dagster's orchestrator says a step waits for a pool slot (an engine event).
BLOCKED_BY_POOL = f"Step blocked by limit for pool {DUCKDB_POOL}"
VARIANTS = [{"name": "baseline"}, {"name": "k-5.fewer", "config": {"candidates": 5}}]


@pytest.fixture
def eval_id(small_case: str) -> str:
    return api.start_holdout_eval(
        "small", VARIANTS, api.HoldoutOptions(sample_size=40, seed=9), register_only=True
    ).eval_id


@pytest.fixture
def cluster(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A real Dask cluster: scheduler and two worker processes on 127.0.0.1. Its workers start
    without the warehouse variables, so they can only find the warehouse through run config."""
    with monkeypatch.context() as env:
        env.delenv(WAREHOUSE_ENV)
        env.delenv(INDEX_DIR_ENV)
        local = LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            host="127.0.0.1",
            dashboard_address=None,
        )
    with local:
        yield local


def warehouse_config(workdir: Path) -> dict[str, Any]:
    """Where the warehouse and its index cache are, for every process that runs a step."""
    paths = {"path": str(workdir / "warehouse.duckdb"), "index_dir": str(workdir / "indexes")}
    return {"resources": {"warehouse": {"config": paths}}}


def step_keys(result: dg.ExecuteJobResult) -> set[str]:
    return {e.step_key for e in result.all_events if e.is_step_success and e.step_key}


def test_holdout_on_a_dask_cluster_over_loopback_stores_the_in_process_report(
    workdir: Path, eval_id: str, instance: dg.DagsterInstance, cluster: Any
) -> None:
    in_process = run_holdout(instance, eval_id, warehouse_config(workdir))
    expected = stored_report(workdir, eval_id)
    assert expected.run_id == in_process.run_id

    # On Dask the exact TF-IDF search also runs as two shard tasks, merged exactly.
    shards = {"ops": {"leave_out": {"ops": {"retrieval_shards": {"config": {"shards": 2}}}}}}
    on_dask = run_holdout(
        instance,
        eval_id,
        {
            **executor_run_config("dask", address=cluster.scheduler_address),
            **warehouse_config(workdir),
            **shards,
        },
    )

    assert_same_report(expected, stored_report(workdir, eval_id))
    assert stored_report(workdir, eval_id).run_id == on_dask.run_id
    # The per-variant steps ran on Dask too, and the search as two shards instead of one.
    assert step_keys(on_dask) == step_keys(in_process) | {"leave_out.retrieve_shard[shard_1]"}
    # Each step ran in one of the cluster's worker processes, never in this one.
    with Client(cluster) as client:
        worker_pids = set(client.run(os.getpid).values())
    started = instance.all_logs(on_dask.run_id, of_type=DagsterEventType.STEP_WORKER_STARTED)
    step_pids = {
        int(str(e.dagster_event.engine_event_data.metadata["pid"].value))
        for e in started
        if e.dagster_event is not None
    }
    assert step_pids and step_pids <= worker_pids


def test_local_dask_cluster_option_stores_the_in_process_report(
    workdir: Path, eval_id: str, instance: dg.DagsterInstance
) -> None:
    run_holdout(instance, eval_id, {})
    expected = stored_report(workdir, eval_id)

    run_holdout(instance, eval_id, executor_run_config("dask", workers=2))

    assert_same_report(expected, stored_report(workdir, eval_id))


@pytest.mark.slow  # ~100 s on 2 shared cores: each of ~20 steps starts its own process
def test_multiprocess_stores_the_in_process_report(
    workdir: Path, eval_id: str, instance: dg.DagsterInstance
) -> None:
    run_holdout(instance, eval_id, {})
    expected = stored_report(workdir, eval_id)

    run_holdout(instance, eval_id, executor_run_config("multiprocess", workers=2))

    assert_same_report(expected, stored_report(workdir, eval_id))


@pytest.fixture
def writer_cluster(workdir: Path) -> Iterator[Any]:
    """A scheduler and two worker processes on 127.0.0.1 of which only ``writer`` declares the
    Dask resource ``duckdb``, as the worker on the node that holds the warehouse would
    (``dask worker ADDRESS --resources duckdb=1``)."""

    def worker(resources: dict[str, int]) -> dict[str, Any]:
        options = {"host": "127.0.0.1", "nthreads": 1, "resources": resources}
        return {"cls": Nanny, "options": options}

    with SpecCluster(
        scheduler={
            "cls": Scheduler,
            "options": {"host": "127.0.0.1", "dashboard_address": None},
        },
        workers={"writer": worker({DUCKDB_POOL: 1}), "reader": worker({})},
    ) as spec_cluster:
        yield spec_cluster


def test_a_duckdb_writer_on_dask_waits_for_the_pool_slot_on_the_worker_with_the_file(
    workdir: Path, eval_id: str, instance: dg.DagsterInstance, writer_cluster: Any
) -> None:
    # Another run's writer holds the pool's only slot: the first step must not reach Dask until
    # the slot is free.
    storage = instance.event_log_storage
    assert storage.claim_concurrency_slot(DUCKDB_POOL, "another-run", "writer").is_claimed
    freed_at: list[float] = []

    def free_once_blocked() -> None:
        deadline = time.time() + 120
        while time.time() < deadline:
            for run in instance.get_runs(limit=1):
                engine_events = instance.all_logs(run.run_id, of_type=DagsterEventType.ENGINE_EVENT)
                if any(e.message.startswith(BLOCKED_BY_POOL) for e in engine_events):
                    time.sleep(1.0)  # the step stays held while the slot is taken
                    freed_at.append(time.time())
                    storage.free_concurrency_slots_for_run("another-run")
                    return
            time.sleep(0.1)

    releaser = threading.Thread(target=free_once_blocked)
    releaser.start()
    result = dg.execute_job(
        dg.reconstructable(holdout_eval),
        instance=instance,
        run_config={
            **executor_run_config("dask", address=writer_cluster.scheduler_address),
            **warehouse_config(workdir),
        },
        tags={"dagster/partition": eval_id},
        asset_selection=[dg.AssetKey(k) for k in ("eval_spec", "holdout_sample", "evidence_index")],
    )
    releaser.join()
    assert result.success
    assert freed_at, "the step never reported waiting for the duckdb pool"

    events = [e for e in instance.all_logs(result.run_id) if e.dagster_event is not None]
    submitted = {
        e.step_key: e.timestamp
        for e in events
        if e.dagster_event is not None
        and e.dagster_event.event_type == DagsterEventType.STEP_WORKER_STARTING
    }
    assert submitted["eval_spec"] >= freed_at[0]
    asked = {
        e.step_key: e.dagster_event.engine_event_data.metadata["dask_resources"].value
        for e in events
        if e.dagster_event is not None
        and e.dagster_event.event_type == DagsterEventType.STEP_WORKER_STARTING
    }
    assert asked == {
        "eval_spec": "{'duckdb': 1}",
        "holdout_sample": "{'duckdb': 1}",
        "evidence_index": "any worker",  # outside the pool: runs on either worker
    }
    # The pool's steps (eval_spec, holdout_sample) ran in the worker declaring `duckdb`.
    with Client(writer_cluster) as client:
        writer = {
            address
            for address, worker in client.scheduler_info(n_workers=-1)["workers"].items()
            if DUCKDB_POOL in worker["resources"]
        }
        writer_pid = {pid for address, pid in client.run(os.getpid).items() if address in writer}
    pids = {
        e.step_key: int(str(e.dagster_event.engine_event_data.metadata["pid"].value))
        for e in events
        if e.dagster_event is not None
        and e.dagster_event.event_type == DagsterEventType.STEP_WORKER_STARTED
    }
    assert {pids["eval_spec"], pids["holdout_sample"]} == writer_pid


@pytest.mark.parametrize(
    ("engine", "options", "expected"),
    [
        ("in_process", {}, {"in_process": {}}),
        ("in_process", {"workers": 4}, {"in_process": {}}),
        (
            "multiprocess",
            {"workers": 3},
            {"multiprocess": {"max_concurrent": 3, "start_method": {"forkserver": {}}}},
        ),
        (
            "dask",
            {"address": "tcp://10.0.0.5:8786"},
            {"dask": {"address": "tcp://10.0.0.5:8786"}},
        ),
        ("dask", {}, {"dask": {"local": {"n_workers": 2, "threads_per_worker": 1}}}),
    ],
)
def test_executor_run_config_selects_each_engine(
    engine: str, options: dict[str, Any], expected: dict[str, Any]
) -> None:
    run_config = executor_run_config(engine, **options)
    assert run_config == {"execution": {"config": expected}}
    # Dagster accepts it for the job as the definitions bind it.
    assert dg.validate_run_config(holdout_eval(), run_config)


@pytest.mark.parametrize(
    ("engine", "options", "message"),
    [
        ("k8s", {}, "unknown engine 'k8s': choose one of in_process, multiprocess, dask"),
        ("multiprocess", {"address": "tcp://h:8786"}, "use engine 'dask', not 'multiprocess'"),
        ("in_process", {"address": "tcp://h:8786"}, "use engine 'dask', not 'in_process'"),
        ("dask", {"address": "h:8786"}, "needs a scheme, e.g. tcp://host:8786"),
        ("dask", {"workers": 0}, "workers must be a positive integer, not 0"),
    ],
)
def test_executor_run_config_refuses_what_no_engine_means(
    engine: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        executor_run_config(engine, **options)


def test_in_process_is_the_default_and_dagster_rejects_an_unknown_engine() -> None:
    job = holdout_eval()
    assert job.executor_def.name == "engine"
    resolved = dg.validate_run_config(job, {})
    assert resolved["execution"] == {"engine": {"in_process": {"retries": {"enabled": {}}}}}
    with pytest.raises(dg.DagsterInvalidConfigError, match="spark"):
        dg.validate_run_config(job, {"execution": {"config": {"spark": {}}}})
    with pytest.raises(dg.DagsterInvalidConfigError):
        dg.validate_run_config(
            job, {"execution": {"config": {"dask": {"address": "tcp://h:1", "local": {}}}}}
        )
