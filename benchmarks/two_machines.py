"""Benchmark the team's deployment (issue 30, section 5) against the embedded default.

Run from the repository root::

    nice .venv/bin/python benchmarks/two_machines.py [--sample-size 100] [--ks 1,2,4]
        [--latency-ms 200] [--cores-per-machine N] [--workdir DIR]

Starts a PostgreSQL server from the installed wheel on 127.0.0.1 (its own folder under the
workdir), two databases with their own roles (the Dagster instance, the warehouse), the chat
stand-in, and three "machines" of eval_pipelines_tests/helpers/machines.py: one embedded default
(a DuckDB file, the local instance) and two of the team's deployment (deploy/team/dagster.yaml
on PostgreSQL, the warehouse on PostgreSQL, a shared folder). Every command runs as its own
process from its machine's folder.

``--cores-per-machine N`` gives each machine CPUs of its own (every process it starts is pinned
with ``sched_setaffinity``, its children inherit it): the embedded default and machine_a on
cores 0..N-1, machine_b on cores N..2N-1. PostgreSQL and the chat stand-in stay unpinned: they
stand for other hosts. Without it (the default) every process may use every core, so on a small
host the second machine adds no CPU.

(a) The shared warehouse's overhead: the same evaluation (baseline and candidates 5, no chat)
timed end to end with ``eval holdout --wait`` on each setup, after one warm-up evaluation on
each (index build); ratio shared / embedded.
(b) Throughput: K evaluations with a ``chat`` variant (the stand-in at ``--latency-ms``,
concurrency 4 per endpoint; each its own seed, so no answer comes from another's cache) started
at once; on the embedded default all from its machine, on the team's deployment alternately
from the two machines; wall seconds until the last completes, and the ratio team / embedded.
Per K and setup, which process executed each run (read from the run's event log): the command
that submitted it, on its own machine, when a run slot was free, else a run worker of a
dispatcher.

For (a), the seconds of each step (STEP_START to STEP_SUCCESS in the run's event log) on both
setups and the command's time outside its run (wall seconds minus first to last event).
``--sample-size 400`` makes the chat latency a larger part of each run.

Prints ``name: value`` lines (the load average before and after, for the record).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from figures import line

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_pipelines.chat_standin.server import serve_standin  # noqa: E402
from eval_pipelines.postgres_local.server import stop  # noqa: E402
from eval_pipelines_tests.helpers.chat_variant import chat_config  # noqa: E402
from eval_pipelines_tests.helpers.machines import (  # noqa: E402
    CLI,
    UNSEEN_CASE,
    Machine,
    create_unseen_case,
    embedded_machine,
    team_machine,
)
from eval_pipelines_tests.helpers.postgres import create_database, start_server  # noqa: E402

PLAIN_VARIANTS: list[dict[str, Any]] = [
    {"name": "baseline"},
    {"name": "k-5.fewer", "config": {"candidates": 5}},
]


def holdout(machine: Machine, variants: list[dict[str, Any]], seed: int, size: int) -> list[str]:
    variants_file = machine.folder / f"variants_{seed}.json"
    variants_file.write_text(json.dumps(variants))
    return [
        *CLI, "eval", "holdout", UNSEEN_CASE, "--variants-file", str(variants_file),
        "--sample-size", str(size), "--seed", str(seed), "--wait", "--json", "--timeout", "3000",
    ]  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Started:
    """A command that ran to completion: where, its process id, the run it waited for."""

    machine: Machine
    pid: int
    run_id: str


def at_once(starts: list[tuple[Machine, list[str]]]) -> tuple[float, list[Started]]:
    """Start every command at once; wall seconds until the last has completed its run, and
    each command's process and run."""
    began = time.perf_counter()
    processes = [machine.start(*command) for machine, command in starts]
    done = []
    for (machine, _), process in zip(starts, processes, strict=True):
        out, err = process.communicate()
        status = json.loads(out) if process.returncode == 0 else {}
        if status.get("status") != "complete":
            raise SystemExit(f"{machine.name}: evaluation failed ({process.returncode}):\n{err}")
        done.append(Started(machine, process.pid, status["reportRunId"]))
    return time.perf_counter() - began, done


def executed_by(started: list[Started]) -> dict[str, int]:
    """How many runs each process executed: the command that submitted it (named by its
    machine) or a run worker a dispatcher started."""
    records = started[0].machine.run_records([item.run_id for item in started])
    counts: dict[str, int] = {}
    submitters = {item.pid: item.machine.name for item in started}
    for item in started:
        pid = records[item.run_id]["pid"]
        if pid == item.pid:
            who = f"{item.machine.name} (the command that submitted it)"
        elif pid in submitters:
            who = f"{submitters[pid]} (another command)"
        else:
            who = "a dispatcher's run worker"
        counts[who] = counts.get(who, 0) + 1
    return counts


def step_seconds(started: Started, wall: float) -> dict[str, float]:
    """Seconds of each step of the run, and of the command outside its run."""
    record = started.machine.run_records([started.run_id])[started.run_id]
    outside = wall - (record["last"] - record["first"])
    return {**record["steps"], "(command outside its run)": outside}


def pinned(machines: list[Machine], per_machine: int | None) -> list[Machine]:
    """The machines with their cores: the first two on cores 0.., the third on the next ones."""
    if per_machine is None:
        return machines
    available = len(os.sched_getaffinity(0))
    if per_machine < 1 or 2 * per_machine > available:
        raise SystemExit(
            f"--cores-per-machine={per_machine}: two machines need 2 x N cores, "
            f"this process may use {available}"
        )
    first, second = range(per_machine), range(per_machine, 2 * per_machine)
    return [
        dataclasses.replace(machine, cores=frozenset(cores))
        for machine, cores in zip(machines, (first, first, second), strict=True)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample-size", type=int, default=100)
    parser.add_argument("--ks", default="1,2,4")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--cores-per-machine", type=int)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    root = args.workdir or Path(tempfile.mkdtemp(prefix="two-machines-"))
    size = args.sample_size
    line("load average (1, 5, 15 min) at start", " ".join(f"{v:.1f}" for v in os.getloadavg()))
    line("cores of this host", os.cpu_count())
    server = start_server(root / "postgres")
    try:
        instance = create_database(server, "bench_instance", own_role=True)
        warehouse = create_database(server, "bench_warehouse", own_role=True)
        shared = root / "shared"
        shared.mkdir()
        alone, *team = pinned(
            [
                embedded_machine(root, "single_user"),
                *(
                    team_machine(
                        root, name, instance=instance, warehouse=warehouse, shared_dir=shared
                    )
                    for name in ("machine_a", "machine_b")
                ),
            ],
            args.cores_per_machine,
        )
        for machine in (alone, *team):
            cores = (
                "unpinned" if machine.cores is None else ",".join(map(str, sorted(machine.cores)))
            )
            line(f"cores of {machine.name}", cores)
        line("cores of PostgreSQL and the chat stand-in", "unpinned (they stand for other hosts)")
        team[0].create_instance_tables()
        for machine in (alone, team[0]):
            create_unseen_case(machine, root / "inputs")
        line("records in the case", f"{UNSEEN_CASE} (ICD-10-CM chapters 6 and 12)")
        line("sample size", size)
        try:
            # Warm-ups build the index each setup opens.
            for machine in (alone, team[0]):
                at_once([(machine, holdout(machine, PLAIN_VARIANTS, 1, size))])
            one = {}
            steps = {}
            for name, machine in (("embedded", alone), ("shared", team[0])):
                one[name], (started,) = at_once(
                    [(machine, holdout(machine, PLAIN_VARIANTS, 2, size))]
                )
                steps[name] = step_seconds(started, one[name])
            line("one evaluation, embedded default (s)", one["embedded"])
            line("one evaluation, shared warehouse (s)", one["shared"])
            line("shared / embedded (goal <= 1.5)", one["shared"] / one["embedded"])
            by_gap = sorted(
                set(steps["embedded"]) | set(steps["shared"]),
                key=lambda key: steps["shared"].get(key, 0) - steps["embedded"].get(key, 0),
                reverse=True,
            )
            for key in by_gap:
                embedded, on_shared = steps["embedded"].get(key, 0.0), steps["shared"].get(key, 0.0)
                line(
                    f"step {key}: embedded, shared, difference (s)",
                    f"{embedded:.2f} {on_shared:.2f} {on_shared - embedded:+.2f}",
                )

            with serve_standin(latency_ms=args.latency_ms) as standin:
                chat: list[dict[str, Any]] = [
                    {"name": "baseline"},
                    {"name": "chat", "config": {**chat_config(standin.base_url), "concurrency": 4}},
                ]
                seed = 100
                for k in (int(text) for text in args.ks.split(",")):
                    figures = {}
                    for name, machines in (("embedded", [alone]), ("shared", team)):
                        starts = []
                        for index in range(k):
                            machine = machines[index % len(machines)]
                            seed += 1
                            starts.append((machine, holdout(machine, chat, seed, size)))
                        figures[name], started = at_once(starts)
                        for who, count in sorted(executed_by(started).items()):
                            line(f"K={k} {name}: runs executed by {who}", count)
                    line(f"K={k} embedded default (s)", figures["embedded"])
                    line(f"K={k} two machines, shared warehouse (s)", figures["shared"])
                    line(f"K={k} shared / embedded", figures["shared"] / figures["embedded"])
                line("chat calls answered by the stand-in", standin.request_count)
        finally:
            for machine in (alone, *team):
                machine.stop_dispatcher()
    finally:
        stop(server.data_dir, mode="immediate")
        shutil.rmtree(root / "postgres", ignore_errors=True)
    line("load average (1, 5, 15 min) at end", " ".join(f"{v:.1f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
