"""The API, core, stages and storage speak to Python callers: their messages name Python
parameters (`name` in backticks where a rule mentions another one), never a CLI flag; the CLI
shows each parameter as the flag that sets it. A hint that quotes a whole shell command
(``eval-pipelines ...``) is allowed: it is a command to run, not a parameter of the call."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import eval_pipelines
from eval_pipelines.core.errors import InputError

PACKAGE = Path(eval_pipelines.__file__).parent
SPOKEN_TO_PYTHON = ["api", "core", "stages", "storage", "runs", "defs"]
FLAG = re.compile(r"(?<![\w`-])--[a-z][a-z-]*")
MODULES = sorted(
    path.relative_to(PACKAGE).as_posix()
    for folder in SPOKEN_TO_PYTHON
    for path in (PACKAGE / folder).rglob("*.py")
)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _texts(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string the module can say, f-strings whole (placeholders as ``{}``)."""
    docstrings, inside_fstrings = _docstrings(tree), set()
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = []
            for part in node.values:
                inside_fstrings.add(id(part))
                parts.append(part.value if isinstance(part, ast.Constant) else "{}")
            texts.append((node.lineno, "".join(map(str, parts))))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings | inside_fstrings
        ):
            texts.append((node.lineno, node.value))
    return texts


@pytest.mark.parametrize("module", MODULES)
def test_no_message_names_a_cli_flag(module: str) -> None:
    tree = ast.parse((PACKAGE / module).read_text())
    flagged = [
        f"line {line}: {text!r}"
        for line, text in _texts(tree)
        if FLAG.search(text) and "eval-pipelines" not in text
    ]
    assert not flagged, f"{module} names CLI flags to Python callers:\n" + "\n".join(flagged)


def test_the_scan_sees_a_flag_in_an_fstring_and_a_constant() -> None:
    source = 'def f(x):\n    """--doc is fine"""\n    raise E("--dim", x, f"below {x} --rows")\n'
    texts = [text for _, text in _texts(ast.parse(source)) if FLAG.search(text)]
    assert sorted(texts) == ["--dim", "below {} --rows"]


def test_an_input_error_shows_parameters_to_python_and_flags_to_the_shell() -> None:
    error = InputError("tree", None, "give exactly one of `tree` or `levels`")
    assert str(error) == "tree=None: give exactly one of `tree` or `levels`"
    flags = {"tree": "--tree", "levels": "--levels"}
    assert error.with_flags(flags) == "--tree=None: give exactly one of --tree or --levels"
    assert error.with_flags({}) == str(error)


@pytest.mark.parametrize("refusal", ["IngestRefused", "QueryRefused"])
def test_a_run_s_refusal_is_shown_as_the_run_wrote_it(refusal: str) -> None:
    """A run's refusal already names its field and value: the shell shows it without a
    ``log=None:`` / ``query=None:`` prefix (the query's read "query=None: ..." before)."""
    from eval_pipelines import api

    error = getattr(api, refusal)("line 3: table `cars` was reloaded since the query started")
    assert isinstance(error, InputError)
    assert error.with_flags({}) == "line 3: table `cars` was reloaded since the query started"
    assert error.with_flags({"cars": "--cars"}) == (
        "line 3: table --cars was reloaded since the query started"
    )


def test_the_cli_shows_the_flag_the_api_error_names_as_a_parameter(tmp_path: Path) -> None:
    from eval_pipelines.api import embeddings

    with pytest.raises(InputError) as raised:
        embeddings.embed_case("c1", method="lsa", dim=1, warehouse=tmp_path / "w.duckdb")
    assert raised.value.field == "dim"
    shown = subprocess.run(
        [sys.executable, "-m", "eval_pipelines.cli.main", "--warehouse", str(tmp_path / "w.duckdb")]
        + ["case", "embed", "c1", "--method", "lsa", "--dim", "1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 2, shown.stderr
    assert shown.stderr.startswith("error: --dim=1: "), shown.stderr
    assert not (tmp_path / "w.duckdb").exists()
