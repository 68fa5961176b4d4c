"""The package's import graph has no cycle and runs one way, down the layers; every module
imports first and alone.

The graph is read from the source (the AST), every import counted: at module level, inside
a function (a deferred import only postpones a cycle) and under ``TYPE_CHECKING`` (a cycle
of types is still a cycle of concepts). A module's layer is read from its path: the first
name under ``eval_pipelines/``, ranked by :data:`LAYERS` (the order docs/architecture.md
writes down); any other top-level module or package is an entry point, above them all.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import eval_pipelines

PACKAGE = Path(eval_pipelines.__file__).parent
ROOT = "eval_pipelines"

# Lowest first; names on one line share a rank (neither imports the other's layer, and the
# graph between them is checked for cycles like any other).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("settings",),
    ("core",),
    ("storage",),
    ("stages",),
    ("defs",),
    ("definitions",),
    ("runs",),
    # The dev server wrapper (ui/): the CLI names the UI's address it records.
    ("api", "ui"),
    ("cli",),
)
ENTRY_RANK = len(LAYERS)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    """Every module of the package (its ``__init__`` included), by name."""
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> str:
    """The first name under ``eval_pipelines`` (the package itself for its ``__init__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def rank_of(module: str) -> int:
    layer = layer_of(module)
    if layer == ROOT:
        return -1  # the empty package __init__, which everything is imported through
    return next((rank for rank, names in enumerate(LAYERS) if layer in names), ENTRY_RANK)


def imported_modules(source: str, own: str, *, is_package: bool, modules: set[str]) -> set[str]:
    """The package's modules that module ``own`` (of source ``source``) imports anywhere,
    each with its parent packages (Python runs a package's ``__init__`` before its module),
    except the module's own packages (already being imported when it is)."""
    package = own if is_package else own.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, up level - 1
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            parts = target.split(".")
            found |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & modules
    own_parts = own.split(".")
    return found - {".".join(own_parts[:i]) for i in range(1, len(own_parts) + 1)}


def import_graph() -> dict[str, set[str]]:
    paths = package_modules()
    modules = set(paths)
    return {
        name: imported_modules(
            path.read_text(), name, is_package=path.name == "__init__.py", modules=modules
        )
        for name, path in paths.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), and nodes that
    import themselves."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
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
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_every_kind_of_import() -> None:
    """The reader counts what the tests below rely on: an import under ``TYPE_CHECKING``, one
    inside a function, a relative one, and each package's ``__init__`` on the way."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from eval_pipelines.core.tree import CodeTree\n"
        "def f():\n    from eval_pipelines.storage import warehouse\n"
        "from ..defs import partitions\n"
        "from . import locks\n"
    )
    found = imported_modules(
        source, "eval_pipelines.runs.probe", is_package=False, modules=set(package_modules())
    )
    assert found == {
        "eval_pipelines.core",
        "eval_pipelines.core.tree",
        "eval_pipelines.storage",
        "eval_pipelines.storage.warehouse",
        "eval_pipelines.defs",
        "eval_pipelines.defs.partitions",
        "eval_pipelines.runs.locks",
    }


def test_a_cycle_is_found_however_long() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}, "e": {"a"}}
    assert cycles(graph) == [["a", "b", "c"], ["d"]]


def test_every_import_of_the_package_names_one_of_its_modules() -> None:
    """A module moved without every import of it updated (a deferred one only fails when its
    function runs) would also drop out of the graph the tests below read."""
    modules = set(package_modules())
    unresolved = []
    for name, path in package_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module]
            else:
                continue
            unresolved += [
                f"{name}: {target}"
                for target in targets
                if target.split(".")[0] == ROOT and target not in modules
            ]
    assert unresolved == []


def test_no_module_imports_another_that_imports_it_back() -> None:
    """No cycle at all, between any modules. Before: ``stages.chat_classify`` <->
    ``stages.holdout`` (a ``TYPE_CHECKING`` import one way, a deferred one the other) and
    ``core.golden.case`` <-> ``core.golden.summary`` (a deferred import)."""
    assert cycles(import_graph()) == []


def test_the_layers_import_downward_only() -> None:
    """Every import goes to the same layer or a lower one. Before: four ``defs`` modules
    imported ``runs`` (its tags and private-Dagster names, which executed the run machinery),
    and ``runs`` imported ``defs``: the cycle ``defs -> runs -> defs``."""
    upward = sorted(
        f"{module} -> {imported}"
        for module, imports in import_graph().items()
        for imported in imports
        if rank_of(imported) > rank_of(module)
    )
    assert upward == []


def test_no_two_layers_import_each_other() -> None:
    """The graph of layers (each module counted in its layer) has no cycle, those of one rank
    included."""
    layers: dict[str, set[str]] = {}
    for module, imports in import_graph().items():
        layers.setdefault(layer_of(module), set()).update(
            layer_of(imported) for imported in imports if layer_of(imported) != layer_of(module)
        )
    assert cycles(layers) == []


def feature_of(module: str) -> str:
    """A module's feature package within its layer (``eval_pipelines.core.chat`` for
    ``eval_pipelines.core.chat.request``); a module directly in a layer is its own."""
    return ".".join(module.split(".")[:3])


def test_no_two_feature_packages_import_each_other() -> None:
    """The graph of feature packages (``core.chat``, ``core.workflows``, ...: each module
    counted in its package) has no cycle either. Before: ``core.chat.extract`` imported
    ``core.workflows.schema`` while ``core.workflows.chat_node`` imported ``core.chat``'s
    extract: no module cycle, but two packages each needing the other."""
    packages: dict[str, set[str]] = {}
    for module, imports in import_graph().items():
        packages.setdefault(feature_of(module), set()).update(
            feature_of(imported)
            for imported in imports
            if feature_of(imported) != feature_of(module)
        )
    assert cycles(packages) == []


def test_every_named_layer_exists() -> None:
    """A layer renamed or moved must be renamed here too, or its modules would count as
    entry points."""
    present = {layer_of(module) for module in package_modules()}
    assert {name for names in LAYERS for name in names} <= present


# In one interpreter (dagster and the other libraries imported once): before each layer, every
# module of the package is forgotten, so each layer is imported as a fresh interpreter would.
IMPORT_EACH_LAYER = """
import importlib, json, sys, warnings
warnings.simplefilter("ignore")
executed = {}
for layer, names in json.loads(sys.argv[1]).items():
    for loaded in [m for m in sys.modules if m.split(".")[0] == "eval_pipelines"]:
        del sys.modules[loaded]
    for name in names:
        importlib.import_module(name)
    executed[layer] = sorted(m for m in sys.modules if m.split(".")[0] == "eval_pipelines")
print(json.dumps(executed))
"""


def test_importing_a_layer_executes_no_module_of_a_higher_layer() -> None:
    """Importing every module of a layer executes modules of that layer and lower ones only.
    Before: importing ``defs`` (for its run tags) executed the run machinery, and the
    machinery the instance module at the top of the package."""
    by_rank: dict[int, list[str]] = {}
    for module in package_modules():
        by_rank.setdefault(rank_of(module), []).append(module)
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_EACH_LAYER, json.dumps(by_rank)],
        capture_output=True,
        text=True,
        check=True,
    )
    executed = json.loads(out.stdout.strip().splitlines()[-1])
    higher = {
        rank: [module for module in modules if rank_of(module) > int(rank)]
        for rank, modules in executed.items()
    }
    assert higher == {rank: [] for rank in executed}
    assert set(executed) == {str(rank) for rank in by_rank}


def test_the_run_tags_are_a_leaf_the_definitions_read() -> None:
    """The definitions tag their jobs with the names the run machinery reads, from a module
    that imports nothing (of the project, or Dagster)."""
    tree = ast.parse((PACKAGE / "defs" / "run_tags.py").read_text())
    assert [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)] == []
    tagging = [
        path
        for path in sorted((PACKAGE / "defs").glob("*.py"))
        if path.name != "run_tags.py" and "KIND_TAG" in path.read_text()
    ]
    assert len(tagging) >= 3  # holdout, golden, the queries' and the ANN index's
    for path in tagging:
        assert "from eval_pipelines.defs.run_tags import KIND_TAG" in path.read_text(), path


# Before each module, every module of the package is forgotten, so each is imported first,
# alone, as a fresh interpreter would (dagster itself is imported once).
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
    """A module that needs another imported before it (or a side effect of one) fails here."""
    modules = sorted(package_modules())
    assert "eval_pipelines.runs.launching" in modules and "eval_pipelines.definitions" in modules
    out = subprocess.run(
        [sys.executable, "-c", EACH_FIRST, json.dumps(modules[::-1])],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {}


# Before each entry point, every module of the package is forgotten; then its packages are
# imported, as ``python -m`` does before it runs the module.
PACKAGES_FIRST = """
import importlib, json, sys, warnings
warnings.simplefilter("ignore")
executed_early = []
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m.split(".")[0] == "eval_pipelines"]:
        del sys.modules[loaded]
    importlib.import_module(name.rpartition(".")[0])
    if name in sys.modules:
        executed_early.append(name)
print(json.dumps(executed_early))
"""


def test_no_entry_point_is_imported_by_its_own_packages() -> None:
    """``python -m package.module`` imports the package first; a module its ``__init__``
    already imported is executed twice, with a RuntimeWarning on stderr (before:
    ``python -m eval_pipelines.runs.instance``, which ``make install`` runs, as
    ``runs/__init__`` imported it through ``launch``)."""
    entry_points = sorted(
        name
        for name, path in package_modules().items()
        if path.name != "__init__.py" and 'if __name__ == "__main__":' in path.read_text()
    )
    assert "eval_pipelines.runs.instance" in entry_points
    assert "eval_pipelines.runs.dispatcher" in entry_points
    out = subprocess.run(
        [sys.executable, "-c", PACKAGES_FIRST, json.dumps(entry_points)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
