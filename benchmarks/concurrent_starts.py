"""Benchmark N simultaneous ``eval holdout --wait`` starts on the demo case (ICD-10-CM).

Run from the repository root::

    .venv/bin/python benchmarks/concurrent_starts.py [--starts 16] [--sample-size 200]
        [--workdir DIR] [--poll-seconds 3] [--daemon-port PORT]

Sets its own ``DAGSTER_HOME``, warehouse and index folder under the workdir (never the
repository's), creates the demo case, runs one warm-up evaluation (index build, JIT), times
one single evaluation, then starts N ``eval holdout --wait --json`` processes at once. While
they run it polls ``eval status`` of one of them (of the warm-up evaluation until the first
new id is printed) and times every answer. Without ``--daemon-port`` runs are dequeued by the
CLI's dispatcher, as without ``make dev``; with it, the script starts its own ``dagster dev``
on that port for the instance under the workdir and stops it at the end.

Prints ``name: value`` lines: single run seconds, N-run total seconds, ratio to N x single,
slowest status answer, failures (non-zero exits; error, busy and traceback lines on stderr;
lock-wait notices are counted apart: they say a start waited, not that it failed).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from figures import line, timed

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "demo"
CASE = "icd10cm"
VARIANTS = [{"name": "baseline"}, {"name": "five", "config": {"candidates": 5}}]
STATUS_CLAIM_S = 15.0  # README: readers wait up to 15 s, then exit 4
BAD_WORDS = ("error", "busy", "traceback")
WAIT_NOTICE = "for the warehouse lock"  # "waiting 40 s for the warehouse lock": not an error


def holdout_command(cli: list[str], variants: Path, size: int) -> list[str]:
    return [
        *cli,
        "eval",
        "holdout",
        CASE,
        "--variants-file",
        str(variants),
        "--sample-size",
        str(size),
        "--seed",
        "7",
        "--wait",
        "--json",
    ]


def start_daemon(port: int, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``dagster dev`` for the workdir's instance; returns once its daemon dequeues runs."""
    with open(log, "ab") as output:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "eval_pipelines.ui.devserver",
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-w",
                "workspace.yaml",
            ],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    probe = (
        "from eval_pipelines.runs.instance import dagster_instance;"
        "from eval_pipelines.runs import daemon_running;"
        "print(daemon_running(dagster_instance()))"
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"dagster dev exited ({server.returncode}); see {log}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2).read()
            out = subprocess.run(
                [sys.executable, "-c", probe], env=env, capture_output=True, text=True
            )
            if out.stdout.strip() == "True":
                return server
        except OSError:
            pass
        time.sleep(2)
    stop_daemon(server)
    raise SystemExit(f"dagster dev on port {port} did not become ready; see {log}")


def stop_daemon(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def started_eval_id(err: Path) -> str | None:
    """The id an ``eval holdout --wait`` printed on stderr (``started EVAL_ID (run ...)``)."""
    for text in err.read_text(errors="replace").splitlines():
        if text.startswith("started "):
            return text.split()[1]
    return None


def concurrent_starts(
    cli: list[str],
    env: dict[str, str],
    variants: Path,
    args: argparse.Namespace,
    known_eval: str,
    folder: Path,
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    command = holdout_command(cli, variants, args.sample_size)
    processes = []
    started = time.perf_counter()
    for i in range(args.starts):
        out, err = folder / f"{i}.out", folder / f"{i}.err"
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            processes.append(subprocess.Popen(command, env=env, stdout=stdout, stderr=stderr))
    ends: dict[int, float] = {}
    polls: list[tuple[float, int, str, float]] = []
    target: str | None = None
    while len(ends) < len(processes):
        if target is None:
            target = next(
                filter(None, (started_eval_id(folder / f"{i}.err") for i in range(args.starts))),
                None,
            )
        polled = target or known_eval
        before = time.perf_counter()
        status = subprocess.Popen(
            [*cli, "eval", "status", CASE, polled, "--json"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _, code, usage = os.wait4(status.pid, 0)
        cpu = usage.ru_utime + usage.ru_stime
        polls.append((time.perf_counter() - before, os.waitstatus_to_exitcode(code), polled, cpu))
        for i, process in enumerate(processes):
            if i not in ends and process.poll() is not None:
                ends[i] = time.perf_counter() - started
        if len(ends) < len(processes):
            time.sleep(args.poll_seconds)
    total = max(ends.values())
    codes = [process.returncode for process in processes]
    bad_lines = []
    lock_waits = 0
    complete = 0
    for i in range(args.starts):
        for text in (folder / f"{i}.err").read_text(errors="replace").splitlines():
            if WAIT_NOTICE in text:
                lock_waits += 1
            elif any(word in text.lower() for word in BAD_WORDS):
                bad_lines.append(f"start {i}: {text}")
        try:
            complete += json.loads((folder / f"{i}.out").read_text())["status"] == "complete"
        except (ValueError, KeyError):
            pass
    n = args.starts
    line(f"concurrent_{n}_total_s", total)
    line(f"concurrent_{n}_fastest_process_s", min(ends.values()))
    line(f"concurrent_{n}_ratio_to_{n}x_single", total / (n * args.single_seconds))
    line(f"concurrent_{n}_complete_reports", f"{complete}/{n}")
    line(f"concurrent_{n}_exit_codes", ",".join(str(c) for c in codes))
    line(f"concurrent_{n}_failures", sum(c != 0 for c in codes))
    line(f"concurrent_{n}_exit_4", sum(c == 4 for c in codes))
    line(f"concurrent_{n}_error_busy_traceback_lines", len(bad_lines))
    line(f"concurrent_{n}_lock_wait_notices", lock_waits)
    for text in bad_lines[:10]:
        line("  stderr", text)
    slowest = max(polls)
    line("status_polls", len(polls))
    line("status_polls_nonzero_exit", sum(code != 0 for _, code, _, _ in polls))
    line("status_median_answer_s", sorted(poll[0] for poll in polls)[len(polls) // 2])
    line("status_slowest_answer_s", slowest[0])
    line("status_slowest_answer_cpu_s", slowest[3])
    line("status_slowest_answer_eval", slowest[2])
    line(f"status_within_{STATUS_CLAIM_S:g}_s", slowest[0] <= STATUS_CLAIM_S)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=16)
    parser.add_argument("--sample-size", type=int, default=200)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--poll-seconds", type=float, default=3.0)
    parser.add_argument(
        "--daemon-port", type=int, default=None, help="start dagster dev on this port"
    )
    args = parser.parse_args()
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="eval-concurrent-"))).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        EVAL_PIPELINES_WAREHOUSE=str(workdir / "warehouse.duckdb"),
        EVAL_PIPELINES_INDEX_DIR=str(workdir / "indexes"),
        DAGSTER_HOME=str(workdir / "dagster"),
        NUMBA_CACHE_DIR=str(workdir / "numba-cache"),
    )
    (workdir / "dagster").mkdir(exist_ok=True)
    cli = [sys.executable, "-m", "eval_pipelines.cli.main"]
    line("workdir", workdir)
    line("cpu_count", os.cpu_count() or 0)
    line("mode", f"daemon (dagster dev :{args.daemon_port})" if args.daemon_port else "dispatcher")

    timed(
        [
            *cli,
            "case",
            "create",
            CASE,
            "--records",
            str(DEMO / "icd10cm_records.parquet"),
            "--tree",
            str(DEMO / "icd10cm_tree.parquet"),
            "--target-depth",
            "3,4",
            "--replace",
        ],
        env,
    )
    variants = workdir / "variants.json"
    variants.write_text(json.dumps(VARIANTS))
    server = start_daemon(args.daemon_port, env, workdir / "dev.log") if args.daemon_port else None
    try:
        warmup_s, out = timed(holdout_command(cli, variants, args.sample_size), env)
        known_eval = json.loads(out)["evalId"]
        line("warmup_run_s", warmup_s)
        args.single_seconds, _ = timed(holdout_command(cli, variants, args.sample_size), env)
        line(f"single_run_{args.sample_size}x2_s", args.single_seconds)
        concurrent_starts(
            cli, env, variants, args, known_eval, workdir / f"starts-{time.time():.0f}"
        )
    finally:
        if server is not None:
            stop_daemon(server)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
