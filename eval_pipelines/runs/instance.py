"""The Dagster instance the CLI and API talk to: ``$DAGSTER_HOME`` (default ``.dagster_home``),
configured once with a run queue, the ``duckdb`` pool and run monitoring.

``python -m eval_pipelines.runs.instance`` (run by ``make install``) writes ``dagster.yaml``
when the folder has none and sets the pool's limit; the CLI does the same on first use, so a
user who never ran ``make`` gets the same instance. A ``dagster.yaml`` the user wrote (a
team's, its storage in PostgreSQL: ``deploy/team/``) is never overwritten: its storage is
checked first (:mod:`eval_pipelines.runs.instance_storage`), and the pool's limit is set in
that storage, shared by every machine.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from pathlib import Path

from dagster import DagsterInstance

from eval_pipelines.core.errors import InputError
from eval_pipelines.defs.pools import DUCKDB_POOL, DUCKDB_POOL_LIMIT, pool_limit
from eval_pipelines.runs.deployment_warehouse import claim_deployment_warehouse, warehouse_name
from eval_pipelines.runs.instance_storage import (
    check_instance_storage,
    check_shared_storage,
    postgres_storages,
    shared_storage_key,
)
from eval_pipelines.settings import SettingError, warehouse_location

DEFAULT_DAGSTER_HOME = ".dagster_home"
# Two cores: two runs at once keep both busy (one classifies while the other waits for the
# warehouse); more would only queue inside the runs instead of in the run queue.
MAX_CONCURRENT_RUNS = 2
CONFIG_MARKER = "# Written by eval_pipelines"
_log = logging.getLogger(__name__)
# The CLI's exit code for bad input (eval_pipelines.cli.main, a layer above this one).
EXIT_REFUSED = 2

# Dagster's run queue, which also gives the runs the UI launches the project's kind tag.
RUN_COORDINATOR = """  module: eval_pipelines.runs.coordinator
  class: TaggingRunCoordinator
"""
# SHA-256 of the stripped dagster.yaml each earlier release wrote (the empty one, then the
# queue with Dagster's own QueuedRunCoordinator): a file still equal to one is replaced.
EARLIER_CONFIG_DIGESTS = frozenset(
    {
        "f796afc8e5afe3a51a1ce4cd13bbf8e3d3d1a27ec5654dee65b08fd823dfafe3",
        "db29575c0806f6cbc5c62b454a0e24dbc7cb05ed0a0cabd3189ecdc74f3b2f31",
        "be1b3216a8abead62052154b8e932bc9e210562ee42d8f61f018b82991d43954",
    }
)

INSTANCE_CONFIG = f"""{CONFIG_MARKER} (make install, or the CLI on first use).
# Edit freely: it is only written when the folder has no dagster.yaml (or has, unedited,
# the one an earlier release wrote).

# Runs wait in the instance's queue; the daemon (make dev) or, without one, the CLI's
# dispatcher starts them, at most {MAX_CONCURRENT_RUNS} at a time. The runs the UI launches
# get the project's eval_pipelines/kind tag here (docs/runs.md).
run_coordinator:
{RUN_COORDINATOR}  config:
    dequeue_interval_seconds: 1

concurrency:
  runs:
    max_concurrent_runs: {MAX_CONCURRENT_RUNS}
  pools:
    # Steps that open the DuckDB warehouse run one at a time (pool "{DUCKDB_POOL}").
    default_limit: {DUCKDB_POOL_LIMIT}
    granularity: op

# The daemon fails runs whose process died and frees the pool slots of finished runs.
run_monitoring:
  enabled: true
  start_timeout_seconds: 180
  cancel_timeout_seconds: 180
  poll_interval_seconds: 15
  free_slots_after_run_end_seconds: 15

telemetry:
  enabled: false
"""


def configured_home() -> Path:
    """``$DAGSTER_HOME``, or ``.dagster_home`` in the working directory (nothing exported)."""
    return Path(os.environ.get("DAGSTER_HOME") or Path(DEFAULT_DAGSTER_HOME).absolute())


def dagster_home() -> Path:
    """:func:`configured_home`, exported as ``DAGSTER_HOME`` when it was unset, so processes
    started from here use the same instance."""
    home = configured_home()
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def ensure_instance_config(home: Path) -> bool:
    """Write ``dagster.yaml`` unless one exists (or replace one an earlier release wrote and
    nobody edited); returns whether it wrote."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if config.exists():
        digest = hashlib.sha256(config.read_text().strip().encode()).hexdigest()
        if digest not in EARLIER_CONFIG_DIGESTS:
            return False
    config.write_text(INSTANCE_CONFIG)
    return True


def warehouse_pool_limit() -> int:
    """The ``duckdb`` pool's limit for this process's warehouse setting: one writer for a DuckDB
    file, more for a warehouse in PostgreSQL (:func:`eval_pipelines.defs.pools.pool_limit`)."""
    return pool_limit(warehouse_location())


def set_pool_limit(instance: DagsterInstance) -> int:
    """Give the ``duckdb`` pool its limit explicitly, in the instance's storage (the
    default-limit path alone let conflicting writers through when measured); returns it."""
    limit = warehouse_pool_limit()
    storage = instance.event_log_storage
    if storage.supports_global_concurrency_limits:
        info = storage.get_concurrency_info(DUCKDB_POOL)
        if info.slot_count != limit:
            storage.set_concurrency_slots(DUCKDB_POOL, limit)
    return limit


# The shared storages this process has given the pool's limit: settings and warehouse.
_limited: set[tuple[object, ...]] = set()


def _shared_pool_key(home: Path) -> tuple[object, ...] | None:
    """``home``'s PostgreSQL storage settings and this process's warehouse; None for the local
    default."""
    key = shared_storage_key(home)
    return None if key is None else (*key, warehouse_name(warehouse_location()))


def _set_shared_pool_limit(instance: DagsterInstance, home: Path) -> bool:
    """On an instance in PostgreSQL, once per process and settings: refuse a warehouse other
    than the deployment's (:mod:`eval_pipelines.runs.deployment_warehouse`), then set the
    pool's limit (another machine may have set another, or the storage may be new). Returns
    whether it set the limit."""
    key = _shared_pool_key(home)
    if key is None or key in _limited:
        return False
    claim_deployment_warehouse(instance, home, warehouse_location())
    set_pool_limit(instance)
    _limited.add(key)
    return True


def check_shared_instance(home: Path) -> None:
    """Before a command writes anything: a team's instance in PostgreSQL must work
    (:func:`eval_pipelines.runs.instance_storage.check_shared_storage`) and this machine must
    name the deployment's warehouse (:mod:`eval_pipelines.runs.deployment_warehouse`)."""
    check_shared_storage(home)
    key = _shared_pool_key(home)
    if key is None or key in _limited:
        return
    os.environ["DAGSTER_HOME"] = str(home)  # the instance below is this folder's
    with DagsterInstance.get() as instance:
        _set_shared_pool_limit(instance, home)


# The pooled instance connections of one process: dagster-webserver's defaults.
POOL_RECYCLE_SECONDS = 3600
POOL_MAX_OVERFLOW = 20


def dagster_instance() -> DagsterInstance:
    """The persistent instance, configured on first use. Creating one in the working
    directory because ``DAGSTER_HOME`` is unset is said on the log (stderr for the CLI): a
    command run from another folder than the repository's gets a new, empty instance, which
    knows none of the runs made from the repository. A ``DAGSTER_HOME`` set to an empty
    folder is a choice (a fresh deployment, CI): nothing is said."""
    home_was_set = bool(os.environ.get("DAGSTER_HOME"))
    home = dagster_home()
    created_here = not home_was_set and (not home.is_dir() or not any(home.iterdir()))
    wrote = ensure_instance_config(home)
    check_shared_storage(home)
    instance = DagsterInstance.get()
    if postgres_storages(home):
        # dagster-postgres opens a new login per storage call (NullPool); a process keeps a
        # pooled connection per storage instead, as Dagster's own webserver does. No statement
        # timeout: a run's reads may be long.
        instance.optimize_for_webserver(
            statement_timeout=0, pool_recycle=POOL_RECYCLE_SECONDS, max_overflow=POOL_MAX_OVERFLOW
        )
    try:
        shared_limit_set = _set_shared_pool_limit(instance, home)
    except InputError:
        instance.dispose()
        raise
    if wrote and not shared_limit_set:
        set_pool_limit(instance)
    if created_here:
        _log.warning(
            "new Dagster instance in %s (DAGSTER_HOME unset: %s in the working directory): "
            "it holds no run yet; runs started elsewhere are in the instance they were "
            "started with: set DAGSTER_HOME to its folder",
            home,
            DEFAULT_DAGSTER_HOME,
        )
    return instance


def main() -> int:
    """Set up the instance; a refused storage is one line on stderr and exit code 2 (the
    CLI's for bad input), with nothing written."""
    home = dagster_home()
    try:
        check_instance_storage(home)
        warehouse_location()  # a malformed warehouse setting is refused before anything is written
    except (InputError, SettingError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_REFUSED
    wrote = ensure_instance_config(home)
    with DagsterInstance.get() as instance:
        try:
            if postgres_storages(home):
                claim_deployment_warehouse(instance, home, warehouse_location())
        except InputError as error:
            print(f"error: {error}", file=sys.stderr)
            return EXIT_REFUSED
        limit = set_pool_limit(instance)
    state = "wrote" if wrote else "kept"
    storage = "PostgreSQL" if postgres_storages(home) else "local"
    print(
        f"Dagster instance {home} ({storage} storage): {state} dagster.yaml; "
        f"pool {DUCKDB_POOL} limit {limit}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
