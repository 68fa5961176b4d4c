"""Benchmark the fixed cost of one ``eval holdout --wait`` on the demo case, phase by phase.

Run from the repository root after ``make demo``::

    .venv/bin/python benchmarks/fixed_cost.py [--runs 5] [--sample-size 200]
        [--workdir DIR] [--keep-dispatcher]

Runs ``eval-pipelines eval holdout icd10cm --variants-file data/demo/variants.json
--sample-size 200 --seed S --wait`` N times, each with a fresh seed, against
``$DAGSTER_HOME`` and ``$EVAL_PIPELINES_WAREHOUSE`` (or, with ``--workdir``, copies of them
made there first, so the demo's instance and warehouse are not touched). Before each run any
dispatcher left by the previous one is stopped (unless ``--keep-dispatcher``), so every run
pays what a first evaluation of a session pays.

Each run is split into phases by the wall clock of the command and the timestamps of its run's
event log: CLI start -> run created (imports, the warehouse write, the run record) -> dequeued
(``RUN_STARTING``: the queue and the dispatcher; absent when the CLI runs it itself) -> run
started (``RUN_START``: the run's process, its imports) -> first step -> run finished (the
steps) -> CLI exit (noticing the end, reading and printing the report). Prints one ``name:
value`` line per phase and run (and ``cli_cpu``, the CPU seconds of the command itself), then
the best and the median of each, every step by its median seconds (slowest first) and the
CLI's start-up alone (``eval holdout --help``).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from figures import line

ROOT = Path(__file__).resolve().parents[1]
CASE = "icd10cm"
VARIANTS_FILE = ROOT / "data" / "demo" / "variants.json"
PHASES = (
    "cli_to_created",
    "created_to_dequeued",
    "to_run_start",
    "run_start_to_first_step",
    "steps",
    "finished_to_exit",
    "total",
    "cli_cpu",
)


def holdout_command(cli: list[str], size: int, seed: int) -> list[str]:
    return [
        *cli,
        "eval",
        "holdout",
        CASE,
        "--variants-file",
        str(VARIANTS_FILE),
        "--sample-size",
        str(size),
        "--seed",
        str(seed),
        "--wait",
    ]


def started_ids(stderr: str) -> tuple[str, str]:
    """The evaluation and run ids from ``started EVAL_ID (run RUN_ID, ...)`` on stderr."""
    for text in stderr.splitlines():
        if text.startswith("started "):
            words = text.split()
            return words[1], words[3].rstrip(",")
    raise SystemExit(f"no 'started' line on stderr:\n{stderr}")


def run_phases(instance: Any, run_id: str, began: float, ended: float) -> dict[str, Any]:
    """Phase durations (seconds) of one run from its event log; ``None`` for a phase the run
    did not go through (no queue when the CLI executes the run itself)."""
    from dagster import DagsterEventType

    record = instance.get_run_record_by_id(run_id)
    created = record.create_timestamp.timestamp()
    first: dict[DagsterEventType, float] = {}
    step_started: dict[str, float] = {}
    steps: dict[str, float] = {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None:
            continue
        first.setdefault(event.event_type, entry.timestamp)
        if event.event_type == DagsterEventType.STEP_START and event.step_key:
            step_started[event.step_key] = entry.timestamp
        elif event.event_type == DagsterEventType.STEP_SUCCESS and event.step_key:
            steps[event.step_key] = entry.timestamp - step_started[event.step_key]
    finished = next(
        first[kind]
        for kind in (
            DagsterEventType.RUN_SUCCESS,
            DagsterEventType.RUN_FAILURE,
            DagsterEventType.RUN_CANCELED,
        )
        if kind in first
    )
    dequeued = first.get(DagsterEventType.RUN_STARTING)
    run_start = first[DagsterEventType.RUN_START]
    first_step = first[DagsterEventType.STEP_START]
    return {
        "cli_to_created": created - began,
        "created_to_dequeued": None if dequeued is None else dequeued - created,
        "to_run_start": run_start - (dequeued or created),
        "run_start_to_first_step": first_step - run_start,
        "steps": finished - first_step,
        "finished_to_exit": ended - finished,
        "total": ended - began,
        "step_seconds": steps,
    }


def stop_dispatcher(home: Path) -> None:
    """Stop a dispatcher a previous run left (it idles for a minute) and wait until it is gone."""
    from eval_pipelines.runs.dispatcher import dispatcher_alive
    from eval_pipelines.runs.dispatcher import stop_dispatcher as ask_to_stop

    lock = home / "eval_pipelines_dispatcher.lock"
    if ask_to_stop(lock):
        deadline = time.monotonic() + 30
        while dispatcher_alive(lock) and time.monotonic() < deadline:
            time.sleep(0.2)


def copy_into(workdir: Path, env: dict[str, str]) -> dict[str, str]:
    """Copies of the instance and warehouse (and its index cache) under ``workdir``."""
    from eval_pipelines import settings

    warehouse = Path(env.get(settings.WAREHOUSE_ENV) or ROOT / settings.DEFAULT_WAREHOUSE)
    home = Path(env.get("DAGSTER_HOME") or ROOT / ".dagster_home")
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(warehouse, workdir / "warehouse.duckdb")
    shutil.copytree(home, workdir / "dagster_home", dirs_exist_ok=True)
    (workdir / "dagster_home" / "eval_pipelines_dispatcher.lock").unlink(missing_ok=True)
    indexes = Path(env.get(settings.INDEX_DIR_ENV) or warehouse.parent / "indexes")
    if indexes.exists():
        shutil.copytree(indexes, workdir / "indexes", dirs_exist_ok=True)
    return dict(
        env,
        EVAL_PIPELINES_WAREHOUSE=str(workdir / "warehouse.duckdb"),
        EVAL_PIPELINES_INDEX_DIR=str(workdir / "indexes"),
        DAGSTER_HOME=str(workdir / "dagster_home"),
    )


def summary(name: str, values: list[float]) -> None:
    line(f"{name}_best_s", min(values))
    line(f"{name}_median_s", statistics.median(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sample-size", type=int, default=200)
    parser.add_argument("--workdir", type=Path, default=None, help="work on copies made here")
    parser.add_argument(
        "--keep-dispatcher",
        action="store_true",
        help="do not stop the dispatcher between runs (measures a warm session)",
    )
    args = parser.parse_args()
    env = dict(os.environ)
    if args.workdir is not None:
        env = copy_into(args.workdir.absolute(), env)
    # This process reads the same instance as the commands it times.
    os.environ.update(env)
    from eval_pipelines.runs.instance import dagster_home, dagster_instance

    instance = dagster_instance()
    home = dagster_home()
    cli = [sys.executable, "-m", "eval_pipelines.cli.main"]
    line("dagster_home", home)
    line("warehouse", env.get("EVAL_PIPELINES_WAREHOUSE", "data/warehouse.duckdb"))
    helps = []
    for _ in range(3):
        began = time.perf_counter()
        subprocess.run([*cli, "eval", "holdout", "--help"], env=env, capture_output=True)
        helps.append(time.perf_counter() - began)
    line("cli_start_help_best_s", min(helps))

    seed_base = int(time.time()) % 100_000
    measured: list[dict[str, Any]] = []
    for i in range(args.runs):
        if not args.keep_dispatcher:
            stop_dispatcher(home)
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.time()
        out = subprocess.run(
            holdout_command(cli, args.sample_size, seed_base + i),
            env=env,
            capture_output=True,
            text=True,
        )
        ended = time.time()
        cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if out.returncode != 0:
            raise SystemExit(f"run {i} exited {out.returncode}:\n{out.stderr}")
        eval_id, run_id = started_ids(out.stderr)
        phases = run_phases(instance, run_id, began, ended)
        # CPU of the command and the children it waited for (not of a dispatcher it left
        # running, nor of the run processes that dispatcher started).
        phases["cli_cpu"] = (cpu_after.ru_utime + cpu_after.ru_stime) - (
            cpu_before.ru_utime + cpu_before.ru_stime
        )
        measured.append(phases)
        line(
            f"run {i} {eval_id}",
            ", ".join(
                f"{name} {'-' if phases[name] is None else f'{phases[name]:.2f}'}"
                for name in PHASES
            ),
        )
    for name in PHASES:
        values = [m[name] for m in measured if m[name] is not None]
        if values:
            summary(name, values)
    keys = sorted({key for m in measured for key in m["step_seconds"]})
    medians = {
        key: statistics.median(m["step_seconds"][key] for m in measured if key in m["step_seconds"])
        for key in keys
    }
    for key, seconds in sorted(medians.items(), key=lambda item: -item[1]):
        line(f"step {key} median_s", seconds)
    if not args.keep_dispatcher:
        stop_dispatcher(home)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
