"""Several "machines" on one host, honestly simulated: each is its own process tree, started with
its own working folder as current directory, its own ``DAGSTER_HOME``, index folder and
temporary folder (``TMPDIR``: what a process keeps per machine there, such as the chat
endpoint's slots, stays on its machine), and an environment built from scratch (nothing of the
test process's warehouse, instance or shared-location variables leaks in). A team machine copies
``deploy/team/dagster.yaml`` into its home and reaches one PostgreSQL server over TCP for the
instance and for the warehouse (two databases, two roles); it sees the other machines' files
only through the shared folder (``EVAL_PIPELINES_SHARED_DIR``). An embedded machine is the
single user's default: a DuckDB file in its folder and a local instance. Shared by the scenario
tests and benchmarks/two_machines.py.

A machine may be given cores of its own (``cores``): every process it starts is pinned to them
(``sched_setaffinity`` in the child; its children inherit it), so two machines on one host do not
share a CPU.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipelines.postgres_local.server import LocalPostgres
from eval_pipelines.settings import (
    INDEX_DIR_ENV,
    SHARED_DIR_ENV,
    WAREHOUSE_ENV,
    WAREHOUSE_PASSWORD_ENV,
    WORKFLOWS_DIR_ENV,
)
from eval_pipelines_tests.helpers.postgres import ScratchDatabase, create_database
from eval_pipelines_tests.helpers.team_instance import install_team_config, team_environment

CLI = (sys.executable, "-m", "eval_pipelines.cli.main")
# Variables of the test process a machine must not inherit: where the warehouse, the instance
# and the shared files are is each machine's own setting.
_OWN_PREFIXES = ("EVAL_PIPELINES_", "DAGSTER_", "AWS_")
# Printed by a machine asked for a stored report: the report and its markdown, or null.
_STORED_REPORT = """
import json, sys
from eval_pipelines.settings import warehouse_location
from eval_pipelines.storage.holdout_evaluations import load_report
from eval_pipelines.storage.warehouse import connect
with connect(warehouse_location(), read_only=True) as conn:
    stored = load_report(conn, sys.argv[1])
print(json.dumps(None if stored is None else {"report": stored.report, "markdown": stored.markdown,
                                               "runId": stored.run_id}))
"""
# Printed by a machine asked for its warehouse's row counts: {table: rows}.
_ROW_COUNTS = """
import json
from eval_pipelines.settings import warehouse_location
from eval_pipelines.storage.warehouse import connect
with connect(warehouse_location(), read_only=True) as conn:
    tables = [row[0] for row in conn.execute("SHOW TABLES").fetchall()]
    counts = {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
print(json.dumps(counts))
"""
# Printed by a machine asked how its instance recorded runs: per run id, the pid and host of the
# process that executed it (the first engine event naming them), when each step started and
# succeeded, and the run's first and last event (seconds since the epoch).
_RUN_RECORDS = """
import json, sys
from dagster import DagsterEventType
from eval_pipelines.runs.instance import dagster_instance
from eval_pipelines.runs.worker_hosts import run_worker_host
instance = dagster_instance()
found = {}
for run_id in sys.argv[1:]:
    records = instance.all_logs(run_id)
    pid = None
    steps = {}
    for record in records:
        event = record.dagster_event
        if event is None:
            continue
        engine = event.event_type == DagsterEventType.ENGINE_EVENT
        data = event.engine_event_data if engine else None
        if pid is None and data is not None and "pid" in data.metadata:
            pid = int(data.metadata["pid"].value)
        if event.event_type in (DagsterEventType.STEP_START, DagsterEventType.STEP_SUCCESS):
            steps.setdefault(event.step_key, []).append(record.timestamp)
    found[run_id] = {
        "pid": pid, "host": run_worker_host(instance, run_id),
        "first": records[0].timestamp, "last": records[-1].timestamp,
        "steps": {key: max(times) - min(times) for key, times in steps.items()},
    }
print(json.dumps(found))
"""
_OPEN_INSTANCE = (
    "from eval_pipelines.runs.instance import dagster_instance\n"
    "dagster_instance().get_runs(limit=1)"
)


@dataclass(frozen=True)
class Machine:
    """A working folder and the environment every process of this machine runs in."""

    name: str
    folder: Path
    environ: dict[str, str]
    cores: frozenset[int] | None = None

    @property
    def home(self) -> Path:
        return Path(self.environ["DAGSTER_HOME"])

    def _pin(self) -> Callable[[], None] | None:
        """What the child runs before the command: pin it to this machine's cores."""
        return (
            None if self.cores is None else functools.partial(os.sched_setaffinity, 0, self.cores)
        )

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """Run a command in this machine's folder and environment; wait for it."""
        return subprocess.run(
            args, cwd=self.folder, env=self.environ, capture_output=True, text=True,
            timeout=timeout, preexec_fn=self._pin(),
        )  # fmt: skip

    def start(self, *args: str, log: str | None = None) -> subprocess.Popen[str]:
        """Start a command in this machine's folder and environment, in its own process group
        (so the whole tree can be killed at once). Its output is piped back, or, for a
        long-lived service whose output nobody reads, written to the file ``log`` of this
        machine's folder."""
        if log is None:
            return subprocess.Popen(
                args, cwd=self.folder, env=self.environ, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=self._pin(),
            )  # fmt: skip
        with (self.folder / log).open("w") as output:
            return subprocess.Popen(
                args, cwd=self.folder, env=self.environ, stdout=output,
                stderr=subprocess.STDOUT, text=True, start_new_session=True, preexec_fn=self._pin(),
            )  # fmt: skip

    def cli(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """``eval-pipelines <args>`` on this machine; fails the caller with its stderr."""
        done = self.run(*CLI, *args, timeout=timeout)
        assert done.returncode == 0, f"{self.name}: {' '.join(args)}\n{done.stderr}"
        return done

    def stored_report(self, eval_id: str) -> dict[str, Any] | None:
        """The stored report of ``eval_id`` as this machine reads it from its warehouse."""
        done = self.run(sys.executable, "-c", _STORED_REPORT, eval_id)
        assert done.returncode == 0, done.stderr
        stored: dict[str, Any] | None = json.loads(done.stdout)
        return stored

    def row_counts(self) -> dict[str, int]:
        """Rows of every table of this machine's warehouse."""
        done = self.run(sys.executable, "-c", _ROW_COUNTS)
        assert done.returncode == 0, done.stderr
        counts: dict[str, int] = json.loads(done.stdout)
        return counts

    def run_records(self, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        """How this machine's instance recorded each run: ``pid`` and ``host`` of the process
        that executed it, ``steps`` (seconds from STEP_START to STEP_SUCCESS per step key),
        ``first`` and ``last`` (its first and last event, seconds since the epoch)."""
        done = self.run(sys.executable, "-c", _RUN_RECORDS, *run_ids)
        assert done.returncode == 0, done.stderr
        records: dict[str, dict[str, Any]] = json.loads(done.stdout)
        return records

    def create_instance_tables(self) -> None:
        """Open the Dagster instance once, so its PostgreSQL tables exist before machines use
        it at once (a team starts its webserver or daemon first: dagster-postgres creates its
        schema on first open, and two first opens at once race, "type instigators already
        exists")."""
        done = self.run(sys.executable, "-c", _OPEN_INSTANCE)
        assert done.returncode == 0, done.stderr

    def python(self, code: str) -> None:
        """Run Python ``code`` as a process of this machine."""
        done = self.run(sys.executable, "-c", code)
        assert done.returncode == 0, done.stderr

    def stop_dispatcher(self) -> None:
        from eval_pipelines.runs.dispatcher import stop_dispatcher

        stop_dispatcher(self.home / "eval_pipelines_dispatcher.lock")


def _bare_environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.startswith(_OWN_PREFIXES)}


def _folders(root: Path, name: str) -> tuple[Path, Path]:
    folder = root / name
    home = folder / "dagster_home"
    home.mkdir(parents=True)
    return folder, home


def _own_settings(folder: Path, home: Path) -> dict[str, str]:
    """Settings every machine keeps in its own folder; its committed-workflows folder is empty
    (the repository's ``data/workflows`` is not this machine's to sync), and its temporary
    folder is its own, as on separate hosts (the endpoint slots of a chat setting's
    ``concurrency`` are files there: per machine, docs/models.md)."""
    workflows = folder / "committed_workflows"
    workflows.mkdir()
    temporary = folder / "tmp"
    temporary.mkdir()
    return {
        "TMPDIR": str(temporary),
        "DAGSTER_HOME": str(home),
        INDEX_DIR_ENV: str(folder / "indexes"),
        WORKFLOWS_DIR_ENV: str(workflows),
    }


def team_machine(
    root: Path,
    name: str,
    *,
    instance: ScratchDatabase,
    warehouse: ScratchDatabase,
    shared_dir: Path,
) -> Machine:
    """A machine of the team's deployment: ``deploy/team/dagster.yaml`` on ``instance``, the
    warehouse in ``warehouse`` (URL in the setting, password in its variable), index files and
    step payloads under ``shared_dir``."""
    folder, home = _folders(root, name)
    install_team_config(home)
    environ = _bare_environment() | team_environment(instance)
    environ |= _own_settings(folder, home) | {
        WAREHOUSE_ENV: warehouse.url,
        WAREHOUSE_PASSWORD_ENV: warehouse.password,
        SHARED_DIR_ENV: str(shared_dir),
    }
    return Machine(name, folder, environ)


def embedded_machine(root: Path, name: str) -> Machine:
    """A single user's machine on the embedded default: a DuckDB file in its folder and the
    local instance in its home."""
    folder, home = _folders(root, name)
    environ = _bare_environment() | _own_settings(folder, home)
    environ[WAREHOUSE_ENV] = str(folder / "warehouse.duckdb")
    return Machine(name, folder, environ)


# A case no test built the feature with: two ICD-10-CM chapters of the demo data (2,915
# records) that the small test case (chapters 3, 8, 10 and 16) leaves out.
UNSEEN_CASE = "unseen"
UNSEEN_CHAPTERS = ["6", "12"]


def create_unseen_case(machine: Machine, inputs: Path) -> None:
    """Write the unseen case's records and tree to ``inputs`` (once) and load them on
    ``machine`` with target depths 3 and 4."""
    import polars as pl

    from eval_pipelines_tests.helpers.paths import DEMO

    records, tree = inputs / "records.parquet", inputs / "tree.parquet"
    if not records.exists():
        inputs.mkdir(parents=True, exist_ok=True)
        for source, target in (("icd10cm_records", records), ("icd10cm_tree", tree)):
            table = pl.read_parquet(DEMO / f"{source}.parquet")
            table.filter(pl.col("chapter").is_in(UNSEEN_CHAPTERS)).write_parquet(target)
    machine.cli(
        "case", "create", UNSEEN_CASE, "--records", str(records), "--tree", str(tree),
        "--target-depth", "3,4",
    )  # fmt: skip


@dataclass(frozen=True)
class TeamDeployment:
    """The machines of one team's deployment (two unless named otherwise), the unseen case
    created, and a single user's machine on the embedded default (no case yet) to run the same
    work alone."""

    machines: tuple[Machine, ...]
    alone: Machine
    inputs: Path  # the unseen case's files, for the single user's machine

    @property
    def everyone(self) -> tuple[Machine, ...]:
        return (*self.machines, self.alone)


@contextmanager
def team_deployment(
    root: Path,
    server: LocalPostgres,
    *,
    names: tuple[str, ...] = ("machine_a", "machine_b"),
    with_unseen_case: bool = True,
) -> Iterator[TeamDeployment]:
    """The machines ``names`` under ``root``: the instance and the warehouse in two new
    databases of ``server`` (each owned by its own role), a shared folder, the instance's tables
    created once (by the first) and (``with_unseen_case``) the unseen case loaded; every
    machine's dispatcher is stopped on the way out."""
    suffix = secrets.token_hex(4)
    instance = create_database(server, f"instance_{suffix}", own_role=True)
    warehouse = create_database(server, f"warehouse_{suffix}", own_role=True)
    shared = root / "shared"
    shared.mkdir()
    first, *others = (
        team_machine(root, name, instance=instance, warehouse=warehouse, shared_dir=shared)
        for name in names
    )
    deployment = TeamDeployment(
        (first, *others), embedded_machine(root, "single_user"), root / "inputs"
    )
    try:
        first.create_instance_tables()
        if with_unseen_case:
            create_unseen_case(first, deployment.inputs)
        yield deployment
    finally:
        for machine in deployment.everyone:
            machine.stop_dispatcher()
