"""Compiled kernels go to a per-user cache folder by default, so the CLI is warm outside make;
loading the Dagster definitions compiles nothing."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipelines.core.text import numba_cache
from eval_pipelines.core.text.numba_cache import sources_fingerprint


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
    assert Path(folder).parent == tmp_path / "cache" / "eval_pipelines" / "numba"
    assert Path(folder).name == sources_fingerprint()


def test_the_folder_changes_with_any_kernel_source(tmp_path: Path) -> None:
    """numba checks a cached kernel against its own file only: a change to the heap module
    alone must not leave the search kernels running the old heap."""
    copy = tmp_path / "core"
    shutil.copytree(numba_cache._CORE, copy)
    before = sources_fingerprint()
    heap = copy / "text" / "topk_heap.py"
    heap.write_text(heap.read_text() + "\n")
    original = numba_cache._CORE
    numba_cache._CORE = copy
    try:
        assert sources_fingerprint() != before
    finally:
        numba_cache._CORE = original
    assert sources_fingerprint() == before


def test_an_explicit_numba_cache_dir_wins(tmp_path: Path) -> None:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "mine"))
    folder = _run(
        "import numba.core.config as c, eval_pipelines.core.text.vectorize\nprint(c.CACHE_DIR)",
        env,
    )
    assert folder == str(tmp_path / "mine")


@pytest.mark.exhaustive
def test_loading_the_definitions_imports_no_numba() -> None:
    loaded = _run(
        "import sys, eval_pipelines.definitions\nprint('numba' in sys.modules)", dict(os.environ)
    )
    assert loaded == "False"


def test_every_module_that_defines_kernels_is_in_the_fingerprint() -> None:
    defining = {
        path.relative_to(numba_cache._CORE).as_posix()
        for path in numba_cache._CORE.rglob("*.py")
        if "numba.njit" in path.read_text() and path.name != "numba_cache.py"
    }
    assert defining == set(numba_cache.KERNEL_MODULES)
