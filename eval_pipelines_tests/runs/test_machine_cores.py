"""A simulated machine given cores of its own runs every process on them, children included
(benchmarks/two_machines.py --cores-per-machine); without, it may use every core this process
may."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

from eval_pipelines_tests.helpers.machines import embedded_machine

# Prints the cores of this process and of a child it starts.
_AFFINITIES = """
import json, os, subprocess, sys
child = subprocess.run(
    [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
    capture_output=True, text=True, check=True,
)
print(json.dumps([sorted(os.sched_getaffinity(0)), json.loads(child.stdout)]))
"""


def _affinities(machine_cores: frozenset[int] | None, root: Path) -> list[list[int]]:
    machine = dataclasses.replace(embedded_machine(root, "pinned"), cores=machine_cores)
    done = machine.run(sys.executable, "-c", _AFFINITIES)
    assert done.returncode == 0, done.stderr
    found: list[list[int]] = json.loads(done.stdout)
    return found


def test_a_machine_with_cores_runs_its_process_tree_on_them(tmp_path: Path) -> None:
    first = min(os.sched_getaffinity(0))
    assert _affinities(frozenset({first}), tmp_path) == [[first], [first]]


def test_a_machine_without_cores_is_not_pinned(tmp_path: Path) -> None:
    everywhere = sorted(os.sched_getaffinity(0))
    assert _affinities(None, tmp_path) == [everywhere, everywhere]
