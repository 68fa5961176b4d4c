"""``--dist loadgroup`` that keeps the tests of one ``xdist_group`` on one worker again.

pytest-xdist 3.8 tells its scheduler a test's group by appending ``@<group>`` to the test's
``_nodeid`` on the worker; pytest 9.2 keeps node ids in ``_id`` and no longer reads that
attribute, so the suffix is lost and loadgroup silently schedules test by test
(pytest-dev/pytest-xdist issue 1386, unfixed in a release). Here the workers write the groups
of the tests they collected (node id to group, named as xdist names them) to a folder the
controller chose, and the controller's scheduler reads them: the same grouping, without
touching node ids. With a future xdist that appends the suffix again, the suffix still works.

A pytest plugin: the root ``conftest.py`` loads it (``pytest_plugins``).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from xdist.scheduler import LoadGroupScheduling

if TYPE_CHECKING:
    from xdist.remote import Producer

GROUPS_DIR_ENV = "EVAL_PIPELINES_TESTS_XDIST_GROUPS_DIR"


def _wanted(config: pytest.Config) -> bool:
    """Whether this run distributes by group (``-n N --dist loadgroup``)."""
    return config.pluginmanager.hasplugin("xdist") and config.getvalue("dist") == "loadgroup"


def _on_the_controller(config: pytest.Config) -> bool:
    return _wanted(config) and not hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    """On the controller, before the workers start: the folder they write their groups to
    (they inherit the environment)."""
    if _on_the_controller(config):
        os.environ[GROUPS_DIR_ENV] = tempfile.mkdtemp(prefix="eval-pipelines-xdist-groups-")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _on_the_controller(config):
        shutil.rmtree(os.environ.pop(GROUPS_DIR_ENV), ignore_errors=True)


def group_names(item: pytest.Item) -> set[str]:
    """The names of the test's ``xdist_group`` marks (``default`` for a mark without one)."""
    return {
        str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        for mark in item.iter_markers("xdist_group")
    }


def group_name(item: pytest.Item) -> str | None:
    """The test's group as xdist names it (its ``xdist_group`` names, sorted, joined by
    ``_``), or None."""
    names = group_names(item)
    return "_".join(sorted(names)) if names else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker, after collection: its tests' groups, for the controller's scheduler."""
    folder, worker = os.environ.get(GROUPS_DIR_ENV), os.environ.get("PYTEST_XDIST_WORKER")
    if not folder or not worker or not hasattr(config, "workerinput"):
        return  # not a worker of a loadgroup run (a pytest a test started inherits the variables)
    groups = {item.nodeid: name for item in items if (name := group_name(item)) is not None}
    (Path(folder) / f"{worker}.json").write_text(json.dumps(groups))


class WrittenGroupScheduling(LoadGroupScheduling):
    """xdist's loadgroup, the groups read from the workers' files instead of node ids.

    Scopes are computed once every worker has finished collecting (and so written its file).
    """

    _groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:
            self._groups = {}
            for path in sorted(Path(os.environ[GROUPS_DIR_ENV]).glob("*.json")):
                self._groups.update(json.loads(path.read_text()))
        return self._groups.get(nodeid) or super()._split_scope(nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(
    config: pytest.Config, log: Producer
) -> WrittenGroupScheduling | None:
    return WrittenGroupScheduling(config, log) if _wanted(config) else None
