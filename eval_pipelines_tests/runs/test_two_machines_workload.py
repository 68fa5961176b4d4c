"""A team's workload started at once from two machines: four holdout evaluations (two with a
``chat`` variant against the stand-in at 200 ms), a golden gating run and a lift ingest. All
complete; each evaluation's stored report equals the same evaluation alone on the embedded
default; and every warehouse table grew by what the same six runs wrote one after another on
the embedded default (nothing lost, nothing twice)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.chat_standin.server import serve_standin
from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines_tests.helpers.chat_variant import chat_config
from eval_pipelines_tests.helpers.holdout_runs import without_wall_times
from eval_pipelines_tests.helpers.lift_traffic import write_log
from eval_pipelines_tests.helpers.machines import (
    CLI,
    UNSEEN_CASE,
    Machine,
    TeamDeployment,
    create_unseen_case,
)

pytestmark = pytest.mark.slow

SEED_GOLDEN = "from eval_pipelines_tests.helpers.golden_demo import seed; seed('inv')"


def _without_call_counts(report: dict[str, Any]) -> dict[str, Any]:
    """The report minus wall times and the counters that say where chat answers came from."""
    report = without_wall_times(report)
    for variant in report["variants"]:
        variant["usage"].pop("chat", None)
    return report


def _holdout(machine: Machine, label: str, variants: list[dict[str, Any]], seed: int) -> list[str]:
    variants_file = machine.folder / f"{label}.json"
    variants_file.write_text(json.dumps(variants))
    return [
        *CLI, "eval", "holdout", UNSEEN_CASE, "--variants-file", str(variants_file),
        "--sample-size", "40", "--seed", str(seed), "--wait", "--json", "--timeout", "900",
    ]  # fmt: skip


def _workload(machine: Machine, base_url: str, log: Path) -> dict[str, list[str]]:
    """The six runs, by label."""
    plain: list[dict[str, Any]] = [
        {"name": "baseline"},
        {"name": "k-5.fewer", "config": {"candidates": 5}},
    ]
    chat: list[dict[str, Any]] = [
        {"name": "baseline"},
        {"name": "chat", "config": chat_config(base_url)},
    ]
    return {
        "plain-1": _holdout(machine, "plain-1", plain, 11),
        "plain-2": _holdout(machine, "plain-2", plain, 12),
        "chat-1": _holdout(machine, "chat-1", chat, 13),
        "chat-2": _holdout(machine, "chat-2", chat, 14),
        "golden": [*CLI, "golden", "run", "inv", "--json", "--timeout", "900"],
        "lift": [*CLI, "lift", "ingest", str(log), "--json"],
    }


def _grown(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {table: rows - before.get(table, 0) for table, rows in after.items()}


def test_four_evaluations_a_golden_run_and_a_lift_ingest_at_once_from_two_machines(
    tmp_path: Path, team: TeamDeployment
) -> None:
    log = write_log(tmp_path / "lift.jsonl", LiftConfig("ws", "e1", 0.10), true_lift=0.05, days=2)
    first = team.machines[0]
    with serve_standin(latency_ms=200) as standin:
        first.python(SEED_GOLDEN)
        before = first.row_counts()
        started = {}
        for index, (label, command) in enumerate(_workload(first, standin.base_url, log).items()):
            started[label] = team.machines[index % 2].start(*command)
        outputs = {}
        for label, process in started.items():
            out, err = process.communicate(timeout=1200)
            assert process.returncode == 0, f"{label}: {err}"
            outputs[label] = json.loads(out)
        team_grew = _grown(before, first.row_counts())

        create_unseen_case(team.alone, team.inputs)
        team.alone.python(SEED_GOLDEN)
        before = team.alone.row_counts()
        commands = _workload(team.alone, standin.base_url, log)
        evaluations = sorted(
            (label for label in commands if "evalId" in outputs[label]),
            key=lambda label: outputs[label]["evalId"],
        )
        assert len(evaluations) == 4
        for label in [*evaluations, "golden", "lift"]:
            done = team.alone.run(*commands[label], timeout=900)
            assert done.returncode == 0, f"{label} alone: {done.stderr}"
        alone_grew = _grown(before, team.alone.row_counts())

    for label in evaluations:
        eval_id = outputs[label]["evalId"]
        shared_report = team.machines[1].stored_report(eval_id)
        single = team.alone.stored_report(eval_id)
        assert shared_report is not None and single is not None, label
        assert _without_call_counts(shared_report["report"]) == _without_call_counts(
            single["report"]
        ), label
    assert outputs["golden"]["status"] == "completed", outputs["golden"]
    assert {table: rows for table, rows in team_grew.items() if rows} == {
        table: rows for table, rows in alone_grew.items() if rows
    }
