"""Checking a Dask cluster before a run is sent to it (``eval holdout --dask-scheduler``).

A run on the Dask engine (:mod:`eval_pipelines.defs.executors`) hands each step to a worker,
which reports through the run's Dagster instance, reads and writes the warehouse, and hands step
outputs to the next step through the step payloads' location. A worker on another machine can do
that only when all three are shared: the instance on PostgreSQL, ``EVAL_PIPELINES_SHARED_DIR``
set, and the warehouse a ``postgresql://`` URL (or, with a DuckDB file, every worker that
declares the Dask resource ``duckdb``, to which the writers are pinned, on this machine). On the
embedded default (a DuckDB file, the local instance, payloads in ``$DAGSTER_HOME``) only workers
on this machine can. So the scheduler is asked for its workers before anything is written: an
address that is malformed, a scheduler that does not answer or has no worker, and a worker on
another machine that could not reach what the run needs are refused, naming the option.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dagster import DagsterInstance

from eval_pipelines.core.errors import InputError
from eval_pipelines.runs.instance_storage import shared_storage_key
from eval_pipelines.runs.worker_hosts import this_host
from eval_pipelines.settings import (
    SHARED_DIR_ENV,
    WAREHOUSE_ENV,
    WarehouseLocation,
    shared_dir,
    single_writer,
    warehouse_location,
)

# The parameter (``--dask-scheduler`` in the shell) every refusal names.
DASK_SCHEDULER = "dask_scheduler"
DASK_SCHEMES = ("tcp", "tls")
# Seconds to wait for the scheduler to answer before the address is refused.
CONNECT_SECONDS = 10.0
# The pool whose steps write a DuckDB file, and the Dask resource that pins them to its node.
DUCKDB_RESOURCE = "duckdb"


@dataclass(frozen=True)
class DaskWorker:
    """A worker as the scheduler lists it: its address, its host and the resources it declares."""

    address: str
    host: str
    resources: Mapping[str, float]


def check_scheduler_address(address: str) -> tuple[str, int]:
    """The host and port of ``tcp://host:port`` (or ``tls://``); a malformed address is refused.

    >>> check_scheduler_address("tcp://10.0.0.5:8786")
    ('10.0.0.5', 8786)
    """
    rule = "give a Dask scheduler address tcp://host:port (or tls://host:port)"
    if not isinstance(address, str) or "://" not in address:
        raise InputError(DASK_SCHEDULER, address, rule)
    parts = urlsplit(address)
    try:
        port = parts.port
    except ValueError:
        port = None
    if (
        parts.scheme not in DASK_SCHEMES
        or not parts.hostname
        or port is None
        or parts.path
        or parts.query
        or parts.fragment
        or parts.username is not None
    ):
        raise InputError(DASK_SCHEDULER, address, rule)
    return parts.hostname, port


def unshared_parts(
    *, shared_instance: bool, warehouse: WarehouseLocation, shared_location: str | None
) -> list[str]:
    """What a worker on another machine could not reach, in words (empty: nothing)."""
    missing = []
    if not shared_instance:
        missing.append(
            "the local Dagster instance in $DAGSTER_HOME (the team's is on PostgreSQL: "
            "deploy/team/dagster.yaml)"
        )
    if single_writer(warehouse):
        missing.append(f"the DuckDB file warehouse {warehouse} (${WAREHOUSE_ENV})")
    if shared_location is None:
        missing.append(f"the step payloads in $DAGSTER_HOME (${SHARED_DIR_ENV} is not set)")
    return missing


def remote_worker_refusal(
    address: str,
    workers: Iterable[DaskWorker],
    local_hosts: frozenset[str],
    *,
    shared_instance: bool,
    warehouse: WarehouseLocation,
    shared_location: str | None,
) -> InputError | None:
    """The refusal of a cluster with a worker on another machine that could not reach what the
    run needs; None when every worker can run every step.

    A DuckDB file is reachable enough when every worker declaring the ``duckdb`` resource is on
    this machine (and one does): the steps that write it run only there."""
    workers = list(workers)
    remote = [worker for worker in workers if not _is_local(worker.host, local_hosts)]
    if not remote:
        return None
    missing = unshared_parts(
        shared_instance=shared_instance, warehouse=warehouse, shared_location=shared_location
    )
    pinned = [worker for worker in workers if DUCKDB_RESOURCE in worker.resources]
    if pinned and all(_is_local(worker.host, local_hosts) for worker in pinned):
        missing = [part for part in missing if not part.startswith("the DuckDB file")]
    if not missing:
        return None
    return InputError(
        DASK_SCHEDULER,
        address,
        f"worker {remote[0].address} is on another machine, which cannot reach "
        f"{'; '.join(missing)}: start the workers on this machine, or use the team's deployment "
        "(docs/operations.md, 'Dask workers on several machines')",
    )


def _is_local(host: str, local_hosts: frozenset[str]) -> bool:
    try:
        if ipaddress.ip_address(host).is_loopback:
            return True
    except ValueError:
        pass
    return host in local_hosts


def this_machines_addresses() -> frozenset[str]:
    """Every address and name this machine answers to: its interfaces' and its host name's."""
    import psutil

    names = {this_host(), socket.getfqdn(), "localhost"}
    addresses = {
        entry.address.split("%")[0]
        for entries in psutil.net_if_addrs().values()
        for entry in entries
        if entry.family in (socket.AF_INET, socket.AF_INET6)
    }
    return frozenset(names | addresses)


def cluster_workers(address: str) -> list[DaskWorker]:
    """The workers the scheduler at ``address`` lists; refused when it does not answer within
    :data:`CONNECT_SECONDS` or has no worker."""
    from dask.distributed import Client

    host, port = check_scheduler_address(address)
    try:
        # Dask's client retries a refused connection until its timeout: a closed port is
        # told at once.
        socket.create_connection((host, port), timeout=CONNECT_SECONDS).close()
        with Client(address, timeout=CONNECT_SECONDS, set_as_default=False) as client:
            info: dict[str, Any] = client.scheduler_info(n_workers=-1)
    except (OSError, TimeoutError) as error:
        raise InputError(
            DASK_SCHEDULER,
            address,
            f"no Dask scheduler answers there ({type(error).__name__}, waited up to "
            f"{CONNECT_SECONDS:g} s): start one with 'dask scheduler' or fix the address",
        ) from None
    workers = [
        DaskWorker(worker_address, str(worker.get("host", "")), worker.get("resources") or {})
        for worker_address, worker in info.get("workers", {}).items()
    ]
    if not workers:
        raise InputError(
            DASK_SCHEDULER,
            address,
            "the scheduler has no worker: start some with 'dask worker ADDRESS' first",
        )
    return workers


def check_dask_cluster(address: str, instance: DagsterInstance | None = None) -> None:
    """Refuse, before anything is written, a cluster the run could not run on (see the
    module); ``instance`` is the one the run will report to (the project's by default, opened
    once the cluster has answered)."""
    workers = cluster_workers(address)
    if instance is None:
        from eval_pipelines.runs.instance import dagster_instance

        instance = dagster_instance()
    refusal = remote_worker_refusal(
        address,
        workers,
        this_machines_addresses(),
        shared_instance=shared_storage_key(Path(instance.root_directory)) is not None,
        warehouse=warehouse_location(),
        shared_location=shared_dir(),
    )
    if refusal is not None:
        raise refusal
