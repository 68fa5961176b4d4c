"""The Dagster instance the CLI and API talk to: ``$DAGSTER_HOME`` (default ``.dagster_home``),
configured once with a run queue, the ``duckdb`` pool and run monitoring.

``python -m eval_pipelines.runs.instance`` (run by ``make install``) writes ``dagster.yaml``
when the folder has none and sets the pool's limit; the CLI does the same on first use, so a
user who never ran ``make`` gets the same instance.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from dagster import DagsterInstance

from eval_pipelines.defs.pools import DUCKDB_POOL, DUCKDB_POOL_LIMIT

DEFAULT_DAGSTER_HOME = ".dagster_home"
# Two cores: two runs at once keep both busy (one classifies while the other waits for the
# warehouse); more would only queue inside the runs instead of in the run queue.
MAX_CONCURRENT_RUNS = 2
CONFIG_MARKER = "# Written by eval_pipelines"
_log = logging.getLogger(__name__)

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


def dagster_home() -> Path:
    """``$DAGSTER_HOME``, or ``.dagster_home`` in the working directory (then exported, so
    processes started from here use the same instance)."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        home = str(Path(DEFAULT_DAGSTER_HOME).absolute())
        os.environ["DAGSTER_HOME"] = home
    return Path(home)


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


def set_pool_limit(instance: DagsterInstance) -> None:
    """Give the ``duckdb`` pool its limit explicitly (the default-limit path alone let
    conflicting writers through when measured)."""
    storage = instance.event_log_storage
    if storage.supports_global_concurrency_limits:
        info = storage.get_concurrency_info(DUCKDB_POOL)
        if info.slot_count != DUCKDB_POOL_LIMIT:
            storage.set_concurrency_slots(DUCKDB_POOL, DUCKDB_POOL_LIMIT)


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
    instance = DagsterInstance.get()
    if wrote:
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


def main() -> None:
    home = dagster_home()
    wrote = ensure_instance_config(home)
    with DagsterInstance.get() as instance:
        set_pool_limit(instance)
    state = "wrote" if wrote else "kept"
    print(
        f"Dagster instance {home}: {state} dagster.yaml; pool {DUCKDB_POOL} "
        f"limit {DUCKDB_POOL_LIMIT}"
    )


if __name__ == "__main__":
    main()
