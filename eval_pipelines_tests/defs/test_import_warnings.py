"""Loading the definitions warns nothing and leaves the warning filters as they were: the
preview warning of partitioned asset checks is silenced only while our checks are defined."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "eval_pipelines"


def test_loading_and_resolving_the_definitions_warns_nothing(tmp_path: Path) -> None:
    # -W error turns any warning into an exception: the preview warning of partitioned
    # checks and the owners warning of a sensor bound to an op job used to be printed (and
    # were hidden by filters installed at import).
    code = (
        "import eval_pipelines.definitions as d\n"
        "repository = d.defs.get_repository_def()\n"
        "print(len(repository.sensor_defs))"
    )
    env = dict(os.environ, DAGSTER_HOME=str(tmp_path), PYTHONPATH=str(PACKAGE.parent))
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "2"


def _installs_a_filter(tree: ast.AST) -> list[int]:
    """Lines calling warnings.filterwarnings/simplefilter outside a catch_warnings block."""
    scoped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(
            isinstance(item.context_expr, ast.Call)
            and isinstance(item.context_expr.func, ast.Attribute)
            and item.context_expr.func.attr == "catch_warnings"
            for item in node.items
        ):
            scoped |= {n.lineno for n in ast.walk(node) if hasattr(n, "lineno")}
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"filterwarnings", "simplefilter"}
        and node.lineno not in scoped
    ]


def test_no_module_installs_a_warning_filter() -> None:
    found = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := _installs_a_filter(ast.parse(path.read_text())))
    }
    assert found == {}


def test_the_filter_check_sees_a_filter_installed_at_import() -> None:
    assert _installs_a_filter(ast.parse("import warnings\nwarnings.filterwarnings('ignore')")) == [
        2
    ]
    scoped = "import warnings\nwith warnings.catch_warnings():\n    warnings.simplefilter('ignore')"
    assert _installs_a_filter(ast.parse(scoped)) == []
