"""``kill -9`` of one machine's run worker half-way through an evaluation with a ``chat``
variant (the stand-in at 200 ms): the other machine reads the run failed, no report of it is
visible, and re-running it there completes with the report the same evaluation gets alone on
the embedded default, paying again for no model call beyond those in flight when it died (the
answers the killed worker had received but not yet stored are in the chat journal in the
shared folder, which the rerun's batch stores first)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from eval_pipelines.chat_standin.server import serve_standin
from eval_pipelines.postgres_local.server import LocalPostgres
from eval_pipelines_tests.helpers.chat_variant import chat_config
from eval_pipelines_tests.helpers.holdout_runs import without_wall_times
from eval_pipelines_tests.helpers.machines import (
    CLI,
    UNSEEN_CASE,
    Machine,
    create_unseen_case,
    team_deployment,
)

pytestmark = pytest.mark.slow

SAMPLE_SIZE = 120
CONCURRENCY = 4  # calls in flight per endpoint: the most a killed worker can have unanswered
KILL_AFTER_CALLS = 60  # half-way


def _holdout_args(machine: Machine, variants: list[dict[str, Any]]) -> list[str]:
    variants_file = machine.folder / "variants.json"
    variants_file.write_text(json.dumps(variants))
    return [
        "eval", "holdout", UNSEEN_CASE, "--variants-file", str(variants_file),
        "--sample-size", str(SAMPLE_SIZE), "--seed", "5", "--wait", "--json",
    ]  # fmt: skip


def _without_call_counts(report: dict[str, Any]) -> dict[str, Any]:
    """The report minus wall times and the counters that say where answers came from."""
    report = without_wall_times(report)
    for variant in report["variants"]:
        variant["usage"].pop("chat", None)
    return report


def _wait_for_calls(count: int, calls: Any, worker: Any) -> None:
    deadline = time.monotonic() + 300
    while calls() < count:
        assert worker.poll() is None, worker.stderr.read()
        assert time.monotonic() < deadline, f"only {calls()} chat calls"
        time.sleep(0.05)


@dataclass(frozen=True)
class KilledAndRerun:
    expected: dict[str, Any]  # the evaluation alone on the embedded default
    status: dict[str, Any]  # machine B's `eval status` after machine A's worker was killed
    report_after_kill: dict[str, Any] | None
    rerun: dict[str, Any] | None  # the stored report after machine B's `eval rerun`
    paid_before_kill: int  # chat calls machine A's worker made before it died
    paid_again: int  # calls the rerun made beyond one per sampled record
    cached_after_kill: int  # answers in the warehouse's call cache once the worker was killed


@pytest.fixture(scope="module")
def killed_and_rerun(
    tmp_path_factory: pytest.TempPathFactory, postgres_server: LocalPostgres
) -> Iterator[KilledAndRerun]:
    with (
        team_deployment(tmp_path_factory.mktemp("killed"), postgres_server) as team,
        serve_standin(latency_ms=200) as standin,
    ):
        first, second = team.machines
        variants: list[dict[str, Any]] = [
            {"name": "baseline"},
            {"name": "chat", "config": {**chat_config(standin.base_url), "concurrency": 4}},
        ]
        create_unseen_case(team.alone, team.inputs)
        eval_id = json.loads(team.alone.cli(*_holdout_args(team.alone, variants)).stdout)["evalId"]
        expected = team.alone.stored_report(eval_id)
        assert expected is not None
        paid_alone = standin.request_count
        assert paid_alone == SAMPLE_SIZE

        worker = first.start(*CLI, *_holdout_args(first, variants))
        _wait_for_calls(paid_alone + KILL_AFTER_CALLS, lambda: standin.request_count, worker)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        paid_before_kill = standin.request_count - paid_alone

        # Exit 1: the evaluation failed (docs/usage.md, exit codes).
        read = second.run(*CLI, "eval", "status", UNSEEN_CASE, eval_id, "--json")
        assert read.returncode == 1, read.stderr
        report_after_kill = second.stored_report(eval_id)
        cached_after_kill = second.row_counts()["chat_calls"]
        rerun = second.cli("eval", "rerun", UNSEEN_CASE, eval_id, "--wait", "--json")
        assert json.loads(rerun.stdout)["status"] == "complete", rerun.stdout
        yield KilledAndRerun(
            expected=expected,
            status=json.loads(read.stdout),
            report_after_kill=report_after_kill,
            rerun=second.stored_report(eval_id),
            paid_before_kill=paid_before_kill,
            paid_again=standin.request_count - paid_alone - SAMPLE_SIZE,
            cached_after_kill=cached_after_kill,
        )


def test_the_killed_run_reads_failed_and_leaves_no_report(killed_and_rerun: KilledAndRerun) -> None:
    assert killed_and_rerun.paid_before_kill >= KILL_AFTER_CALLS
    assert killed_and_rerun.status["status"] == "failed", killed_and_rerun.status
    assert "killed or crashed" in json.dumps(killed_and_rerun.status), killed_and_rerun.status
    assert killed_and_rerun.report_after_kill is None


def test_the_rerun_on_the_other_machine_stores_the_report_of_the_evaluation_alone(
    killed_and_rerun: KilledAndRerun,
) -> None:
    stored, expected = killed_and_rerun.rerun, killed_and_rerun.expected
    assert stored is not None
    assert _without_call_counts(stored["report"]) == _without_call_counts(expected["report"])
    # The markdown is not compared: it says how many answers came from the cache.


def test_the_rerun_pays_again_only_for_the_calls_in_flight_at_the_kill(
    killed_and_rerun: KilledAndRerun,
) -> None:
    assert killed_and_rerun.cached_after_kill > 0
    assert killed_and_rerun.paid_again <= CONCURRENCY
