"""Compiled kernels go to a per-user cache folder by default, so the CLI is warm outside make;
loading the Dagster definitions compiles nothing."""

import os
import subprocess
import sys
from pathlib import Path


def _run(code: str, env: dict[str, str]) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return out.stdout.strip()


def test_default_cache_folder_is_per_user(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    folder = _run(
        "import numba.core.config as c, eval_pipelines.core.text.retrieval\nprint(c.CACHE_DIR)",
        env,
    )
    assert folder == str(tmp_path / "cache" / "eval_pipelines" / "numba")


def test_an_explicit_numba_cache_dir_wins(tmp_path: Path) -> None:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "mine"))
    folder = _run(
        "import numba.core.config as c, eval_pipelines.core.text.vectorize\nprint(c.CACHE_DIR)",
        env,
    )
    assert folder == str(tmp_path / "mine")


def test_loading_the_definitions_imports_no_numba() -> None:
    loaded = _run(
        "import sys, eval_pipelines.definitions\nprint('numba' in sys.modules)", dict(os.environ)
    )
    assert loaded == "False"
