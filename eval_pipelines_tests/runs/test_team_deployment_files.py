"""The reference deployment's files (``deploy/team/``) agree with the project: the run queue,
coordinator, run monitoring and pool granularity of ``dagster.yaml`` are those of the file the
instance setup writes for one machine, every variable it reads is in ``team.env.example`` with
no password filled in, and ``workspace.yaml`` serves the code location runs record."""

from __future__ import annotations

import re

import yaml

from eval_pipelines_tests.helpers.team_instance import TEAM_DAGSTER_YAML, TEAM_DEPLOYMENT


def _variables(node: object) -> set[str]:
    if isinstance(node, dict):
        if set(node) == {"env"}:
            return {str(node["env"])}
        return {name for value in node.values() for name in _variables(value)}
    if isinstance(node, list):
        return {name for value in node for name in _variables(value)}
    return set()


def test_the_team_file_keeps_the_queue_and_monitoring_of_the_local_one() -> None:
    from eval_pipelines.runs.instance import INSTANCE_CONFIG

    team = yaml.safe_load(TEAM_DAGSTER_YAML.read_text())
    local = yaml.safe_load(INSTANCE_CONFIG)
    for section in ("run_coordinator", "run_monitoring", "telemetry"):
        assert team[section] == local[section], section
    assert team["concurrency"]["pools"] == local["concurrency"]["pools"]
    assert team["run_launcher"]["class"] == "HostRecordingRunLauncher"
    assert set(team["storage"]) == {"postgres"}


def test_every_variable_is_in_the_example_and_no_password_is_filled_in() -> None:
    team = yaml.safe_load(TEAM_DAGSTER_YAML.read_text())
    example = (TEAM_DEPLOYMENT / "team.env.example").read_text()
    assigned = dict(re.findall(r"^([A-Z_]+)=(.*)$", example, flags=re.MULTILINE))
    assert _variables(team) | {"DAGSTER_HOME", "EVAL_PIPELINES_WAREHOUSE"} <= set(assigned)
    assert assigned["DAGSTER_PG_PASSWORD"] == ""


def test_the_workspace_serves_the_location_runs_record() -> None:
    from eval_pipelines.defs.run_tags import DEFINITIONS_MODULE, LOCATION_NAME

    workspace = yaml.safe_load((TEAM_DEPLOYMENT / "workspace.yaml").read_text())
    (location,) = workspace["load_from"]
    assert location["python_module"] == {
        "module_name": DEFINITIONS_MODULE,
        "location_name": LOCATION_NAME,
    }
