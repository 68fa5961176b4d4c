"""The test tree mirrors the package (issue 29): a test file sits in the folder of the package
it tests, or in ``project/`` when it checks the repository as a whole; shared fixtures live in
a ``conftest.py``, shared code in ``helpers/``, and no test module imports from another (42
test files had piled up at the top, helper modules among them, and tests imported private
helpers from other test modules). docs/architecture.md's "Beside the package" paragraph says
the same, naming every folder of the tree."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from eval_pipelines_tests.helpers.paths import REPO

TESTS = REPO / "eval_pipelines_tests"
PACKAGE = REPO / "eval_pipelines"
# Checks of the repository as a whole: docs, import cycles, timed assertions, the demo.
PROJECT = "project"
HELPERS = "helpers"


def _python_files() -> Iterator[Path]:
    for path in sorted(TESTS.rglob("*.py")):
        if "__pycache__" not in path.parts:
            yield path


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts)


def _is_test_module(module: str) -> bool:
    last = module.rsplit(".", 1)[-1]
    return last.startswith("test_") or last == "conftest"


def _imports(path: Path) -> Iterator[tuple[str, list[str]]]:
    """(module, names imported from it) for every import of the project's tests in ``path``,
    relative ones resolved, those inside functions included."""
    package = _module_name(path).rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("eval_pipelines_tests."):
                    yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if module.startswith("eval_pipelines_tests"):
                yield module, [alias.name for alias in node.names]


def test_every_test_file_sits_in_a_folder_of_the_package_or_in_project() -> None:
    misplaced = []
    for path in _python_files():
        if not path.name.startswith("test_"):
            continue
        folder = path.parent.relative_to(TESTS)
        mirrored = bool(folder.parts) and (PACKAGE / folder / "__init__.py").is_file()
        if not (mirrored or folder == Path(PROJECT)):
            misplaced.append(path.relative_to(TESTS).as_posix())
    assert misplaced == [], "each belongs in the folder mirroring what it tests, or in project/"


def test_shared_code_lives_in_helpers_and_fixtures_in_conftest() -> None:
    loose = [
        path.relative_to(TESTS).as_posix()
        for path in _python_files()
        if not path.name.startswith("test_")
        and path.name not in {"__init__.py", "conftest.py"}
        and path.parent != TESTS / HELPERS
    ]
    assert loose == [], "a module that is not a test belongs in helpers/"
    assert [path.name for path in (TESTS / HELPERS).glob("test_*.py")] == []


def test_every_folder_of_the_tree_is_a_package() -> None:
    folders = {path.parent for path in _python_files()}
    assert (
        sorted(
            folder.relative_to(TESTS).as_posix()
            for folder in folders
            if not (folder / "__init__.py").is_file()
        )
        == []
    )


def test_no_test_module_imports_from_another() -> None:
    """Fixtures come from a conftest.py, shared code from helpers/: a test module importing
    another test module's names (private ones, worse) couples two files a reader sees apart."""
    private, coupled = [], set()
    for path in _python_files():
        importer = _module_name(path)
        for module, names in _imports(path):
            private += [f"{importer}: {module}.{name}" for name in names if name.startswith("_")]
            if importer.rsplit(".", 1)[-1] == "conftest":
                continue
            # `from eval_pipelines_tests.api import test_golden` imports a test module too
            for imported in (module, *(f"{module}.{name}" for name in names)):
                if _is_test_module(imported):
                    coupled.add((importer, imported))
    assert private == []
    assert sorted(coupled) == []


def test_the_architecture_page_names_every_folder_of_the_tree() -> None:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    paragraph = text.split("Beside the package:", 1)[1].split("\n\n", 1)[0]
    folders = sorted(
        path.name
        for path in TESTS.iterdir()
        if (path / "__init__.py").is_file() or path.name == "fixtures"
    )
    assert [name for name in folders if f"`{name}/`" not in paragraph] == []
    assert "`conftest.py`" in paragraph
