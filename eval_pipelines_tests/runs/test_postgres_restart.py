"""PostgreSQL restarted under load (``stop(mode="immediate")``, then started again on the same
port) while two machines each run an evaluation with a ``chat`` variant: each run either
completes with its report stored or fails with a reason the other machine reads, with no report
stored; re-running a failed one completes. (Measured: in one run both completed, dagster-postgres
retrying its connections while the server recovered; in another one failed and its rerun on the
other machine completed.)"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.chat_standin.server import serve_standin
from eval_pipelines.postgres_local.server import LocalPostgres, start, stop
from eval_pipelines_tests.helpers.chat_variant import chat_config
from eval_pipelines_tests.helpers.machines import (
    CLI,
    UNSEEN_CASE,
    Machine,
    create_unseen_case,
    team_machine,
)
from eval_pipelines_tests.helpers.postgres import create_database, restartable_server

pytestmark = pytest.mark.slow

SAMPLE_SIZE = 120
RESTART_AFTER_CALLS = 40


@pytest.fixture
def own_server() -> Iterator[LocalPostgres]:
    """A server this test restarts."""
    with restartable_server() as server:
        yield server


def _holdout_args(machine: Machine, variants: list[dict[str, Any]], seed: int) -> list[str]:
    variants_file = machine.folder / f"variants_{seed}.json"
    variants_file.write_text(json.dumps(variants))
    return [
        "eval", "holdout", UNSEEN_CASE, "--variants-file", str(variants_file),
        "--sample-size", str(SAMPLE_SIZE), "--seed", str(seed), "--wait", "--json",
        "--timeout", "600",
    ]  # fmt: skip


def test_runs_in_flight_when_postgres_restarts_complete_or_fail_clearly_and_rerun(
    tmp_path: Path, own_server: LocalPostgres
) -> None:
    instance = create_database(own_server, "restart_instance", own_role=True)
    warehouse = create_database(own_server, "restart_warehouse", own_role=True)
    shared = tmp_path / "shared"
    shared.mkdir()
    machines = [
        team_machine(tmp_path, name, instance=instance, warehouse=warehouse, shared_dir=shared)
        for name in ("machine_a", "machine_b")
    ]
    try:
        machines[0].create_instance_tables()
        create_unseen_case(machines[0], tmp_path / "inputs")
        with serve_standin(latency_ms=200) as standin:
            variants: list[dict[str, Any]] = [
                {"name": "baseline"},
                {"name": "chat", "config": {**chat_config(standin.base_url), "concurrency": 4}},
            ]
            workers = [
                machine.start(*CLI, *_holdout_args(machine, variants, seed))
                for seed, machine in enumerate(machines, start=1)
            ]
            deadline = time.monotonic() + 300
            while standin.request_count < RESTART_AFTER_CALLS:
                assert all(worker.poll() is None for worker in workers), "a run ended early"
                assert time.monotonic() < deadline, f"only {standin.request_count} chat calls"
                time.sleep(0.05)
            stop(own_server.data_dir, mode="immediate")
            start(own_server.data_dir, port=own_server.port)

            outcomes = [worker.communicate(timeout=900) for worker in workers]
            for (out, err), worker, machine, other in zip(
                outcomes, workers, machines, reversed(machines), strict=True
            ):
                # 0 complete; 1 failed (docs/usage.md, exit codes): nothing else.
                assert worker.returncode in (0, 1), f"{machine.name}: {worker.returncode}\n{err}"
                if worker.returncode == 0:
                    done = json.loads(out)
                    assert done["status"] == "complete", out
                    assert other.stored_report(done["evalId"]) is not None
                    continue
                eval_id = json.loads(out)["evalId"]
                read = other.run(*CLI, "eval", "status", UNSEEN_CASE, eval_id, "--json")
                status = json.loads(read.stdout)
                assert status["status"] == "failed", status
                assert status["run"]["reason"], status
                assert other.stored_report(eval_id) is None
                rerun = other.cli("eval", "rerun", UNSEEN_CASE, eval_id, "--wait", "--json")
                assert json.loads(rerun.stdout)["status"] == "complete", rerun.stdout
    finally:
        for machine in machines:
            machine.stop_dispatcher()
