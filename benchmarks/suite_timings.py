"""The wall times the test suite used to assert on (issue 19, item 26), measured here instead.

Run from the repository root::

    .venv/bin/python benchmarks/suite_timings.py [--repeat 5] [--no-interrupt]

Prints one ``name: value`` line per figure, in seconds (best of ``--repeat``, after a warm-up
call). The tests keep a deterministic check of what makes each one fast:

- ``unpaired_2x2500``: ``unpaired_difference`` of 2,500 records in 1,500 clusters a side, 2,000
  resamples (``test_stats_aa.py``: four vectorised draws). It was asserted below 0.5 s.
- ``paired_5000``: ``paired_difference`` of 5,000 records in 3,000 clusters, 2,000 resamples
  (``test_stats_paired_difference.py``: three vectorised draws). Asserted below 0.5 s.
- ``memo_regex_backtracking``: a memo rule ``^(a+)+$`` on ``"a" * 35 + "!"`` (``test_memo.py``:
  the rule runs on RE2). Asserted below 1 s; Python's ``re`` would take about 2^35 steps.
- ``sigint_to_exit``: SIGINT sent during the parallel search of the demo's text index until the
  process has exited with KeyboardInterrupt (``test_interrupts.py`` checks the exit, not how
  soon). Asserted below 10 s. Skipped with ``--no-interrupt``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from figures import line

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def best_of(repeat: int, call: Callable[[], object]) -> float:
    """Best wall seconds of ``repeat`` calls, after one warm-up call."""
    call()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


def sigint_to_exit() -> float:
    """Seconds from SIGINT during the search to the process's exit."""
    sys.path.insert(0, str(ROOT / "eval_pipelines_tests" / "core" / "text"))
    from test_interrupts import DEMO, SEARCH_FOREVER

    process = subprocess.Popen(
        [sys.executable, "-c", SEARCH_FOREVER, str(DEMO)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "searching"
        time.sleep(1.0)  # inside a kernel call by now
        sent = time.perf_counter()
        os.kill(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
        seconds = time.perf_counter() - sent
    finally:
        process.kill()
    if process.returncode != -signal.SIGINT or "KeyboardInterrupt" not in stderr:
        raise SystemExit(f"the search did not stop with KeyboardInterrupt:\n{stderr[-600:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-interrupt", action="store_true", help="skip sigint_to_exit")
    args = parser.parse_args()

    import numpy as np

    from eval_pipelines.core.holdout.memo import parse_memo_entry
    from eval_pipelines.core.stats import paired_difference, unpaired_difference
    from eval_pipelines.core.tree import tree_from_parent_links

    data_rng = np.random.default_rng(0)
    a = data_rng.random(2_500) < 0.8
    b = data_rng.random(2_500) < 0.8
    codes = np.concatenate([np.arange(1_500), data_rng.integers(0, 1_500, 1_000)])
    line(
        "unpaired_2x2500",
        best_of(
            args.repeat,
            lambda: unpaired_difference(a, b, a_clusters=codes, b_clusters=codes, rng=0),
        ),
    )

    data_rng = np.random.default_rng(0)
    clusters = np.concatenate([np.arange(3_000), data_rng.integers(0, 3_000, 2_000)])
    baseline = data_rng.random(5_000) < 0.8
    candidate = data_rng.random(5_000) < 0.82
    line(
        "paired_5000",
        best_of(
            args.repeat, lambda: paired_difference(baseline, candidate, clusters=clusters, rng=0)
        ),
    )

    import polars as pl

    tree = tree_from_parent_links(pl.DataFrame({"code": ["A", "A1"], "parent": [None, "A"]}))
    rule = parse_memo_entry(
        {"id": "m1", "instruction": "x", "when": {"regex": "^(a+)+$"}, "then": {"assign": "A1"}},
        tree,
    ).rule
    line("memo_regex_backtracking", best_of(args.repeat, lambda: rule.matches("a" * 35 + "!", {})))

    if not args.no_interrupt:
        line("sigint_to_exit", sigint_to_exit())


if __name__ == "__main__":
    main()
