"""Benchmark the team's deployment (issue 30, section 5) against the embedded default.

Run from the repository root::

    nice .venv/bin/python benchmarks/two_machines.py [--sample-size 100] [--ks 1,2,4]
        [--latency-ms 200] [--cores-per-machine N] [--repeats N] [--one-endpoint-cap]
        [--workdir DIR]

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
concurrency 4 per endpoint; each its own seed and its own model name, so no answer comes from
another's cache although two samples share records; the script prints the calls answered) started
at once; on the embedded default all from its machine, on the team's deployment alternately
from the two machines; wall seconds until the last completes, and the ratio team / embedded.
Per K and setup, which process executed each run (read from the run's event log): the command
that submitted it, on its own machine, when a run slot was free, else a run worker of a
dispatcher.

For (a), the seconds of each step (STEP_START to STEP_SUCCESS in the run's event log) on both
setups and the command's time outside its run (wall seconds minus first to last event).
``--sample-size 400`` makes the chat latency a larger part of each run.

Each machine has its own temporary folder, as separate hosts do, so the chat endpoint's slots
(a chat setting's ``concurrency`` counts calls in flight per machine, docs/models.md) are per
machine: two machines may have 2 x 4 calls in flight to the endpoint, one machine 4. The script
prints the most calls the stand-in answered at once in each round. ``--one-endpoint-cap`` gives
every machine the same temporary folder instead, so the endpoint sees at most 4 in flight from
the whole deployment (what one host's slots give), for the figure without the second machine's
slots.

``--repeats N`` runs (a) and each K round N times, the setups alternating, and prints every
time, the median of each setup and the ratio of the medians.

Prints ``name: value`` lines (the load average before and after, for the record).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
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
from eval_pipelines_tests.helpers.chat_variant import PRICE, chat_config  # noqa: E402
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


def chat_variants(base_url: str, seed: int) -> list[dict[str, Any]]:
    """The baseline and a ``chat`` variant (concurrency 4) whose model name is the seed's own,
    so no evaluation finds another's answers in the call cache (two samples share records)."""
    config = chat_config(base_url)
    model = f"{config['options']['model']}-{seed}"
    config["options"]["model"] = model
    config["prices"] = {model: PRICE}
    return [{"name": "baseline"}, {"name": "chat", "config": {**config, "concurrency": 4}}]


def one_temporary_folder(machines: list[Machine], folder: Path) -> list[Machine]:
    """The machines sharing one temporary folder (so one set of endpoint slots), as the
    processes of one host do."""
    folder.mkdir(exist_ok=True)
    return [
        dataclasses.replace(machine, environ=machine.environ | {"TMPDIR": str(folder)})
        for machine in machines
    ]


def medians(name: str, seconds: dict[str, list[float]]) -> None:
    """Print each setup's times (when there are several) and their median."""
    for setup, label in (
        ("embedded", "embedded default"),
        ("shared", "two machines, shared warehouse"),
    ):
        times = seconds[setup]
        if len(times) > 1:
            line(f"{name} {label}, each round (s)", " ".join(f"{value:.3g}" for value in times))
        line(f"{name} {label} (s){' median' if len(times) > 1 else ''}", statistics.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample-size", type=int, default=100)
    parser.add_argument("--ks", default="1,2,4")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--cores-per-machine", type=int)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--one-endpoint-cap", action="store_true")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    if args.repeats < 1:
        raise SystemExit(f"--repeats={args.repeats}: at least 1 round is needed")
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
        if args.one_endpoint_cap:
            team = one_temporary_folder(team, root / "team_tmp")
        line(
            "chat endpoint slots",
            "one set for the two machines (--one-endpoint-cap)"
            if args.one_endpoint_cap
            else "each machine its own (its own temporary folder)",
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
            one: dict[str, list[float]] = {"embedded": [], "shared": []}
            rounds: dict[str, list[dict[str, float]]] = {"embedded": [], "shared": []}
            for repeat in range(args.repeats):
                for name, machine in (("embedded", alone), ("shared", team[0])):
                    wall, (started,) = at_once(
                        [(machine, holdout(machine, PLAIN_VARIANTS, 2 + 1000 * repeat, size))]
                    )
                    one[name].append(wall)
                    rounds[name].append(step_seconds(started, wall))
            medians("one evaluation,", one)
            ratio = statistics.median(one["shared"]) / statistics.median(one["embedded"])
            line("one evaluation, shared / embedded (goal <= 1.5)", ratio)
            # The steps of each setup's median round (the upper middle one for an even count).
            steps = {
                name: rounds[name][
                    sorted(range(len(times)), key=times.__getitem__)[len(times) // 2]
                ]
                for name, times in one.items()
            }
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
                seed = 100
                for k in (int(text) for text in args.ks.split(",")):
                    figures: dict[str, list[float]] = {"embedded": [], "shared": []}
                    for repeat in range(args.repeats):
                        label = f"K={k}" + (f" round {repeat + 1}" if args.repeats > 1 else "")
                        for name, machines in (("embedded", [alone]), ("shared", team)):
                            starts = []
                            for index in range(k):
                                machine = machines[index % len(machines)]
                                seed += 1
                                chat = chat_variants(standin.base_url, seed)
                                starts.append((machine, holdout(machine, chat, seed, size)))
                            standin.take_peak()
                            calls_before = standin.request_count
                            wall, started = at_once(starts)
                            line(
                                f"{label} {name}: chat calls answered",
                                standin.request_count - calls_before,
                            )
                            figures[name].append(wall)
                            for who, count in sorted(executed_by(started).items()):
                                line(f"{label} {name}: runs executed by {who}", count)
                            line(
                                f"{label} {name}: most chat calls in flight at once",
                                standin.take_peak(),
                            )
                    medians(f"K={k}", figures)
                    ratio = statistics.median(figures["shared"]) / statistics.median(
                        figures["embedded"]
                    )
                    goal = " (goal <= 0.6)" if k == 4 else ""
                    line(f"K={k} shared / embedded{goal}", ratio)
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
