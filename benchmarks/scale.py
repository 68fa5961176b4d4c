"""Benchmark case creation, the text index and the holdout evaluation at 1M-10M records.

Run from the repository root::

    .venv/bin/python benchmarks/scale.py --sizes 130k,1m,3m,10m [--workdir DIR] [--keep]

For each size N the script writes an N-record case generated from the demo (ICD-10-CM,
130,525 records) and measures, each step in a process of its own with its own
``DAGSTER_HOME``, warehouse and index folder under the work directory (the repository's
``data/`` is never touched):

* ``case_create``: ``eval-pipelines case create`` of the generated Parquet file;
* ``index_build``: the ``evidence_index`` step of a first, small ``eval holdout`` (it builds
  the index of the new records version: reading the records from DuckDB, vectorising,
  building and saving), its kernel seconds (the step's ``seconds`` metadata) and its run;
* ``eval``: ``eval holdout CASE --variants-file data/demo/variants.json --sample-size 5000
  --seed 7 --wait`` end to end (wall seconds of the CLI) from the built index;
* ``retrieval``: that run's ``leave_out`` metadata ``retrieval_seconds`` (the step, or the
  steps of the graph-backed asset, also give ``leave_out_step_s``);
* peak RSS of each step: the largest single process (kernel high-water mark), its largest
  anonymous RSS (polled; RSS also counts the pages of the memory-mapped index, which the
  kernel can drop), the largest sum over the process tree, and the CPU seconds of the tree
  (polled; the machine is shared, so CPU is steadier than wall time). The CLI hands runs to a
  background dispatcher, which outlives the command; the script makes itself a child
  subreaper, so the dispatcher, its code server and the run process stay its descendants and
  are measured. The second ``eval holdout`` finds that dispatcher warm, as a session with
  ``make dev`` running or a second command within a minute would.

It prints ``name: value`` lines as it goes, then one table per measure and size, the growth
exponent of each measure against N (log-log slope between consecutive sizes and a
least-squares slope over all of them), and, for sizes up to 10M not measured, a projection
from the last slope.

How the records are generated (deterministic for a seed): output row ``i`` belongs to copy
``c = i // 130,525`` of the demo; each copy visits the demo's records in a seeded order, so
every size keeps the demo's label distribution (exactly for whole copies) and a larger size
starts with the records of a smaller one. Copy 0 keeps the demo's texts; every later copy
perturbs each text with one to three seeded edits: drop a word, swap two adjacent words,
repeat a word, insert a word drawn from a seeded vocabulary of demo words, or change the first
digit (texts without a digit, or with one word, get an insertion instead). Labels and every
metadata column (``group_key`` included) are the source record's; keys are new
(``r0000000000``, sortable, in output order). Near-duplicates of every demo text therefore
exist at every size above 130,525, a few of them exact repeats (the script prints the share
of distinct texts, and how many near-duplicates the evaluation held out).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import psutil
import pyarrow.parquet as pq
from figures import line

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "demo"
RECORDS = DEMO / "icd10cm_records.parquet"
TREE = DEMO / "icd10cm_tree.parquet"
VARIANTS = DEMO / "variants.json"
CASE = "scale"
# Bump when the generated records change, so cached Parquet files are regenerated.
GENERATOR_VERSION = 1
VOCABULARY_SIZE = 4096
# Demo copies generated and written at a time: about 1M rows, a few hundred MB of scratch.
COPIES_PER_CHUNK = 8
# Edits per perturbed text: the first always, the second and third with these probabilities.
EXTRA_EDIT_PROBABILITIES = (0.5, 0.2)
DROP, SWAP, REPEAT, INSERT, DIGIT = range(5)
EDIT_WEIGHTS = np.array([0.2, 0.2, 0.15, 0.3, 0.15])
NO_EDIT = -1
INDEX_SAMPLE_SIZE = 100
EVAL_SAMPLE_SIZE = 5000
POLL_SECONDS = 0.25
PR_SET_CHILD_SUBREAPER = 36
MEASURES = (
    "case_create_s",
    "case_create_cpu_s",
    "index_build_s",
    "index_build_kernel_s",
    "eval_5000x2_s",
    "eval_5000x2_cpu_s",
    "eval_run_s",
    "retrieval_s",
    "case_create_peak_rss_mb",
    "index_build_peak_rss_mb",
    "index_build_peak_anon_rss_mb",
    "eval_peak_rss_mb",
    "eval_peak_anon_rss_mb",
)


# --------------------------------------------------------------------------------------------
# Generating the records
# --------------------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """``130k``, ``1m``, ``2.5m``, ``1000000`` or ``demo`` (the demo's own 130,525) as a count."""
    text = text.strip().lower()
    if text == "demo":
        return pl.scan_parquet(RECORDS).select(pl.len()).collect().item()
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    number = text[:-1] if scale > 1 else text
    return round(float(number) * scale)


def size_label(n: int) -> str:
    """A short label: ``130k``, ``1m``, ``2.5m``, or the count itself."""
    for unit, scale in (("m", 1_000_000), ("k", 1_000)):
        if n >= scale and (n * 10) % scale == 0:
            return f"{n / scale:g}{unit}"
    return str(n)


def demo_vocabulary(texts: pl.Series, *, seed: int) -> np.ndarray:
    """A seeded sample of the demo's distinct alphabetic words (3+ letters) to insert.

    Parameters
    ----------
    texts
        The demo texts.
    seed
        Seeds the sample.

    Returns
    -------
    numpy.ndarray
        ``VOCABULARY_SIZE`` (or fewer) distinct words, as a Python-object array.
    """
    words = texts.str.split(" ").explode()
    words = words.filter(words.str.contains(r"^[A-Za-z]{3,}$")).unique().sort()
    rng = np.random.default_rng([seed, 1])
    return rng.choice(words.to_numpy(), size=min(VOCABULARY_SIZE, words.len()), replace=False)


@dataclass(frozen=True)
class CopyPlan:
    """Which demo rows one copy takes, in order, and the seeded edits of each row.

    Attributes
    ----------
    source
        Demo row of each output row.
    edits
        Per edit round: ``(kind, position, word, shift)`` arrays; ``kind`` is ``NO_EDIT`` for
        rows without an edit in that round, ``position`` a uniform draw in [0, 1) scaled to
        the text's words later, ``word`` an index into the vocabulary, ``shift`` 1-9 added to
        a digit modulo 10.
    """

    source: np.ndarray
    edits: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


def plan_copy(n_demo: int, copy: int, rows: int, *, seed: int, vocabulary_size: int) -> CopyPlan:
    """The seeded plan of copy ``copy`` (its first ``rows`` rows).

    Every draw covers the whole demo and is then cut to ``rows``, so a copy's rows do not
    depend on how many of them a size takes.
    """
    rng = np.random.default_rng([seed, 2, copy])
    source = rng.permutation(n_demo)[:rows]
    edits = []
    for round_ in range(1 + len(EXTRA_EDIT_PROBABILITIES)):
        kind = rng.choice(len(EDIT_WEIGHTS), size=n_demo, p=EDIT_WEIGHTS).astype(np.int8)
        position = rng.random(n_demo)
        word = rng.integers(0, vocabulary_size, size=n_demo)
        shift = rng.integers(1, 10, size=n_demo)
        if copy == 0:
            kind[:] = NO_EDIT
        elif round_ > 0:
            kind[rng.random(n_demo) >= EXTRA_EDIT_PROBABILITIES[round_ - 1]] = NO_EDIT
        edits.append((kind[:rows], position[:rows], word[:rows], shift[:rows]))
    return CopyPlan(source=source, edits=edits)


def _rebuild_words(frame: pl.DataFrame) -> pl.Series:
    """Texts after one word edit each (columns text, kind, position, word).

    A text is rebuilt from three pieces joined by single spaces: the words before
    ``cut_before``, a middle of zero to two words, and the words from ``cut_after`` on
    (split on single spaces, so the other spacing and punctuation survive). A piece without
    words is left out (null), so no extra space appears.
    """
    words = pl.col("words")
    n_words = words.list.len().cast(pl.Int64)
    kind = pl.col("kind")
    slots = n_words - (kind == SWAP).cast(pl.Int64) + (kind == INSERT).cast(pl.Int64)
    p = (pl.col("position") * slots).floor().cast(pl.Int64)
    cut_before = pl.when(kind == REPEAT).then(p + 1).otherwise(p)
    cut_after = (
        pl.when(kind == DROP)
        .then(p + 1)
        .when(kind == SWAP)
        .then(p + 2)
        .when(kind == REPEAT)
        .then(p + 1)
        .otherwise(p)
    )
    middle = (
        pl.when(kind == SWAP)
        .then(
            pl.concat_str(
                [words.list.get(p + 1, null_on_oob=True), words.list.get(p, null_on_oob=True)],
                separator=" ",
            )
        )
        .when(kind == REPEAT)
        .then(words.list.get(p, null_on_oob=True))
        .when(kind == INSERT)
        .then(pl.col("word"))
    )
    before = pl.when(cut_before > 0).then(words.list.slice(0, cut_before).list.join(" "))
    after = pl.when(cut_after < n_words).then(words.list.slice(cut_after).list.join(" "))
    rebuilt = pl.concat_str([before, middle, after], separator=" ", ignore_nulls=True)
    return (
        frame.with_columns(pl.col("text").str.split(" ").alias("words"))
        .select(rebuilt.alias("text"))
        .get_column("text")
    )


def _change_digit(frame: pl.DataFrame) -> pl.Series:
    """Texts with their first ASCII digit shifted by ``shift`` modulo 10 (columns text, shift)."""
    parts = pl.col("text").str.extract_groups(r"(?s)^([^0-9]*)([0-9])(.*)$").struct
    changed = pl.concat_str(
        [
            parts.field("1"),
            ((parts.field("2").cast(pl.Int64) + pl.col("shift")) % 10).cast(pl.String),
            parts.field("3"),
        ]
    )
    return frame.select(changed.alias("text")).get_column("text")


def _edit_texts(
    text: pl.Series, kind: np.ndarray, position: np.ndarray, word: pl.Series, shift: np.ndarray
) -> pl.Series:
    """One round of edits: only the rows with an edit are touched, each by its kind's path.

    Edits that cannot apply (a swap or drop in a one-word text, a digit change without a
    digit) become insertions, which always change the text.
    """
    active = np.flatnonzero(kind != NO_EDIT)
    if active.size == 0:
        return text
    edits = pl.DataFrame(
        {
            "text": text.gather(active),
            "kind": kind[active],
            "position": position[active],
            "word": word.gather(active),
            "shift": shift[active],
        }
    )
    n_words = edits.get_column("text").str.count_matches(" ", literal=True).to_numpy() + 1
    has_digit = edits.get_column("text").str.contains("[0-9]").to_numpy()
    kinds = edits.get_column("kind").to_numpy().copy()
    kinds[np.isin(kinds, [DROP, SWAP]) & (n_words < 2)] = INSERT
    kinds[(kinds == DIGIT) & ~has_digit] = INSERT
    edits = edits.with_columns(pl.Series("kind", kinds))
    digit = kinds == DIGIT
    text = text.clone()
    if digit.any():
        text.scatter(active[digit], _change_digit(edits.filter(pl.Series(digit))))
    if not digit.all():
        text.scatter(active[~digit], _rebuild_words(edits.filter(pl.Series(~digit))))
    return text


def _chunk(
    demo: pl.DataFrame, vocabulary: pl.Series, plans: list[CopyPlan], first_row: int
) -> pl.DataFrame:
    """The output rows of consecutive copies: keys, perturbed texts, labels, metadata."""
    source = np.concatenate([plan.source for plan in plans])
    frame = demo[source]
    text = frame.get_column("text")
    for round_ in range(len(plans[0].edits)):
        kind, position, word, shift = (
            np.concatenate([plan.edits[round_][i] for plan in plans]) for i in range(4)
        )
        text = _edit_texts(text, kind, position, vocabulary.gather(word), shift)
    keys = pl.int_range(first_row, first_row + source.shape[0], eager=True)
    return frame.with_columns(
        ("r" + keys.cast(pl.String).str.zfill(10)).alias("record_key"), text.alias("text")
    )


@dataclass(frozen=True)
class Generated:
    """A generated records file and how it was made."""

    path: Path
    n: int
    seconds: float
    distinct_text_share: float
    reused: bool


def generate_records(n: int, path: Path, *, seed: int) -> Generated:
    """Write ``n`` records derived from the demo to ``path`` (Parquet), chunk by chunk.

    A file made earlier with the same size, seed and generator version is reused (its side
    file ``<path>.json`` says how it was made).

    Parameters
    ----------
    n
        Number of records.
    path
        Output Parquet file.
    seed
        Seeds the copies' orders, the edits and the vocabulary.

    Returns
    -------
    Generated
        The path, seconds spent, and the share of distinct texts.
    """
    recipe = {"n": n, "seed": seed, "generator": GENERATOR_VERSION}
    side = path.with_suffix(".json")
    if path.exists() and side.exists():
        made = json.loads(side.read_text())
        if made.get("recipe") == recipe:
            return Generated(path, n, made["seconds"], made["distinctTextShare"], reused=True)
    started = time.perf_counter()
    demo = pl.read_parquet(RECORDS)
    vocabulary = pl.Series(demo_vocabulary(demo.get_column("text"), seed=seed), dtype=pl.String)
    n_demo = demo.height
    copies = [(c, min(n_demo, n - c * n_demo)) for c in range(math.ceil(n / n_demo))]
    partial = path.with_suffix(".parquet.partial")
    writer: pq.ParquetWriter | None = None
    try:
        for lo in range(0, len(copies), COPIES_PER_CHUNK):
            plans = [
                plan_copy(n_demo, c, rows, seed=seed, vocabulary_size=vocabulary.len())
                for c, rows in copies[lo : lo + COPIES_PER_CHUNK]
            ]
            table = _chunk(demo, vocabulary, plans, lo * n_demo).to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(partial, table.schema, compression="zstd")
            writer.write_table(table, row_group_size=256 * 1024)
    finally:
        if writer is not None:
            writer.close()
    partial.replace(path)
    seconds = time.perf_counter() - started
    distinct = pl.scan_parquet(path).select(pl.col("text").n_unique()).collect().item()
    side.write_text(
        json.dumps({"recipe": recipe, "seconds": seconds, "distinctTextShare": distinct / n})
    )
    return Generated(path, n, seconds, distinct / n, reused=False)


# --------------------------------------------------------------------------------------------
# Measuring processes
# --------------------------------------------------------------------------------------------


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``); whether it worked."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _memory_kb(pid: int) -> dict[str, int]:
    """``VmHWM`` (peak RSS so far, kept by the kernel), ``VmRSS`` and ``RssAnon`` of a
    process, in kB; empty when it is gone."""
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as status:
            for row in status:
                name, _, value = row.partition(":")
                if name in ("VmHWM", "VmRSS", "RssAnon"):
                    fields[name] = int(value.split()[0])
    except (OSError, ValueError):
        return {}
    return fields


@dataclass
class TreeMonitor:
    """Peak memory and CPU time of this process's descendants while a step runs.

    Processes started during the step report their kernel high-water mark (exact, read until
    they exit); processes already running before it (a warm dispatcher and its code server)
    report their current RSS, so earlier steps do not count. RSS includes the pages of
    memory-mapped files (the text index), which the kernel can drop under pressure, so the
    largest anonymous RSS seen (``RssAnon``, polled) is kept too. CPU seconds are the last
    polled user + system time of each process (minus what a process already had at the start).
    Orphans adopted through the subreaper are reaped here; ``waited`` are the children a caller
    waits for itself.
    """

    waited: set[int] = field(default_factory=set)
    peak_process_kb: int = 0
    peak_tree_kb: int = 0
    peak_anon_kb: int = 0
    _cpu_at_start: dict[int, float] = field(default_factory=dict)
    _cpu: dict[int, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def cpu_seconds(self) -> float:
        return sum(cpu - self._cpu_at_start.get(pid, 0.0) for pid, cpu in self._cpu.items())

    def __enter__(self) -> TreeMonitor:
        for process in psutil.Process().children(recursive=True):
            try:
                times = process.cpu_times()
            except psutil.NoSuchProcess:
                continue
            self._cpu_at_start[process.pid] = times.user + times.system
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._poll()

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            self._poll()

    def _poll(self) -> None:
        tree_kb = 0
        me = psutil.Process()
        for process in me.children(recursive=True):
            try:
                if process.status() == psutil.STATUS_ZOMBIE:
                    if process.ppid() == me.pid and process.pid not in self.waited:
                        os.waitpid(process.pid, os.WNOHANG)
                    continue
                times = process.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied, ChildProcessError):
                continue
            memory = _memory_kb(process.pid)
            if not memory:
                continue
            self._cpu[process.pid] = times.user + times.system
            rss_kb = memory.get("VmRSS", 0)
            tree_kb += rss_kb
            before = process.pid in self._cpu_at_start
            own_peak = rss_kb if before else memory.get("VmHWM", 0)
            self.peak_process_kb = max(self.peak_process_kb, own_peak, rss_kb)
            self.peak_anon_kb = max(self.peak_anon_kb, memory.get("RssAnon", 0))
        self.peak_tree_kb = max(self.peak_tree_kb, tree_kb)


@dataclass(frozen=True)
class Measured:
    """One command: wall and CPU seconds, stdout, and the peak RSS of its step (MB)."""

    seconds: float
    cpu_seconds: float
    stdout: str
    peak_process_mb: float
    peak_tree_mb: float
    peak_anon_mb: float


def run_measured(command: list[str], env: dict[str, str]) -> Measured:
    """Run a command to completion while watching the process tree; a failure ends the script."""
    monitor = TreeMonitor()
    with monitor:
        started = time.perf_counter()
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        monitor.waited.add(process.pid)
        out, err = process.communicate()
        seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"{command} failed ({process.returncode}):\n{out}\n{err}")
    return Measured(
        seconds,
        monitor.cpu_seconds,
        out,
        monitor.peak_process_kb / 1024,
        monitor.peak_tree_kb / 1024,
        monitor.peak_anon_kb / 1024,
    )


RUN_FIGURES = """
import json, sys
from dagster import DagsterEventType, DagsterInstance
instance = DagsterInstance.get()
run_id = sys.argv[1]
steps = {
    stat.step_key: (stat.start_time or 0.0, stat.end_time or 0.0)
    for stat in instance.get_run_step_stats(run_id)
}
metadata = {}
for record in instance.all_logs(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION):
    materialization = record.dagster_event.step_materialization_data.materialization
    metadata[materialization.asset_key.path[-1]] = {
        key: value.value
        for key, value in materialization.metadata.items()
        if isinstance(getattr(value, "value", None), (bool, int, float, str))
    }
stats = instance.get_run_stats(run_id)
run_seconds = (stats.end_time or 0.0) - (stats.start_time or 0.0)
print(json.dumps({"steps": steps, "metadata": metadata, "run_seconds": run_seconds}, default=str))
"""


def run_figures(run_id: str, env: dict[str, str]) -> dict[str, Any]:
    """Step durations, asset metadata and run seconds of one run, from its Dagster instance."""
    out = subprocess.run(
        [sys.executable, "-c", RUN_FIGURES, run_id],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"reading run {run_id} failed:\n{out.stderr}")
    return json.loads(out.stdout)


def _reap_or_list(me: psutil.Process) -> list[psutil.Process]:
    """Reap this process's exited adopted children; the descendants still running."""
    alive = []
    for process in me.children(recursive=True):
        try:
            if process.status() == psutil.STATUS_ZOMBIE and process.ppid() == me.pid:
                os.waitpid(process.pid, 0)
            else:
                alive.append(process)
        except (psutil.NoSuchProcess, ChildProcessError):
            continue
    return alive


def _wait_for_descendants(me: psutil.Process, seconds: float) -> list[psutil.Process]:
    """Reap descendants as they exit for up to ``seconds``; those still running."""
    deadline = time.monotonic() + seconds
    alive = _reap_or_list(me)
    while alive and time.monotonic() < deadline:
        time.sleep(0.5)
        alive = _reap_or_list(me)
    return alive


def asset_step_seconds(figures: dict[str, Any], asset: str) -> float:
    """Seconds from the first step of an asset to its last: the step itself, or the steps
    ``asset.op`` of a graph-backed asset (e.g. the shards of the search)."""
    spans = [
        span
        for key, span in figures["steps"].items()
        if key == asset or key.startswith(f"{asset}.")
    ]
    if not spans:
        return math.nan
    return max(end for _, end in spans) - min(start for start, _ in spans)


def stop_background(env: dict[str, str]) -> None:
    """Stop the dispatcher this size started, then what it left behind.

    The dispatcher's code server only notices its parent is gone after a 45 s heartbeat
    timeout; it is idle by then, so it is terminated (by pid) once the dispatcher has exited.
    """
    from eval_pipelines.runs.dispatcher import stop_dispatcher

    stop_dispatcher(Path(env["DAGSTER_HOME"]) / "eval_pipelines_dispatcher.lock")
    me = psutil.Process()
    alive = _wait_for_descendants(me, 30)
    for process in alive:
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            continue
    for process in _wait_for_descendants(me, 30):
        line("warning", f"still running after the dispatcher stopped: pid {process.pid}")


# --------------------------------------------------------------------------------------------
# One size
# --------------------------------------------------------------------------------------------


def _eval_command(sample_size: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "eval_pipelines.cli.main",
        "eval",
        "holdout",
        CASE,
        "--variants-file",
        str(VARIANTS),
        "--sample-size",
        str(sample_size),
        "--seed",
        "7",
        "--yes",
        "--wait",
        "--json",
        "--timeout",
        "14400",
    ]


def measure_size(n: int, workdir: Path, *, seed: int, keep: bool) -> dict[str, float]:
    """Generate, create, index and evaluate one size; returns its figures."""
    label = size_label(n)
    home = workdir / label
    shutil.rmtree(home, ignore_errors=True)
    (home / "dagster").mkdir(parents=True)
    env = dict(
        os.environ,
        DAGSTER_HOME=str(home / "dagster"),
        EVAL_PIPELINES_WAREHOUSE=str(home / "warehouse.duckdb"),
        EVAL_PIPELINES_INDEX_DIR=str(home / "indexes"),
    )
    figures: dict[str, float] = {"n": n}

    def report(name: str, value: float) -> None:
        figures[name] = value
        line(f"{label}.{name}", value)

    generated = generate_records(n, workdir / f"records-{label}.parquet", seed=seed)
    report("generate_s", generated.seconds)
    line(f"{label}.generate_reused", generated.reused)
    report("distinct_text_share", generated.distinct_text_share)

    try:
        created = run_measured(
            [
                sys.executable,
                "-m",
                "eval_pipelines.cli.main",
                "case",
                "create",
                CASE,
                "--records",
                str(generated.path),
                "--tree",
                str(TREE),
                "--target-depth",
                "3,4",
                "--replace",
            ],
            env,
        )
        report("case_create_s", created.seconds)
        report("case_create_cpu_s", created.cpu_seconds)
        report("case_create_peak_rss_mb", created.peak_process_mb)
        report("case_create_peak_anon_rss_mb", created.peak_anon_mb)
        report("warehouse_mb", (home / "warehouse.duckdb").stat().st_size / 2**20)

        first = run_measured(_eval_command(INDEX_SAMPLE_SIZE), env)
        built = run_figures(json.loads(first.stdout)["runId"], env)
        index_meta = built["metadata"].get("evidence_index", {})
        if not index_meta.get("built", True):
            line(f"{label}.warning", "the first evaluation found an index already built")
        report("index_build_s", asset_step_seconds(built, "evidence_index"))
        report("index_build_kernel_s", float(index_meta.get("seconds", math.nan)))
        report("index_build_peak_rss_mb", first.peak_process_mb)
        report("index_build_peak_anon_rss_mb", first.peak_anon_mb)
        report("index_build_peak_tree_rss_mb", first.peak_tree_mb)
        report(f"index_eval_{INDEX_SAMPLE_SIZE}x2_s", first.seconds)
        report(f"index_eval_{INDEX_SAMPLE_SIZE}x2_cpu_s", first.cpu_seconds)
        index_files = [f for f in (home / "indexes").rglob("*") if f.is_file()]
        report("index_mb", sum(f.stat().st_size for f in index_files) / 2**20)

        second = run_measured(_eval_command(EVAL_SAMPLE_SIZE), env)
        ran = run_figures(json.loads(second.stdout)["runId"], env)
        if ran["metadata"].get("evidence_index", {}).get("built", False):
            line(f"{label}.warning", "the 5,000-sample evaluation built the index again")
        report("eval_5000x2_s", second.seconds)
        report("eval_5000x2_cpu_s", second.cpu_seconds)
        report("eval_run_s", ran["run_seconds"])
        report("index_load_s", asset_step_seconds(ran, "evidence_index"))
        report("leave_out_step_s", asset_step_seconds(ran, "leave_out"))
        leave_out = ran["metadata"]["leave_out"]
        report("retrieval_s", float(leave_out["retrieval_seconds"]))
        # How many near-duplicates (or group members) the 5,000 queries held out besides
        # themselves: the generated copies show up here.
        report("group_members_excluded", float(leave_out.get("group_members_excluded", math.nan)))
        report("eval_peak_rss_mb", second.peak_process_mb)
        report("eval_peak_anon_rss_mb", second.peak_anon_mb)
        report("eval_peak_tree_rss_mb", second.peak_tree_mb)
    finally:
        stop_background(env)
        if not keep:
            shutil.rmtree(home, ignore_errors=True)
            generated.path.unlink(missing_ok=True)
            generated.path.with_suffix(".json").unlink(missing_ok=True)
    return figures


# --------------------------------------------------------------------------------------------
# Growth
# --------------------------------------------------------------------------------------------


def growth_exponent(sizes: list[float], values: list[float]) -> float:
    """Least-squares slope of ``log(value)`` against ``log(size)`` (the exponent of N).

    Parameters
    ----------
    sizes, values
        Paired, positive; at least two distinct sizes.

    Returns
    -------
    float
        The slope, or NaN when fewer than two usable pairs remain.
    """
    pairs = [(s, v) for s, v in zip(sizes, values, strict=True) if s > 0 and v > 0]
    if len({s for s, _ in pairs}) < 2:
        return math.nan
    x = np.log([s for s, _ in pairs])
    y = np.log([v for _, v in pairs])
    return float(np.polyfit(x, y, 1)[0])


def _pairs(items: list[dict[str, float]]) -> Iterator[tuple[dict[str, float], dict[str, float]]]:
    return zip(items, items[1:], strict=False)


def print_summary(results: list[dict[str, float]]) -> None:
    """The table of measures by size, their growth exponents and a projection to 10M."""
    labels = [size_label(int(r["n"])) for r in results]
    print()
    print("| measure | " + " | ".join(labels) + " | exponent (pairwise) | exponent (fit) |")
    print("|---" * (len(labels) + 3) + "|")
    pairs = list(_pairs(results))
    for measure in MEASURES:
        values = [r.get(measure, math.nan) for r in results]
        pairwise = [
            growth_exponent([a["n"], b["n"]], [a.get(measure, 0.0), b.get(measure, 0.0)])
            for a, b in pairs
        ]
        fit = growth_exponent([r["n"] for r in results], values)
        cells = " | ".join(f"{v:.1f}" for v in values)
        slopes = ", ".join(f"{s:.2f}" for s in pairwise) or "-"
        print(f"| {measure} | {cells} | {slopes} | {fit:.2f} |")
    print()
    for a, b in pairs:
        span = f"{size_label(int(a['n']))}-{size_label(int(b['n']))}"
        for measure in MEASURES:
            slope = growth_exponent([a["n"], b["n"]], [a.get(measure, 0.0), b.get(measure, 0.0)])
            line(f"exponent.{measure}.{span}", slope)
    target = 10_000_000
    if pairs and results[-1]["n"] < target:
        before, last = pairs[-1]
        print()
        for measure in MEASURES:
            slope = growth_exponent(
                [before["n"], last["n"]], [before.get(measure, 0.0), last.get(measure, 0.0)]
            )
            if math.isfinite(slope):
                projected = last[measure] * (target / last["n"]) ** slope
                line(f"projected_10m.{measure}", projected)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="130k,1m,3m,10m")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--keep", action="store_true", help="keep each size's records, warehouse and index"
    )
    parser.add_argument(
        "--generate-only", action="store_true", help="write the records files and stop"
    )
    args = parser.parse_args()
    sizes = sorted({parse_size(s) for s in args.sizes.split(",")})
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="eval-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    line("workdir", workdir)
    line("cpu_count", os.cpu_count() or 0)
    line("memory_gb", psutil.virtual_memory().total / 2**30)
    line("load_average_1min", os.getloadavg()[0])
    if args.generate_only:
        for n in sizes:
            generated = generate_records(
                n, workdir / f"records-{size_label(n)}.parquet", seed=args.seed
            )
            line(f"{size_label(n)}.generate_s", generated.seconds)
            line(f"{size_label(n)}.distinct_text_share", generated.distinct_text_share)
        line("generate_peak_rss_mb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        return
    if not become_subreaper():
        line("warning", "not a subreaper: a warm dispatcher's run process is not measured")
    # Stop the background dispatchers if the script is interrupted.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = [measure_size(n, workdir, seed=args.seed, keep=args.keep) for n in sizes]
    print_summary(results)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
