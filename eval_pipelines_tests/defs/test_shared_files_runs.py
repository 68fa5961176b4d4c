"""A holdout evaluation with its files on the shared location (a folder, then an S3-compatible
server over HTTP on 127.0.0.1 reached by boto3 and dagster-aws) stores the report it stores on
the default; the shared location holds the index files and no payload of a finished run; a
location runs could not use is refused before anything is written."""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest

from eval_pipelines import api
from eval_pipelines.api.embeddings import embed_case
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.ports import free_port
from eval_pipelines.defs.embeddings import embedding_ann_index
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines.defs.step_payloads import StepPayloadIOManager
from eval_pipelines.settings import SHARED_CACHE_ENV, SHARED_DIR_ENV
from eval_pipelines.stages import shared_files
from eval_pipelines.stages.embedding_index import clear_embedding_cache
from eval_pipelines.stages.text_index import clear_index_cache
from eval_pipelines_tests.helpers.holdout_runs import (
    assert_same_report,
    run_holdout,
    stored_report,
)
from eval_pipelines_tests.helpers.nn_descent_builds import BUILDS_NN_DESCENT
from eval_pipelines_tests.helpers.s3 import S3Server

# What the evidence_index step logs when it builds the text index (not when it finds it).
INDEX_BUILT = "segment 1 of 1 written"
VARIANTS = [{"name": "baseline"}, {"name": "k-5.fewer", "config": {"candidates": 5}}]


@pytest.fixture
def eval_id(small_case: str) -> str:
    return api.start_holdout_eval(
        "small", VARIANTS, api.HoldoutOptions(sample_size=40, seed=9), register_only=True
    ).eval_id


def records_version(workdir: Path) -> str:
    with duckdb.connect(str(workdir / "warehouse.duckdb"), read_only=True) as conn:
        row = conn.execute("SELECT records_version FROM cases WHERE case_id = 'small'").fetchone()
    assert row is not None
    return str(row[0])


def logged_text(instance: dg.DagsterInstance, run_id: str) -> str:
    return "\n".join(repr(entry) for entry in instance.all_logs(run_id))


def test_a_holdout_on_a_shared_folder_then_on_s3_stores_the_default_report(
    workdir: Path,
    eval_id: str,
    instance: dg.DagsterInstance,
    s3_server: S3Server,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_holdout(instance, eval_id, {})
    expected = stored_report(workdir, eval_id)
    index_name = f"small-{records_version(workdir)}.tfidf"

    shared = workdir / "shared"
    shared.mkdir()
    monkeypatch.setenv(SHARED_DIR_ENV, str(shared))
    clear_index_cache()
    on_folder = run_holdout(instance, eval_id, {})

    assert_same_report(expected, stored_report(workdir, eval_id))
    assert (shared / "indexes" / index_name).is_dir()
    # Made by the first payload written there; the run's own folder is gone after it.
    payloads = shared / "step_payloads"
    assert payloads.is_dir() and not (payloads / on_folder.run_id).exists()

    monkeypatch.setenv(SHARED_DIR_ENV, f"s3://{s3_bucket}/team")
    monkeypatch.setenv(SHARED_CACHE_ENV, str(workdir / "machine-cache"))
    # The server accepts any key: a random one shows where it would leak.
    secret = "secret-" + secrets.token_hex(12)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    clear_index_cache()
    on_s3 = run_holdout(instance, eval_id, {})

    assert_same_report(expected, stored_report(workdir, eval_id))
    keys = s3_server.keys(s3_bucket)
    pointer = f"team/indexes/{index_name}/{shared_files.POINTER_NAME}"
    assert pointer in keys
    # The payloads went through the bucket during the run, and are gone after it.
    run_payloads = f"team/step_payloads/storage/{on_s3.run_id}/"
    assert f"s3://{s3_bucket}/{run_payloads}" in logged_text(instance, on_s3.run_id)
    assert [k for k in keys if k.startswith("team/step_payloads/")] == []
    # This machine's cache holds the copy it opened, next to the digest it was published under.
    cached = workdir / "machine-cache" / s3_bucket / "team" / "indexes" / index_name
    assert cached.is_dir()
    assert INDEX_BUILT in logged_text(instance, on_s3.run_id)
    assert any(
        k.startswith(f"team/indexes/{index_name}/{shared_files.content_digest(cached)}/")
        for k in keys
    )

    # Another machine: an empty cache of its own, the first one's cache gone. It finds the index
    # on the bucket instead of building it, and stores the same report.
    shutil.rmtree(workdir / "machine-cache")
    monkeypatch.setenv(SHARED_CACHE_ENV, str(workdir / "second-machine-cache"))
    clear_index_cache()
    on_second = run_holdout(instance, eval_id, {})

    assert_same_report(expected, stored_report(workdir, eval_id))
    assert INDEX_BUILT not in logged_text(instance, on_second.run_id)
    assert (workdir / "second-machine-cache" / s3_bucket / "team" / "indexes" / index_name).is_dir()
    # The credentials came from the environment and went nowhere else: no event, no file of
    # the working folder (warehouse, instance, caches), no object of the bucket.
    for run in (on_s3, on_second):
        assert secret not in logged_text(instance, run.run_id)
    assert [
        p for p in workdir.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()
    ] == []
    client = s3_server.client()
    for key in s3_server.keys(s3_bucket):
        body = client.get_object(Bucket=s3_bucket, Key=key)["Body"].read()  # type: ignore[attr-defined]
        assert secret.encode() not in body, key


def materialize_ann_index(case: str) -> dict[str, Any]:
    result = dg.materialize(
        [embedding_ann_index],
        instance=dg.DagsterInstance.get(),
        partition_key=case,
        resources={"warehouse": WarehouseResource(), "io_manager": StepPayloadIOManager()},
    )
    metadata = result.asset_materializations_for_node("embedding_ann_index")[0].metadata
    return {name: value.value for name, value in metadata.items()}


@BUILDS_NN_DESCENT
def test_the_approximate_index_built_on_one_machine_is_loaded_from_s3_on_another(
    small_case: str,
    workdir: Path,
    s3_server: S3Server,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SHARED_DIR_ENV, f"s3://{s3_bucket}/team")
    monkeypatch.setenv(SHARED_CACHE_ENV, str(workdir / "first-cache"))
    embed_case(small_case, method="lsa", dim=16, seed=0)
    built = materialize_ann_index(small_case)
    assert built["built"] is True
    name = f"{small_case}-{built['embeddings_version']}"
    keys = s3_server.keys(s3_bucket, "team/indexes/")
    for file_name in (f"{name}.emb.npy", f"{name}.nndescent.pkl"):
        assert f"team/indexes/{file_name}/{shared_files.POINTER_NAME}" in keys

    shutil.rmtree(workdir / "first-cache")
    monkeypatch.setenv(SHARED_CACHE_ENV, str(workdir / "second-cache"))
    clear_embedding_cache()
    clear_index_cache()
    loaded = materialize_ann_index(small_case)

    assert loaded["built"] is False
    assert loaded["recall_at_20"] == built["recall_at_20"]
    assert str(loaded["path"]).startswith(str(workdir / "second-cache"))


def _evaluation_count(workdir: Path) -> int:
    with duckdb.connect(str(workdir / "warehouse.duckdb"), read_only=True) as conn:
        row = conn.execute("SELECT count(*) FROM evaluations").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("where", ["missing bucket", "unreachable endpoint", "read-only folder"])
def test_a_location_runs_could_not_use_is_refused_before_anything_is_written(
    where: str,
    small_case: str,
    workdir: Path,
    s3_server: S3Server,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if where == "missing bucket":
        monkeypatch.setenv(SHARED_DIR_ENV, "s3://no-such-bucket-here/team")
        rule = "does not exist"
    elif where == "unreachable endpoint":
        monkeypatch.setenv(SHARED_DIR_ENV, f"s3://{s3_bucket}/team")
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
        rule = "cannot be reached"
    else:
        monkeypatch.setenv(SHARED_DIR_ENV, "/sys/kernel")
        rule = "must be a folder this user can write"
    before = _evaluation_count(workdir)

    with pytest.raises(InputError, match=rule) as refused:
        api.start_holdout_eval("small", VARIANTS, api.HoldoutOptions(sample_size=40), wait=True)

    assert str(refused.value).startswith(f"{SHARED_DIR_ENV}=")
    assert "\n" not in str(refused.value)
    assert _evaluation_count(workdir) == before
    assert s3_server.keys(s3_bucket) == []
