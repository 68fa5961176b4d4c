"""The team's ``dagster.yaml`` keeps Dagster's files of a step on the machine that runs it: the
instance reference a run hands to its step workers names no folder of the launching machine, and
a worker opening it resolves the compute logs and artifacts under its own ``DAGSTER_HOME``."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster._core.instance.ref import InstanceRef
from dagster._serdes import serialize_value

from eval_pipelines.runs.machine_files import HomeComputeLogManager
from eval_pipelines_tests.helpers.team_instance import install_team_config

PG_SETTINGS = {
    "DAGSTER_PG_HOST": "db.internal",
    "DAGSTER_PG_PORT": "5432",
    "DAGSTER_PG_USER": "dagster",
    "DAGSTER_PG_DB": "dagster",
    "DAGSTER_PG_PASSWORD": "not-a-real-password",
}


@pytest.fixture
def launching_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "machine_a" / "dagster_home"
    install_team_config(home)
    for name, value in PG_SETTINGS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def test_the_reference_a_run_hands_its_workers_names_no_folder_of_the_launching_machine(
    launching_home: Path,
) -> None:
    ref = InstanceRef.from_dir(str(launching_home))
    assert str(launching_home) not in serialize_value(ref)


def test_a_worker_resolves_compute_logs_and_artifacts_under_its_own_home(
    launching_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = InstanceRef.from_dir(str(launching_home))
    worker_home = tmp_path / "machine_b" / "dagster_home"
    monkeypatch.setenv("DAGSTER_HOME", str(worker_home))
    compute_logs = ref.compute_logs_data.rehydrate(as_type=HomeComputeLogManager)
    assert Path(compute_logs._base_dir) == worker_home / "storage"
    artifacts = ref.local_artifact_storage_data.rehydrate(as_type=object)
    assert Path(artifacts.base_dir) == worker_home  # type: ignore[attr-defined]


def test_without_dagster_home_the_compute_logs_are_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    with pytest.raises(ValueError, match=r"DAGSTER_HOME is not set: .*\$DAGSTER_HOME/storage"):
        HomeComputeLogManager.from_config_value(None, {})
