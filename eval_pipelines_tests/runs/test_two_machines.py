"""The check issue 30 is judged by: on a case the feature was not built with (two ICD-10-CM
chapters of the demo data the small test case leaves out), two evaluations started at once from
two machines of the team's deployment (instance and warehouse on one PostgreSQL server over TCP,
index files and payloads in a shared folder) both complete, and each stored report equals the
same evaluation run alone on the embedded default (a DuckDB file, the local instance), field by
field without wall-clock seconds."""

from __future__ import annotations

import json

import pytest

from eval_pipelines_tests.helpers.holdout_runs import without_wall_times
from eval_pipelines_tests.helpers.machines import (
    CLI,
    UNSEEN_CASE,
    Machine,
    TeamDeployment,
    create_unseen_case,
)

pytestmark = pytest.mark.slow

EVALUATIONS = {
    "first": ([{"name": "baseline"}, {"name": "k-5.fewer", "config": {"candidates": 5}}], 3),
    "second": ([{"name": "baseline"}, {"name": "k-20.more", "config": {"candidates": 20}}], 4),
}


def _holdout_args(machine: Machine, label: str) -> list[str]:
    variants, seed = EVALUATIONS[label]
    variants_file = machine.folder / f"{label}_variants.json"
    variants_file.write_text(json.dumps(variants))
    return [
        "eval", "holdout", UNSEEN_CASE, "--variants-file", str(variants_file),
        "--sample-size", "40", "--seed", str(seed), "--wait", "--json", "--timeout", "500",
    ]  # fmt: skip


def test_two_evaluations_at_once_from_two_machines_equal_each_alone_on_the_default(
    team: TeamDeployment,
) -> None:
    first, second = team.machines
    started = {
        label: machine.start(*CLI, *_holdout_args(machine, label))
        for label, machine in (("first", first), ("second", second))
    }
    eval_ids = {}
    for label, process in started.items():
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, f"{label}: {err}"
        result = json.loads(out)
        assert result["status"] == "complete", out
        eval_ids[label] = result["evalId"]
    assert len(set(eval_ids.values())) == 2

    # Alone on the default, in the order the shared warehouse numbered them (the id is in the
    # report).
    create_unseen_case(team.alone, team.inputs)
    for label in sorted(eval_ids, key=eval_ids.__getitem__):
        done = team.alone.cli(*_holdout_args(team.alone, label))
        assert json.loads(done.stdout)["evalId"] == eval_ids[label]
    for label, eval_id in eval_ids.items():
        shared_report = first.stored_report(eval_id)
        assert shared_report == second.stored_report(eval_id)
        single = team.alone.stored_report(eval_id)
        assert shared_report is not None and single is not None, label
        assert without_wall_times(shared_report["report"]) == without_wall_times(single["report"])
        assert shared_report["markdown"] == single["markdown"]
