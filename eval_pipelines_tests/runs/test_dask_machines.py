"""Issue 30's Dask scenario: a Dask scheduler, and two ``dask worker`` processes each started as
its own machine of the team's deployment (own folder, own ``DAGSTER_HOME`` with the same
``dagster.yaml``, own environment; the instance and the warehouse on one PostgreSQL server over
TCP, index files and step payloads in the shared folder). An evaluation submitted from a third
machine with ``--dask-scheduler`` completes; its stored report equals the same evaluation run
alone on the embedded default, field by field without wall-clock seconds; its steps ran on both
workers and nowhere else (the process of each step's start event); and no worker wrote into the
submitting machine's folder, although the run's instance reference names that machine's
folders."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipelines.postgres_local.server import LocalPostgres
from eval_pipelines_tests.helpers.holdout_runs import without_wall_times
from eval_pipelines_tests.helpers.machines import (
    UNSEEN_CASE,
    Machine,
    create_unseen_case,
    team_deployment,
)

pytestmark = pytest.mark.slow

DASK = str(Path(sys.executable).parent / "dask")
VARIANTS = [{"name": "baseline"}, {"name": "k-5.fewer", "config": {"candidates": 5}}]
SEED = 5
WORKERS = ("worker_b", "worker_c")
# Printed by the submitting machine: the process and the step of each step's start event.
_STEP_STARTS = """
import json, sys
from dagster import DagsterEventType
from eval_pipelines.runs.instance import dagster_instance
records = dagster_instance().all_logs(sys.argv[1], of_type=DagsterEventType.STEP_START)
print(json.dumps([[r.dagster_event.step_key, r.dagster_event.pid] for r in records]))
"""


def _holdout_args(machine: Machine, *extra: str) -> list[str]:
    variants_file = machine.folder / "variants.json"
    variants_file.write_text(json.dumps(VARIANTS))
    return [
        "eval", "holdout", UNSEEN_CASE, "--variants-file", str(variants_file),
        "--sample-size", "40", "--seed", str(SEED), "--wait", "--json", "--timeout", "500",
        *extra,
    ]  # fmt: skip


def _wait_for_file(path: Path, process: subprocess.Popen[str], seconds: float = 120) -> str:
    deadline = time.monotonic() + seconds
    while not (path.is_file() and path.read_text()):
        assert process.poll() is None, f"{path.name}: its process exited"
        assert time.monotonic() < deadline, f"{path} not written"
        time.sleep(0.2)
    return path.read_text()


def _wait_for_workers(address: str, count: int, seconds: float = 180) -> None:
    from dask.distributed import Client

    with Client(address, timeout=seconds, set_as_default=False) as client:
        client.wait_for_workers(count, timeout=seconds)


@pytest.fixture
def services() -> Iterator[list[subprocess.Popen[str]]]:
    """The scheduler and workers started by the test, stopped at its end."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in reversed(started):
        process.terminate()
    for process in started:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _files(folder: Path) -> set[Path]:
    return {path.relative_to(folder) for path in folder.rglob("*") if path.is_file()}


def test_an_evaluation_on_dask_workers_of_two_machines_equals_it_alone_on_the_default(
    tmp_path: Path, postgres_server: LocalPostgres, services: list[subprocess.Popen[str]]
) -> None:
    with team_deployment(tmp_path, postgres_server, names=("machine_a", *WORKERS)) as team:
        (submitter, *workers), alone = team.machines, team.alone
        scheduler = submitter.start(
            DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
            "--scheduler-file", "scheduler.json", log="scheduler.log",
        )  # fmt: skip
        services.append(scheduler)
        address = json.loads(_wait_for_file(submitter.folder / "scheduler.json", scheduler))[
            "address"
        ]
        # No nanny: the worker process is the one started, so a step's process id names its
        # machine.
        worker_pids = {}
        for machine in workers:
            worker = machine.start(
                DASK, "worker", address, "--name", machine.name, "--nworkers", "1",
                "--nthreads", "1", "--no-nanny", "--no-dashboard",
                "--local-directory", str(machine.folder / "dask"), log="worker.log",
            )  # fmt: skip
            services.append(worker)
            worker_pids[worker.pid] = machine.name
        _wait_for_workers(address, len(workers))
        before = _files(submitter.folder)

        done = submitter.cli(*_holdout_args(submitter, "--dask-scheduler", address))
        result = json.loads(done.stdout)
        assert result["status"] == "complete", done.stdout
        eval_id, run_id = result["evalId"], result["runId"]

        starts = json.loads(
            submitter.run(sys.executable, "-c", _STEP_STARTS, run_id).stdout or "null"
        )
        assert starts, "no step started"
        ran_on = {step: worker_pids.get(pid, f"pid {pid}") for step, pid in starts}
        assert set(ran_on.values()) == set(WORKERS), ran_on

        # The workers' Dagster files (compute logs, artifacts) are in their own homes: the
        # submitting machine's folder gained nothing of the run but the files it writes itself.
        gained = {str(path) for path in _files(submitter.folder) - before}
        assert not {path for path in gained if run_id in path}, sorted(gained)
        for machine in workers:
            assert any(run_id in str(path) for path in _files(machine.home)), machine.name

        create_unseen_case(alone, team.inputs)
        single = json.loads(alone.cli(*_holdout_args(alone)).stdout)
        assert single["evalId"] == eval_id
        on_dask, by_itself = submitter.stored_report(eval_id), alone.stored_report(eval_id)
        assert on_dask is not None and by_itself is not None
        assert on_dask["runId"] == run_id
        assert without_wall_times(on_dask["report"]) == without_wall_times(by_itself["report"])
        assert on_dask["markdown"] == by_itself["markdown"]
