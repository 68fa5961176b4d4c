"""Shared fixtures: real DuckDB files and real Dagster instances in temporary folders."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pytest

from eval_pipelines_tests.helpers.ann_indexes import SmallCaseAnnIndexes
from eval_pipelines_tests.helpers.nn_descent_builds import in_group, nn_descent_compilations
from eval_pipelines_tests.helpers.paths import DEMO
from eval_pipelines_tests.helpers.small_case import create_small_case

if TYPE_CHECKING:
    from eval_pipelines.postgres_local.server import LocalPostgres
    from eval_pipelines_tests.helpers.postgres import ScratchDatabase
    from eval_pipelines_tests.helpers.s3 import S3Server

# `--dist loadgroup` that keeps each xdist_group on one worker (make test).
pytest_plugins = ["eval_pipelines_tests.helpers.xdist_groups"]

SMALL_CHAPTERS = ["3", "8", "10", "16"]


@pytest.fixture(scope="session")
def small_case_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Four ICD-10-CM chapters (3,049 real records) as Parquet files: records and tree."""
    folder = tmp_path_factory.mktemp("small_case")
    records = pl.read_parquet(DEMO / "icd10cm_records.parquet").filter(
        pl.col("chapter").is_in(SMALL_CHAPTERS)
    )
    tree = pl.read_parquet(DEMO / "icd10cm_tree.parquet").filter(
        pl.col("chapter").is_in(SMALL_CHAPTERS)
    )
    paths = {"records": folder / "records.parquet", "tree": folder / "tree.parquet"}
    records.write_parquet(paths["records"])
    tree.write_parquet(paths["tree"])
    return paths


@pytest.fixture(autouse=True)
def nn_descent_builds_stay_in_their_group(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails a test that compiled pynndescent's NN-descent in this process without the
    ``BUILDS_NN_DESCENT`` mark (:mod:`eval_pipelines_tests.helpers.nn_descent_builds`)."""
    before = nn_descent_compilations()
    yield
    if nn_descent_compilations() > before and not in_group(request.node):
        pytest.fail(
            f"{request.node.nodeid} compiled pynndescent's NN-descent in the pytest process: "
            "mark it BUILDS_NN_DESCENT (eval_pipelines_tests/helpers/nn_descent_builds.py) "
            "so that make test compiles it on one worker only"
        )


# Set to "postgres" to run every test that uses `workdir` against a PostgreSQL warehouse (a
# fresh database of the session's server per test) instead of a DuckDB file.
TESTS_WAREHOUSE_ENV = "EVAL_PIPELINES_TESTS_WAREHOUSE"


@contextmanager
def _working_in(
    folder: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Path]:
    """``folder``'s warehouse (or a fresh PostgreSQL database, see ``TESTS_WAREHOUSE_ENV``),
    index cache and Dagster home, and ``folder`` as the working directory; a run dispatcher
    started meanwhile is stopped afterwards instead of idling for a minute."""
    from eval_pipelines.runs.dispatcher import stop_dispatcher

    if os.environ.get(TESTS_WAREHOUSE_ENV) == "postgres":
        from eval_pipelines_tests.helpers.postgres import point_warehouse_at

        # A test's own database is its postgres_database (the one a test asking for both gets).
        database = (
            request.getfixturevalue("postgres_database")
            if request.scope == "function"
            else _fresh_database(request.getfixturevalue("postgres_server"))
        )
        point_warehouse_at(database, monkeypatch)
    else:
        monkeypatch.setenv("EVAL_PIPELINES_WAREHOUSE", str(folder / "warehouse.duckdb"))
    monkeypatch.setenv("EVAL_PIPELINES_INDEX_DIR", str(folder / "indexes"))
    home = folder / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.chdir(folder)
    yield folder
    stop_dispatcher(home / "eval_pipelines_dispatcher.lock")


@pytest.fixture
def workdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Path]:
    """A fresh warehouse, index cache and Dagster home for one test (``_working_in``)."""
    with _working_in(tmp_path, monkeypatch, request) as folder:
        yield folder


@pytest.fixture
def postgres_workdir(
    workdir: Path, postgres_database: ScratchDatabase, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """``workdir`` with its warehouse in a fresh PostgreSQL database (:func:`postgres_database`)."""
    from eval_pipelines_tests.helpers.postgres import point_warehouse_at

    point_warehouse_at(postgres_database, monkeypatch)
    return workdir


@pytest.fixture
def golden_home(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``workdir`` plus an empty committed-workflows folder (the repository's
    ``data/workflows`` must not be synced into the test warehouse)."""
    folder = workdir / "committed_workflows"
    folder.mkdir()
    monkeypatch.setenv("EVAL_PIPELINES_WORKFLOWS_DIR", str(folder))
    return workdir


@pytest.fixture
def small_case(workdir: Path, small_case_files: dict[str, Path]) -> str:
    """The four-chapter case, created in this test's warehouse with target depth 3,4."""
    return create_small_case(small_case_files)


@pytest.fixture(scope="module")
def module_small_case(
    tmp_path_factory: pytest.TempPathFactory,
    small_case_files: dict[str, Path],
    request: pytest.FixtureRequest,
) -> Iterator[str]:
    """The four-chapter case in a warehouse and Dagster home that a module's tests share, for
    evaluations several tests read (each made once per test process): a test using it writes
    nothing there (no memo entry, no case) and does not use ``workdir``."""
    with (
        pytest.MonkeyPatch.context() as monkeypatch,
        _working_in(tmp_path_factory.mktemp("module_case"), monkeypatch, request),
    ):
        yield create_small_case(small_case_files)


@pytest.fixture(scope="session")
def small_case_ann_indexes(
    tmp_path_factory: pytest.TempPathFactory, small_case_files: dict[str, Path]
) -> SmallCaseAnnIndexes:
    """The small case's approximate index files, built once per test process
    (:mod:`eval_pipelines_tests.helpers.ann_indexes`): ``.install(dim, index_dir)``."""
    return SmallCaseAnnIndexes(tmp_path_factory.mktemp("small_case_ann"), small_case_files)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[LocalPostgres]:
    """A real PostgreSQL server on 127.0.0.1 for this test process (each xdist worker has its
    own), stopped at the end of the session."""
    from eval_pipelines_tests.helpers.postgres import server_outside_pytest

    with server_outside_pytest("eval-pipelines-postgres-") as server:
        yield server


def _fresh_database(server: LocalPostgres) -> ScratchDatabase:
    from eval_pipelines_tests.helpers.postgres import create_database

    return create_database(server, "t" + secrets.token_hex(6), own_role=True)


@pytest.fixture
def postgres_database(postgres_server: LocalPostgres) -> ScratchDatabase:
    """A fresh database on :func:`postgres_server`, owned by a role of its own."""
    return _fresh_database(postgres_server)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """A real S3-compatible server (moto's) over HTTP on 127.0.0.1 for this test process."""
    from eval_pipelines_tests.helpers.s3 import running_s3_server

    with running_s3_server() as server:
        yield server


@pytest.fixture
def s3_bucket(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket on :func:`s3_server`, with the standard AWS variables of this process
    pointing every client at that server."""
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    return s3_server.new_bucket()
