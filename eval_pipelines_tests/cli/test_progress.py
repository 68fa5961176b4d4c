"""Progress of long work on stderr (issue 19, item 27): a 5,000-sample evaluation printed
nothing for 65 s while its index and retrieval ran. Commands run here through the real entry
point in their own process: under a pseudo-terminal, and with ``EVAL_PIPELINES_PROGRESS=1``
(stderr a pipe, treated as a terminal); lines appear on stderr, never on stdout, and nothing
is shown without a terminal or with ``--json``. The reporter itself is checked with a clock
this test moves (no wall time is measured)."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

from eval_pipelines.core import progress
from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines_tests.helpers.ann_indexes import SmallCaseAnnIndexes
from eval_pipelines_tests.helpers.lift_traffic import write_log
from eval_pipelines_tests.helpers.nn_descent_builds import BUILDS_NN_DESCENT
from eval_pipelines_tests.helpers.paths import REPO

CLI = [sys.executable, "-m", "eval_pipelines.cli.main"]


def _env(forced: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != progress.ENV}
    if forced is not None:
        env[progress.ENV] = forced
    return env


def run(*args: str | Path, forced: str | None = None) -> subprocess.CompletedProcess[str]:
    """The command with stdout and stderr pipes (not terminals)."""
    result = subprocess.run(
        [*CLI, *map(str, args)], capture_output=True, text=True, env=_env(forced), timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result


def run_under_a_terminal(*args: str | Path) -> tuple[str, str]:
    """The command with stderr a pseudo-terminal and stdout a pipe; (stdout, terminal)."""
    leader, follower = pty.openpty()
    read: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: every copy of the follower end is closed
                return
            if not chunk:
                return
            read.append(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        process = subprocess.Popen(
            [*CLI, *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=follower,
            stdin=subprocess.DEVNULL,
            env=_env(None),
            text=True,
        )
        os.close(follower)
        out, _ = process.communicate(timeout=300)
    finally:
        reader.join(timeout=60)
        os.close(leader)
    terminal = b"".join(read).decode("utf-8", "replace").replace("\r\n", "\n")
    assert process.returncode == 0, terminal
    return out, terminal


def lines(text: str, label: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"[{label}] ")]


# --- the reporter ---


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_line_per_change_and_again_after_the_heartbeat() -> None:
    clock, stream = Clock(), io.StringIO()
    reporter = progress.Reporter("eval holdout", stream, clock=clock, heartbeat=10.0)
    reporter.update("leave_out", 3, 15, "steps")
    clock.now += 2.0
    reporter.update("leave_out", 3, 15, "steps")  # the same: not repeated
    reporter.tick()  # nor on a tick before the heartbeat
    clock.now += 10.4
    reporter.tick()  # it has stood 12.4 s: again, with the time moved on
    reporter.update("leave_out", 4, 15, "steps", detail="text index: segment 1 of 2 written")
    reporter.update("working")
    assert stream.getvalue().splitlines() == [
        "[eval holdout] leave_out 3/15 steps, 0.0 s",
        "[eval holdout] leave_out 3/15 steps, 12.4 s",
        "[eval holdout] leave_out 4/15 steps, 12.4 s: text index: segment 1 of 2 written",
        "[eval holdout] working, 12.4 s",
    ]


def test_a_command_silent_for_a_while_says_it_is_working() -> None:
    clock, stream = Clock(), io.StringIO()
    reporter = progress.Reporter("case create", stream, clock=clock)
    clock.now += progress.QUIET_SECONDS - 0.1
    reporter.tick()
    assert stream.getvalue() == ""  # a quick command says nothing
    clock.now += 0.1
    reporter.tick()
    assert stream.getvalue() == f"[case create] working, {progress.QUIET_SECONDS:.1f} s\n"


def test_nothing_is_printed_while_a_question_waits_for_an_answer() -> None:
    # eval holdout's "Start it anyway? [y/N]" (above the token limit) is asked on stderr.
    clock, stream = Clock(), io.StringIO()
    reporter = progress.Reporter("eval holdout", stream, clock=clock)
    with reporter.paused():
        clock.now += 30.0
        reporter.tick()
        reporter.update("eval_spec")
    clock.now += progress.QUIET_SECONDS - 0.1
    reporter.tick()  # quiet counts from the answer, not from the start
    assert stream.getvalue() == ""
    reporter.update("eval_spec", 0, 14, "steps")
    assert stream.getvalue() == "[eval holdout] eval_spec 0/14 steps, 32.9 s\n"


def test_progress_is_wanted_at_a_terminal_only_and_never_with_json() -> None:
    leader, follower = pty.openpty()
    with os.fdopen(follower, "w") as terminal:
        assert progress.wanted(terminal, as_json=False, environ={})
        assert not progress.wanted(terminal, as_json=True, environ={})
        assert not progress.wanted(terminal, as_json=False, environ={progress.ENV: "0"})
    os.close(leader)
    piped = io.StringIO()
    assert not progress.wanted(piped, as_json=False, environ={})
    assert progress.wanted(piped, as_json=False, environ={progress.ENV: "1"})
    assert not progress.wanted(piped, as_json=True, environ={progress.ENV: "1"})


def test_report_without_an_active_reporter_does_nothing() -> None:
    progress.report("text index", 1, 2, "segments")  # no error, nowhere to print
    stream = io.StringIO()
    with progress.reporting(progress.Reporter("case embed", stream)):
        progress.report("text index", 1, 2, "segments")
    progress.report("text index", 2, 2, "segments")  # closed: not printed
    assert stream.getvalue().startswith("[case embed] text index 1/2 segments, ")
    assert stream.getvalue().count("\n") == 1


# --- commands ---


@BUILDS_NN_DESCENT
def test_case_embed_shows_its_stages_on_a_terminal_and_nothing_on_a_pipe(
    small_case: str, workdir: Path, small_case_ann_indexes: SmallCaseAnnIndexes
) -> None:
    small_case_ann_indexes.install(8, workdir / "indexes")
    out, terminal = run_under_a_terminal("case", "embed", small_case, "--dim", "8")
    shown = lines(terminal, "case embed")
    assert [line.split(",")[0] for line in shown[:5]] == [
        "[case embed] reading records",
        "[case embed] text index",
        "[case embed] text index 1/1 segments",
        "[case embed] lsa vectors",
        "[case embed] storing vectors",
    ]
    assert shown[1].endswith(": 3,049 records")
    # Then the run that materialises the case's ANN index.
    assert shown[-1].startswith("[case embed] succeeded 1/1 steps, "), shown
    assert json.loads(out)["caseId"] == small_case  # stdout: the document alone
    assert "[case embed]" not in out

    quiet = run("case", "embed", small_case, "--dim", "8")  # not a terminal
    assert "[case embed]" not in quiet.stderr and "[case embed]" not in quiet.stdout


def test_a_holdout_evaluation_run_here_shows_its_steps(small_case: str, workdir: Path) -> None:
    variants = workdir / "variants.json"
    variants.write_text(json.dumps([{"name": "baseline"}]))
    args = ("eval", "holdout", small_case, "--variants-file", variants, "--sample-size", "30")
    shown = run(*args, "--seed", "1", "--wait", forced="1")
    steps = lines(shown.stderr, "eval holdout")
    # The index, the leave-out list and retrieval, then the report: each stage as it runs,
    # with the steps done of those planned.
    assert any(line.startswith("[eval holdout] evidence_index ") for line in steps), steps
    assert any(line.startswith("[eval holdout] eval_report ") for line in steps), steps
    assert steps[-1].startswith("[eval holdout] succeeded ") and " steps, " in steps[-1]
    done, total = steps[-1].split()[3].split("/")
    assert done == total
    assert "[eval holdout]" not in shown.stdout
    # The older per-status lines ("[small-e0001-s1] running (run ...); baseline: running")
    # are gone: the reporter's lines are the only progress, after the started notice.
    notices = [line for line in shown.stderr.splitlines() if line.startswith("started ")]
    assert len(notices) == 1 and "(run " in notices[0], shown.stderr
    assert lines(shown.stderr, notices[0].split()[1]) == []

    quiet = run(*args, "--seed", "2", "--wait", "--json", forced="1")
    assert lines(quiet.stderr, "eval holdout") == []
    status = json.loads(quiet.stdout)
    assert status["status"] == "complete"
    assert quiet.stderr.splitlines() == [
        f"started {status['evalId']} (run {status['runId']}, running in this process)"
    ]

    # A run submitted by one command (to the queue) and waited for by another: the waiting
    # one follows it too.
    started = json.loads(run(*args, "--seed", "3").stdout)
    waited = run("eval", "status", small_case, started["evalId"], "--wait", forced="1")
    steps = lines(waited.stderr, "eval status")
    assert any(line.startswith("[eval status] evidence_index ") for line in steps), steps
    assert steps[-1].startswith("[eval status] succeeded ")


def test_the_step_total_never_changes_mid_run(small_case: str, workdir: Path) -> None:
    """Two variants: two classify steps mapped over the variants. The total counted each
    mapped step once until its copies started, so it grew mid-run (``8/14``, then ``9/15``);
    now no total is shown until the variant fan-out is known, and then only the final one."""
    variants = workdir / "variants.json"
    variants.write_text(
        json.dumps([{"name": "baseline"}, {"name": "five", "config": {"candidates": 5}}])
    )
    args = ("eval", "holdout", small_case, "--variants-file", variants, "--sample-size", "30")
    shown = run(*args, "--seed", "1", "--wait", forced="1")
    counts = [
        line.split(" steps, ")[0].rsplit(" ", 1)[1]
        for line in lines(shown.stderr, "eval holdout")
        if " steps, " in line
    ]
    totals = {count.split("/")[1] for count in counts if "/" in count}
    assert len(totals) == 1, counts
    done, total = counts[-1].split("/")
    assert done == total
    # The classify steps of both variants are in it, once known.
    assert any("classify_variant" in line for line in shown.stderr.splitlines())


def test_a_golden_run_through_the_queue_shows_its_steps(golden_home: Path) -> None:
    from eval_pipelines_tests.helpers.golden_demo import seed

    seed("inv")
    shown = run("golden", "run", "inv", forced="1")
    steps = lines(shown.stderr, "golden run")
    assert any(" workflow_revision " in f" {line} " for line in steps), steps
    assert steps[-1].startswith("[golden run] succeeded 4/4 steps, ")
    assert "[golden run]" not in shown.stdout

    quiet = run("golden", "run", "inv", "--json", forced="1")
    assert lines(quiet.stderr, "golden run") == []


def test_lift_ingest_and_evaluate_show_their_runs(small_case: str, workdir: Path) -> None:
    run("lift", "settings", "--workspace", "ws", "--lever", "memo-v2")
    log = write_log(workdir / "week.jsonl", LiftConfig("ws", "e1", lever="memo-v2"), true_lift=0)
    shown = run("lift", "ingest", log, forced="1")
    assert lines(shown.stderr, "lift ingest")[-1].startswith("[lift ingest] succeeded 1/1 steps")
    assert "[lift ingest]" not in shown.stdout

    query = json.loads((REPO / "data" / "demo" / "queries" / "icd10cm_category.json").read_text())
    query["evaluate"]["from"] = small_case
    path = workdir / "query.json"
    path.write_text(json.dumps(query))
    shown = run("evaluate", "--file", path, forced="1")
    assert lines(shown.stderr, "evaluate")[-1].startswith("[evaluate] succeeded ")
    assert "[evaluate]" not in shown.stdout

    path.write_text(json.dumps({**query, "test": {"$index": {"$mod": [5, 1]}}}))
    quiet = run("evaluate", "--file", path)  # not a terminal: nothing
    assert lines(quiet.stderr, "evaluate") == []
