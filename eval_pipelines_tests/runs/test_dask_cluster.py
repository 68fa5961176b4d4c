"""``eval holdout --dask-scheduler``: a malformed address, a scheduler that does not answer or
has no worker, and a worker on another machine that could not reach what the run needs are
refused in one line naming the option, before anything is written; a cluster on this machine
(the embedded default's only possibility) and workers anywhere on the team's deployment are
accepted."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from dask.distributed import LocalCluster

from eval_pipelines import api
from eval_pipelines.core.ports import free_port
from eval_pipelines.runs.dask_cluster import (
    DaskWorker,
    check_dask_cluster,
    check_scheduler_address,
    remote_worker_refusal,
    this_machines_addresses,
)
from eval_pipelines.settings import PostgresWarehouse
from eval_pipelines_tests.helpers.cli_calls import refused

ADDRESS = "tcp://10.0.0.5:8786"
TEAM_WAREHOUSE = PostgresWarehouse("db.internal", 5432, "evals", "evals")
FILE_WAREHOUSE = Path("/srv/eval/warehouse.duckdb")
LOCAL = frozenset({"10.0.0.5", "machine-a"})
HERE = DaskWorker("tcp://10.0.0.5:40001", "10.0.0.5", {})
LOOPBACK = DaskWorker("tcp://127.0.0.1:40002", "127.0.0.1", {})
ELSEWHERE = DaskWorker("tcp://10.0.0.6:40001", "10.0.0.6", {})


def _local_cluster(workers: int) -> LocalCluster:
    """Workers as threads of this process, on loopback: cheap, and on this machine."""
    return LocalCluster(
        n_workers=workers,
        processes=False,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=None,
    )


@pytest.fixture(scope="module")
def cluster_here() -> Iterator[str]:
    with _local_cluster(1) as cluster:
        yield cluster.scheduler_address


@pytest.mark.parametrize(
    "address",
    ["10.0.0.5:8786", "tcp://10.0.0.5", "http://10.0.0.5:8786", "tcp://:8786",
     "tcp://10.0.0.5:port", "tcp://10.0.0.5:8786/path", "tcp://user@10.0.0.5:8786"],
)  # fmt: skip
def test_a_malformed_address_is_refused(address: str) -> None:
    with pytest.raises(ValueError, match="give a Dask scheduler address tcp://host:port"):
        check_scheduler_address(address)


def test_a_well_formed_address_gives_its_host_and_port() -> None:
    assert check_scheduler_address("tls://[::1]:8786") == ("::1", 8786)


def test_the_cli_refuses_a_malformed_address_in_one_line_writing_nothing(
    capsys: pytest.CaptureFixture[str], small_case: str, tmp_path: Path
) -> None:
    variants = tmp_path / "variants.json"
    variants.write_text(json.dumps([{"name": "baseline"}]))
    line = refused(
        capsys, "eval", "holdout", small_case, "--variants-file", variants,
        "--dask-scheduler", "10.0.0.5:8786",
    )  # fmt: skip
    assert line.startswith("--dask-scheduler='10.0.0.5:8786': give a Dask scheduler address")
    assert api.list_evals(small_case) == []


def test_a_scheduler_that_does_not_answer_is_refused_writing_nothing(
    capsys: pytest.CaptureFixture[str], small_case: str, tmp_path: Path
) -> None:
    port = free_port()
    variants = tmp_path / "variants.json"
    variants.write_text(json.dumps([{"name": "baseline"}]))
    line = refused(
        capsys, "eval", "holdout", small_case, "--variants-file", variants,
        "--dask-scheduler", f"tcp://127.0.0.1:{port}", "--wait",
    )  # fmt: skip
    assert line.startswith(f"--dask-scheduler='tcp://127.0.0.1:{port}': no Dask scheduler answers")
    assert api.list_evals(small_case) == []


def test_a_scheduler_without_a_worker_is_refused(workdir: Path) -> None:
    with _local_cluster(0) as cluster:
        with pytest.raises(ValueError, match="the scheduler has no worker"):
            check_dask_cluster(cluster.scheduler_address)


def test_a_cluster_on_this_machine_is_accepted_on_the_embedded_default(
    workdir: Path, cluster_here: str
) -> None:
    check_dask_cluster(cluster_here)


def test_registering_without_a_run_takes_no_scheduler(small_case: str, cluster_here: str) -> None:
    with pytest.raises(ValueError, match="an evaluation registered without a run has no run"):
        api.start_holdout_eval(
            small_case, [{"name": "baseline"}], register_only=True, dask_scheduler=cluster_here
        )
    assert api.list_evals(small_case) == []


def test_this_machine_answers_to_its_host_name_and_interfaces() -> None:
    addresses = this_machines_addresses()
    assert socket.gethostname() in addresses
    assert "127.0.0.1" in addresses


def test_workers_on_this_machine_are_accepted_on_the_embedded_default() -> None:
    refusal = remote_worker_refusal(
        ADDRESS, [HERE, LOOPBACK], LOCAL,
        shared_instance=False, warehouse=FILE_WAREHOUSE, shared_location=None,
    )  # fmt: skip
    assert refusal is None


def test_a_worker_elsewhere_is_accepted_on_the_teams_deployment() -> None:
    refusal = remote_worker_refusal(
        ADDRESS, [HERE, ELSEWHERE], LOCAL,
        shared_instance=True, warehouse=TEAM_WAREHOUSE, shared_location="/mnt/shared",
    )  # fmt: skip
    assert refusal is None


def test_a_worker_elsewhere_is_refused_on_the_embedded_default_naming_what_it_cannot_reach() -> (
    None
):
    refusal = remote_worker_refusal(
        ADDRESS, [HERE, ELSEWHERE], LOCAL,
        shared_instance=False, warehouse=FILE_WAREHOUSE, shared_location=None,
    )  # fmt: skip
    assert refusal is not None
    message = str(refusal)
    assert message.startswith(f"dask_scheduler='{ADDRESS}': worker tcp://10.0.0.6:40001 is on")
    for part in ("local Dagster instance", str(FILE_WAREHOUSE), "EVAL_PIPELINES_SHARED_DIR"):
        assert part in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("shared_instance", "warehouse", "shared_location", "named"),
    [
        (False, TEAM_WAREHOUSE, "/mnt/shared", "local Dagster instance"),
        (True, FILE_WAREHOUSE, "/mnt/shared", "DuckDB file warehouse"),
        (True, TEAM_WAREHOUSE, None, "EVAL_PIPELINES_SHARED_DIR"),
    ],
)
def test_each_part_a_worker_elsewhere_cannot_reach_is_refused_alone(
    shared_instance: bool, warehouse: object, shared_location: str | None, named: str
) -> None:
    refusal = remote_worker_refusal(
        ADDRESS, [ELSEWHERE], LOCAL, shared_instance=shared_instance,
        warehouse=warehouse, shared_location=shared_location,  # type: ignore[arg-type]
    )  # fmt: skip
    assert refusal is not None and named in str(refusal)


def test_a_duckdb_file_is_reachable_when_its_writers_are_pinned_to_this_machine() -> None:
    pinned_here = DaskWorker(HERE.address, HERE.host, {"duckdb": 1})
    pinned_elsewhere = DaskWorker(ELSEWHERE.address, ELSEWHERE.host, {"duckdb": 1})
    team_but_file = {
        "shared_instance": True, "warehouse": FILE_WAREHOUSE, "shared_location": "/mnt/shared"
    }  # fmt: skip
    assert remote_worker_refusal(ADDRESS, [pinned_here, ELSEWHERE], LOCAL, **team_but_file) is None  # type: ignore[arg-type]
    refusal = remote_worker_refusal(ADDRESS, [HERE, pinned_elsewhere], LOCAL, **team_but_file)  # type: ignore[arg-type]
    assert refusal is not None and "DuckDB file warehouse" in str(refusal)


def test_a_rerun_refuses_a_malformed_address_before_recording_a_run(
    capsys: pytest.CaptureFixture[str], small_case: str
) -> None:
    registered = api.start_holdout_eval(small_case, [{"name": "baseline"}], register_only=True)
    line = refused(
        capsys, "eval", "rerun", small_case, registered.eval_id, "--dask-scheduler", "tcp://h"
    )
    assert line.startswith("--dask-scheduler='tcp://h': give a Dask scheduler address")
    assert api.get_holdout_eval(small_case, registered.eval_id).run_id is None
