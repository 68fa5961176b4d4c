"""``--dist loadgroup`` keeps an ``xdist_group`` on one worker
(:mod:`eval_pipelines_tests.helpers.xdist_groups`): with pytest-xdist 3.8 under pytest 9.2 the
grouped tests were spread over the workers like any others."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from eval_pipelines_tests.helpers.paths import REPO

GROUPED = 6

INNER_CONFTEST = 'pytest_plugins = ["eval_pipelines_tests.helpers.xdist_groups"]\n'

INNER_TESTS = f"""
import os
import time
from pathlib import Path

import pytest

GROUP = pytest.mark.xdist_group("together")


def _record(name):
    time.sleep(0.2)
    Path(name).write_text(os.environ["PYTEST_XDIST_WORKER"])


@GROUP
@pytest.mark.parametrize("n", range({GROUPED}))
def test_grouped(n):
    _record(f"grouped{{n}}.worker")


@pytest.mark.parametrize("n", range(4))
def test_alone(n):
    _record(f"alone{{n}}.worker")
"""


def test_the_tests_of_a_group_run_on_one_worker_and_the_others_on_both(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(INNER_CONFTEST)
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    finished = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"]
        + ["--dist", "loadgroup", "test_inner.py"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    grouped = {(tmp_path / f"grouped{n}.worker").read_text() for n in range(GROUPED)}
    alone = {(tmp_path / f"alone{n}.worker").read_text() for n in range(4)}
    assert len(grouped) == 1, grouped
    # The ungrouped tests went to the other worker while the group ran.
    assert alone - grouped, (alone, grouped)
