"""The documentation matches the code: a short README pointing into docs/, a CLI reference
generated from the parser, an architecture page naming every module, no citation of files the
repository does not hold, and the small promises around them (licence, `make dev PORT=`,
the top-level --help)."""

from __future__ import annotations

import ast
import io
import re
import shutil
import subprocess
import sys
import tokenize
import tomllib
from pathlib import Path

import pytest

from eval_pipelines_tests.helpers.paths import REPO

DOCS = REPO / "docs"
PACKAGE = REPO / "eval_pipelines"
README_LIMIT = 10 * 1024


def test_the_readme_is_short_and_points_into_docs() -> None:
    """The README was 115,908 bytes with no table of contents; now it is at most 10 KB, says
    the two commands with their measured durations, and every docs/ link in it resolves."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= README_LIMIT
    for needed in ("make demo", "make test", "make test-slow", "leakage_gap", "2 cores"):
        assert needed in text, needed
    links = re.findall(r"\]\((docs/[^)#]+)(?:#([^)]*))?\)", text)
    assert links
    assert [link for link, _ in links if not (REPO / link).is_file()] == []
    for link, anchor in links:
        if anchor:
            headings = re.findall(r"^#+ (.+)$", (REPO / link).read_text(), flags=re.MULTILINE)
            assert anchor in {_slug(heading) for heading in headings}, f"{link}#{anchor}"


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub and mkdocs' toc both make it."""
    kept = re.sub(r"[^\w\- ]", "", heading.lower())
    return re.sub(r"\s", "-", kept.strip())


def test_the_cli_reference_is_the_parser() -> None:
    """docs/cli.md is regenerated from the argparse parser and must equal the committed page
    (run `python -m eval_pipelines.cli.reference` after changing a command)."""
    from eval_pipelines.cli.main import build_parser
    from eval_pipelines.cli.reference import render

    page = render()
    assert (DOCS / "cli.md").read_text(encoding="utf-8") == page, (
        "docs/cli.md is out of date: run `python -m eval_pipelines.cli.reference`"
    )
    commands = ["eval-pipelines"]
    for group, parser in _subparsers(build_parser()).items():
        commands.append(f"eval-pipelines {group}")
        commands.extend(f"eval-pipelines {group} {name}" for name in _subparsers(parser))
    for command in commands:
        assert f"## `{command}`" in page, command


def test_every_argument_of_every_command_has_a_help_line() -> None:
    """Most flags showed only their metavar (``--document DOCUMENT``, ``--sample-size
    SAMPLE_SIZE``): 116 arguments of the CLI had no help line. Every one has one now, so
    ``--help`` and docs/cli.md say what each takes."""
    import argparse

    from eval_pipelines.cli.main import build_parser
    from eval_pipelines.cli.reference import _commands

    missing = [
        f"{command.prog} {'/'.join(action.option_strings) or action.dest}"
        for command in _commands(build_parser())
        for action in command._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and not (action.help or "").strip()
    ]
    assert missing == []


def _subparsers(parser: object) -> dict[str, object]:
    import argparse

    assert isinstance(parser, argparse.ArgumentParser)
    found: dict[str, object] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def _modules_in_tree() -> set[str]:
    names = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py"
    }
    packages = {
        path.parent.relative_to(PACKAGE).as_posix() + "/"
        for path in PACKAGE.rglob("__init__.py")
        if path.parent != PACKAGE
    }
    return names | packages


def test_the_architecture_page_names_every_module_and_only_those() -> None:
    """docs/architecture.md has one table row per package and module of eval_pipelines/
    (its layout missed about 35 of 155 modules, all of core/embeddings/ among them)."""
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `([\w/]+(?:\.py|/))` \|", text, flags=re.MULTILINE)
    assert len(listed) == len(set(listed)), "a module is listed twice"
    tree = _modules_in_tree()
    assert sorted(tree - set(listed)) == [], "in the tree, missing from docs/architecture.md"
    assert sorted(set(listed) - tree) == [], "in docs/architecture.md, not in the tree"


def test_no_page_cites_a_document_the_repository_does_not_hold() -> None:
    """The README cited DESIGN.md and the spec files, which are not in the repository."""
    pages = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for cited in re.findall(r"\b([A-Z][A-Z_]+\.md)\b", text):
            assert (REPO / cited).is_file(), f"{page.name} cites {cited}"
        assert "/work/" not in text and "shared/spec" not in text, page.name


def test_the_mkdocs_nav_lists_every_page() -> None:
    """Every page of docs/ is in mkdocs.yml's nav (and the nav names no missing page), so the
    site `make test` builds with --strict has no orphan."""
    nav = re.findall(r":\s*([\w-]+\.md)\s*$", (REPO / "mkdocs.yml").read_text(), re.MULTILINE)
    assert sorted(nav) == sorted(page.name for page in DOCS.glob("*.md"))


def test_the_licence_is_the_one_pyproject_declares() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"]
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert declared == "MIT" and text.startswith("MIT License")
    assert "Copyright (c) 2026 eval_pipelines contributors" in text


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_dev_takes_its_port_from_port() -> None:
    """`make dev PORT=3001` serves on 3001 (the port was fixed at 3000); 3000 stays the
    default. `make -n` prints the commands without running them."""

    def dev(*extra: str) -> str:
        done = subprocess.run(
            ["make", "-n", "dev", *extra], cwd=REPO, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        return next(line for line in lines if "eval_pipelines.ui.devserver" in line)

    assert dev().endswith("-h 127.0.0.1 -p 3000 -w workspace.yaml")
    assert dev("PORT=3001").endswith("-h 127.0.0.1 -p 3001 -w workspace.yaml")


def test_the_top_level_help_describes_every_kind() -> None:
    """`eval-pipelines --help` described only holdout evaluations; its description now names
    every command group, the four kinds of evidence and the exit codes (through the real entry
    point, exit code 0)."""
    done = subprocess.run(
        [sys.executable, "-m", "eval_pipelines.cli.main", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    description = done.stdout.split("positional arguments:")[0]
    from eval_pipelines.cli.main import build_parser

    for group in _subparsers(build_parser()):
        assert re.search(rf"\b{group}\b", description), group
    for kind in ("holdout evaluation", "golden-set gate", "evaluate queries", "live lift"):
        assert kind in description, kind
    assert "Exit codes: 0 ok" in description and "130 interrupted" in description


def test_every_function_the_api_page_lists_exists() -> None:
    """Each function docs/api.md lists under a module is an attribute of that module."""
    import importlib

    rows = re.findall(
        r"^\| `(eval_pipelines\.api\.\w+)` \| (.+) \|$",
        (DOCS / "api.md").read_text(encoding="utf-8"),
        flags=re.MULTILINE,
    )
    assert rows
    missing = [
        f"{module}.{name}"
        for module, names in rows
        for name in re.findall(r"`(\w+)`", names)
        if not hasattr(importlib.import_module(module), name)
    ]
    assert missing == []


# A timing the code quotes as a measurement ("took 347 s", "about 6 s", "(0.6 s)"): comments say
# why and point at docs/benchmarks.md for the figure. Limits and intervals ("every 30 s",
# "timed out after 30 s", "maxTime (3600 s)") are settings, not measurements, and pass.
_TIME = r"\d+(?:[.,]\d+)?\s?(?:ms|µs|us|ns|s|sec|secs|seconds?|minutes?|min|mins|hours?|h)\b"
QUOTED_TIMING = re.compile(
    r"\b(?:took|takes|take|taking|about|around|roughly|instead of|costs?|spent|spends?)"
    rf"\s+~?{_TIME}"
    r"|\(\s*~?\d+\.\d+\s?(?:ms|µs|us|s)\)"
)
# docs/<page>.md, then optionally #anchor, or the heading (or bold term) in quotes after a
# comma or an opening parenthesis: docs/benchmarks.md, "Figures behind code choices".
DOCS_CITATION = re.compile(r"docs/([\w-]+\.md)(?:#([\w-]+)|(?:,\s*|\s*\(\s*)[\"']([^\"']+)[\"'])?")
README_CITATION = re.compile(
    r"\bREADME(?:\.md)?(?:#([\w-]+)|(?:'s)?(?:,\s*|\s*\(\s*|\s+)[\"*]([^\"*]+)[\"*])?"
)


def _prose(path: Path) -> list[tuple[int, str]]:
    """The comments (consecutive lines joined) and docstrings of one module, white space
    folded, each with the line it starts on."""
    source = path.read_text(encoding="utf-8")
    found: list[tuple[int, str]] = []
    last = -2
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        text = token.string.lstrip("#:").strip()
        if token.start[0] == last + 1 and found:
            found[-1] = (found[-1][0], f"{found[-1][1]} {text}")
        else:
            found.append((token.start[0], text))
        last = token.start[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                found.append((node.body[0].lineno, docstring))
    return [(line, " ".join(text.split())) for line, text in found]


def _targets(page: Path) -> set[str]:
    """What a citation of ``page`` may name: its headings, their anchors and its bold terms."""
    text = page.read_text(encoding="utf-8")
    headings = re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)
    bold = re.findall(r"\*\*([^*]+)\*\*", text)
    return {*headings, *bold, *(_slug(heading) for heading in headings)}


def _names(cited: str, targets: set[str]) -> bool:
    """A heading cited whole, or up to its parenthesis ("Scoring" for "Scoring (every ...)")."""
    return any(target == cited or target.startswith(f"{cited} (") for target in targets)


def _citation_problems(package: Path, repo: Path) -> list[str]:
    problems = []
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(repo).as_posix()
        for line, text in _prose(path):
            at = f"{where}:{line}"
            for timing in QUOTED_TIMING.finditer(text):
                problems.append(f"{at} quotes a timing: {timing.group(0)!r}")
            for cited in re.findall(r"\b([A-Z][A-Z_]+\.md)\b", text):
                if cited != "README.md" and not (repo / cited).is_file():
                    problems.append(f"{at} cites {cited}, which the repository does not hold")
            for page, anchor, heading in DOCS_CITATION.findall(text):
                if not (repo / "docs" / page).is_file():
                    problems.append(f"{at} cites docs/{page}, which does not exist")
                elif (anchor or heading) and not _names(
                    anchor or heading, _targets(repo / "docs" / page)
                ):
                    problems.append(
                        f"{at} cites docs/{page} {anchor or heading!r}: no such heading"
                    )
            for anchor, heading in README_CITATION.findall(text):
                if not (anchor or heading) or not _names(
                    anchor or heading, _targets(repo / "README.md")
                ):
                    problems.append(f"{at} cites the README for something it does not hold")
    return problems


def test_no_docstring_or_comment_cites_what_its_document_does_not_hold() -> None:
    """Code cited README sections that had moved to docs/, a DESIGN.md the repository does not
    hold, and quoted timings that belong in docs/benchmarks.md. Every module's comments and
    docstrings (the package walked, so a new or moved module is checked too): a cited docs
    page exists and holds the heading (or bold term) cited, the README is cited by a heading
    it has, no uppercase document outside the repository is cited, and no measured timing is
    quoted."""
    assert _citation_problems(PACKAGE, REPO) == []
