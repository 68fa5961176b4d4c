"""Benchmark the team's deployment (issue 30, section 5) against the embedded default.

Run from the repository root::

    nice .venv/bin/python benchmarks/two_machines.py [--sample-size 100] [--ks 1,2,4]
        [--latency-ms 200] [--workdir DIR]

Starts a PostgreSQL server from the installed wheel on 127.0.0.1 (its own folder under the
workdir), two databases with their own roles (the Dagster instance, the warehouse), the chat
stand-in, and three "machines" of eval_pipelines_tests/helpers/machines.py: one embedded default
(a DuckDB file, the local instance) and two of the team's deployment (deploy/team/dagster.yaml
on PostgreSQL, the warehouse on PostgreSQL, a shared folder). Every command runs as its own
process from its machine's folder.

(a) The shared warehouse's overhead: the same evaluation (baseline and candidates 5, no chat)
timed end to end with ``eval holdout --wait`` on each setup, after one warm-up evaluation on
each (index build); ratio shared / embedded.
(b) Throughput: K evaluations with a ``chat`` variant (the stand-in at ``--latency-ms``,
concurrency 4 per endpoint; each its own seed, so no answer comes from another's cache) started
at once; on the embedded default all from its machine, on the team's deployment alternately
from the two machines; wall seconds until the last completes, and the ratio team / embedded.

Prints ``name: value`` lines.
"""

from __future__ import annotations

import argparse
import json
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


def at_once(starts: list[tuple[Machine, list[str]]]) -> float:
    """Start every command at once; wall seconds until the last has completed its run."""
    began = time.perf_counter()
    processes = [machine.start(*command) for machine, command in starts]
    for (machine, _), process in zip(starts, processes, strict=True):
        out, err = process.communicate()
        if process.returncode != 0 or json.loads(out)["status"] != "complete":
            raise SystemExit(f"{machine.name}: evaluation failed ({process.returncode}):\n{err}")
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample-size", type=int, default=100)
    parser.add_argument("--ks", default="1,2,4")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    root = args.workdir or Path(tempfile.mkdtemp(prefix="two-machines-"))
    size = args.sample_size
    server = start_server(root / "postgres")
    try:
        instance = create_database(server, "bench_instance", own_role=True)
        warehouse = create_database(server, "bench_warehouse", own_role=True)
        shared = root / "shared"
        shared.mkdir()
        alone = embedded_machine(root, "single_user")
        team = [
            team_machine(root, name, instance=instance, warehouse=warehouse, shared_dir=shared)
            for name in ("machine_a", "machine_b")
        ]
        team[0].create_instance_tables()
        for machine in (alone, team[0]):
            create_unseen_case(machine, root / "inputs")
        line("records in the case", f"{UNSEEN_CASE} (ICD-10-CM chapters 6 and 12)")
        line("sample size", size)
        try:
            # Warm-ups build the index each setup opens.
            for machine in (alone, team[0]):
                at_once([(machine, holdout(machine, PLAIN_VARIANTS, 1, size))])
            one = {
                name: at_once([(machine, holdout(machine, PLAIN_VARIANTS, 2, size))])
                for name, machine in (("embedded", alone), ("shared", team[0]))
            }
            line("one evaluation, embedded default (s)", one["embedded"])
            line("one evaluation, shared warehouse (s)", one["shared"])
            line("shared / embedded (goal <= 1.5)", one["shared"] / one["embedded"])

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
                        figures[name] = at_once(starts)
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


if __name__ == "__main__":
    main()
