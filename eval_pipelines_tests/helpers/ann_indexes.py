"""The four-chapter case's approximate (pynndescent) index files, built once per test process
and copied into a test's index folder before a run that would otherwise build them.

Why: building an index compiles pynndescent's NN-descent in every process (numba cannot cache
it, :mod:`eval_pipelines.core.embeddings.warmup`). A run waited on with no daemon executes in
the process that waits: in the pytest worker for ``api``/``main()`` calls (compiled once per
worker, shared with the in-process index tests), but in a separate interpreter for a CLI
subprocess, which paid the compilation again. Built here, in the pytest worker, the index is
compiled there once; the run then loads the file as it would a file left by an earlier run. The
files are named by the embedding set's content hash
(:mod:`eval_pipelines.stages.embedding_index`), and the LSA vectors of a case are the same for
the same records, dimension and seed, so a copied file is exactly the one the run would have
built. Building an index inside a run stays tested where the test is about that build
(``defs/test_embedding_index.py``, ``stages/test_leave_out_steps.py``).
"""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path

import pytest

from eval_pipelines_tests.helpers.small_case import SMALL_CASE_ID, create_small_case


class SmallCaseAnnIndexes:
    """Index files of the small case's LSA embeddings (seed 0), one pair per dimension, built
    on first request in a folder of this test process."""

    def __init__(self, folder: Path, case_files: dict[str, Path]) -> None:
        self._folder = folder
        self._case_files = case_files
        self._built: dict[int, list[Path]] = {}

    def install(self, dim: int, index_dir: Path) -> None:
        """Copy the vectors and the index of the ``dim``-dimensional embeddings into
        ``index_dir``, building them first if this process has not yet."""
        index_dir.mkdir(parents=True, exist_ok=True)
        for path in self._files(dim):
            shutil.copy2(path, index_dir / path.name)

    def _files(self, dim: int) -> list[Path]:
        if dim not in self._built:
            self._built[dim] = self._build(dim)
        return self._built[dim]

    def _build(self, dim: int) -> list[Path]:
        from eval_pipelines.api.embeddings import embed_case
        from eval_pipelines.stages import embedding_index
        from eval_pipelines.storage.warehouse import connect

        folder = self._folder / f"dim{dim}"
        home = folder / "dagster_home"
        home.mkdir(parents=True)
        warehouse = folder / "warehouse.duckdb"
        index_dir = folder / "indexes"
        # The environment of a test's workdir, for this build only: the embedding registers the
        # case's partition in an instance, and the text index goes to the index folder.
        with pytest.MonkeyPatch.context() as environment:
            environment.setenv("EVAL_PIPELINES_WAREHOUSE", str(warehouse))
            environment.setenv("EVAL_PIPELINES_INDEX_DIR", str(index_dir))
            environment.setenv("DAGSTER_HOME", str(home))
            environment.delenv("EVAL_PIPELINES_SHARED_DIR", raising=False)
            create_small_case(self._case_files)
            version = embed_case(SMALL_CASE_ID, method="lsa", dim=dim, seed=0).embeddings_version
            open_warehouse = partial(connect, warehouse)
            vectors = embedding_index.load_vectors(
                open_warehouse, index_dir, SMALL_CASE_ID, version
            )
            embedding_index.load_or_build_ann(
                index_dir, SMALL_CASE_ID, version, vectors, n_threads=2
            )
        return [
            embedding_index.vectors_path(index_dir, SMALL_CASE_ID, version),
            embedding_index.ann_path(index_dir, SMALL_CASE_ID, version),
        ]
