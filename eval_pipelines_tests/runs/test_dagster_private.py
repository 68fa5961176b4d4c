"""Every name eval_pipelines takes from Dagster's private modules comes through one module,
``eval_pipelines.defs.dagster_private``, checked here against the Dagster version the
project pins: an upgrade fails here, loudly, instead of somewhere in a run."""

from __future__ import annotations

import ast
import importlib
import re
import tomllib
from pathlib import Path

import dagster

import eval_pipelines
from eval_pipelines.defs import dagster_private

# The Dagster release every name of dagster_private.py was checked against. On an upgrade:
# re-check each name there (they are Dagster's internals), then change this and the pin.
CHECKED_AGAINST = "1.13.27"
PACKAGE = Path(eval_pipelines.__file__).parent
PRIVATE_MODULE = PACKAGE / "defs" / "dagster_private.py"


def _pinned(name: str) -> str:
    pyproject = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())
    for requirement in pyproject["project"]["dependencies"]:
        match = re.fullmatch(rf"{re.escape(name)}==([\w.]+)", requirement.strip())
        if match:
            return match.group(1)
    raise AssertionError(f"{name} is not pinned exactly in pyproject.toml")


def test_the_private_names_were_checked_against_the_pinned_dagster() -> None:
    assert _pinned("dagster") == CHECKED_AGAINST, (
        f"pyproject.toml pins dagster {_pinned('dagster')}; eval_pipelines/runs/"
        f"dagster_private.py was checked against {CHECKED_AGAINST}: re-check its names"
    )
    assert dagster.__version__ == CHECKED_AGAINST, (
        f"dagster {dagster.__version__} is installed; dagster_private.py was checked "
        f"against {CHECKED_AGAINST}"
    )


def test_every_private_name_resolves() -> None:
    for name in dagster_private.__all__:
        assert getattr(dagster_private, name) is not None, name
    # The two imported only when used (a Dask worker's step, the dispatcher's coordinator).
    from dagster._cli.api import _execute_step_command_body  # noqa: F401
    from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import (  # noqa: F401
        QueuedRunCoordinatorDaemon,
    )


def _private_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        found += [f"{path.relative_to(PACKAGE)}:{node.lineno} {n}" for n in names]
    return [f for f in found if re.search(r" dagster(_\w+)?\._", f)]


def test_no_other_module_of_the_package_imports_dagster_private_modules() -> None:
    offending = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PRIVATE_MODULE
        for hit in _private_imports(path)
    ]
    assert offending == []
    # and the text of the package names dagster._ nowhere else either (strings, importlib)
    texts = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PRIVATE_MODULE and "dagster._" in path.read_text()
    ]
    assert texts == []


def test_the_private_module_is_where_they_are() -> None:
    assert len(_private_imports(PRIVATE_MODULE)) > 10
    importlib.reload(dagster_private)  # imports cleanly on its own
