"""No import cycle holds the package together: every module imports first, alone, in a fresh
interpreter (a cycle entered from the wrong end fails with a partially initialised module),
and all of them import in reverse order. The run tags are a leaf; the core never imports
dagster (``core/test_core_is_dagster_free.py``)."""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import eval_pipelines

PACKAGE = Path(eval_pipelines.__file__).parent
# Entry points whose import runs something (``python -m``).
SKIP = {"eval_pipelines.ui.devserver"}


def _modules() -> list[str]:
    names = ["eval_pipelines"]
    for info in pkgutil.walk_packages([str(PACKAGE)], "eval_pipelines."):
        if ".migrations" not in info.name and info.name not in SKIP:
            names.append(info.name)
    return sorted(names)


# In one interpreter (dagster itself is imported once): before each module, every module of
# the package is forgotten, so each is imported first, alone, as a fresh interpreter would.
EACH_FIRST = """
import importlib, json, sys, traceback, warnings
warnings.simplefilter("ignore")
failed = {}
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m.split(".")[0] == "eval_pipelines"]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed[name] = traceback.format_exc(limit=-3)
print(json.dumps(failed))
"""


def test_every_module_imports_first_and_alone() -> None:
    modules = _modules()
    assert "eval_pipelines.runs.model" in modules and "eval_pipelines.definitions" in modules
    out = subprocess.run(
        [sys.executable, "-c", EACH_FIRST, json.dumps(modules[::-1])],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {}


def test_every_module_imports_in_reverse_order_in_a_fresh_interpreter() -> None:
    code = (
        "import importlib, json, sys\nfor n in json.loads(sys.argv[1]): importlib.import_module(n)"
    )
    subprocess.run([sys.executable, "-c", code, json.dumps(_modules()[::-1])], check=True)


def test_the_run_tags_are_a_leaf() -> None:
    tree = ast.parse((PACKAGE / "runs" / "tags.py").read_text())
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert imports == []
    for module in ("holdout", "golden", "queries"):
        source = (PACKAGE / "defs" / f"{module}.py").read_text()
        assert "from eval_pipelines.runs.tags import KIND_TAG" in source


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports_anywhere(path: Path, modules: set[str]) -> set[str]:
    """The package's modules ``path`` imports, at module level or inside a function (a
    function-level import only postpones a cycle), each with its parent packages (Python
    runs a package's ``__init__`` before its module), except the module's own packages
    (already being imported when it is)."""
    own = _module_of(path).split(".")
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for target in targets:
            parts = target.split(".")
            found |= {".".join(parts[:i]) for i in range(2, len(parts) + 1)} & modules
    return found - {".".join(own[:i]) for i in range(1, len(own))}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_run_machinery_and_the_definitions_form_no_import_cycle() -> None:
    """Before: runs -> definitions (inside a function) -> defs.holdout -> runs (KIND_TAG), and
    runs <-> dispatcher, eight modules held together by function-level imports."""
    paths = {_module_of(p): p for p in PACKAGE.rglob("*.py") if ".migrations" not in str(p)}
    modules = set(paths) - {"eval_pipelines"}
    graph = {m: _imports_anywhere(paths[m], modules) - {m} for m in modules}
    run_side = {
        m
        for m in modules
        if m.startswith(("eval_pipelines.runs", "eval_pipelines.defs"))
        or m in ("eval_pipelines.definitions", "eval_pipelines.dispatcher")
    }
    cycles = [c for c in _cycles(graph) if set(c) & run_side]
    assert cycles == []


def test_the_api_modules_form_no_import_cycle() -> None:
    """Before: ``api.golden`` imported ``sync_workflow_files`` from ``api.workflows``, which
    imported ``close_abandoned_runs`` from ``api.golden`` inside two functions; what both need
    now lives below both (``api._golden_state``)."""
    paths = {_module_of(p): p for p in PACKAGE.rglob("*.py") if ".migrations" not in str(p)}
    modules = set(paths) - {"eval_pipelines"}
    graph = {m: _imports_anywhere(paths[m], modules) - {m} for m in modules}
    cycles = [c for c in _cycles(graph) if any(m.startswith("eval_pipelines.api.") for m in c)]
    assert cycles == []
