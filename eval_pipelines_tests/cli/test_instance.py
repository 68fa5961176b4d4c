"""Which Dagster instance the CLI reads: run from another folder without ``DAGSTER_HOME``, it
gets a new, empty one, and says so instead of calling an evaluation it holds no run of
complete."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "eval_pipelines.cli.main"]


def _cli_elsewhere(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI started in ``folder`` with the test's warehouse but no ``DAGSTER_HOME``."""
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=env, cwd=folder, timeout=300
    )


def test_status_from_a_new_instance_is_not_complete_and_names_the_instance(
    small_case: str, tmp_path: Path
) -> None:
    from eval_pipelines import api

    eval_id = api.start_holdout_eval(
        small_case, [{"name": "baseline"}], api.HoldoutOptions(sample_size=300), wait=True
    ).eval_id
    assert api.get_holdout_eval(small_case, eval_id).status == "complete"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    shown = _cli_elsewhere(elsewhere, "eval", "status", small_case, eval_id)
    assert shown.returncode == 0, shown.stderr
    new_home = elsewhere / ".dagster_home"
    assert f"new Dagster instance in {new_home}" in shown.stderr
    assert "DAGSTER_HOME unset" in shown.stderr
    # Before: "# `eval-...`: complete" beside "- no run yet", and nothing on stderr.
    assert shown.stdout.startswith(f"# `{eval_id}`: unverified")
    assert "no run yet" not in shown.stdout
    assert "holds no run of it: set DAGSTER_HOME" in shown.stderr
    assert str(new_home) in shown.stderr.splitlines()[-1]

    # The instance exists now: the second read says only what it holds.
    again = _cli_elsewhere(elsewhere, "eval", "status", small_case, eval_id, "--json")
    assert "new Dagster instance" not in again.stderr
    assert json.loads(again.stdout)["status"] == "unverified"
    assert "holds no run of it" in again.stderr

    waited = _cli_elsewhere(elsewhere, "eval", "status", small_case, eval_id, "--wait")
    assert waited.returncode == 1
    assert "holds no run of it" in waited.stderr


def test_a_registered_evaluation_without_a_run_says_where_it_looked(
    small_case: str, workdir: Path
) -> None:
    from eval_pipelines import api

    eval_id = api.start_holdout_eval(
        small_case, [{"name": "baseline"}], api.HoldoutOptions(sample_size=300), register_only=True
    ).eval_id
    shown = subprocess.run(
        [*CLI, "eval", "status", small_case, eval_id],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=300,
    )
    assert shown.stdout.startswith(f"# `{eval_id}`: registered")
    assert "- no run yet" in shown.stdout
    assert f"has no run in the Dagster instance in {workdir / 'dagster_home'}" in shown.stderr
