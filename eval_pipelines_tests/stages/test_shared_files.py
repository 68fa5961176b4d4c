"""Index files on the shared location: on S3 (a real S3-compatible server over HTTP on
127.0.0.1, reached by boto3 through the standard AWS variables) they are published under their
content digest; a second machine's empty cache finds them there, and a cached copy is never
served once its name points at other content. Bad locations are refused, naming the setting."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.ports import free_port
from eval_pipelines.core.text import retrieval as rt
from eval_pipelines.core.text import segments as sg
from eval_pipelines.settings import SHARED_DIR_ENV
from eval_pipelines.stages import shared_files
from eval_pipelines.stages import text_index as ti
from eval_pipelines_tests.helpers.paths import REPO
from eval_pipelines_tests.helpers.s3 import S3Server
from eval_pipelines_tests.helpers.text_search import synthetic_texts


@pytest.fixture(autouse=True)
def _empty_cache() -> Iterator[None]:
    ti.clear_index_cache()
    yield
    ti.clear_index_cache()


def machine_index_dir(bucket: str, machine: Path) -> Path:
    """A machine's view of ``s3://bucket/team``: its own cache folder under ``machine``."""
    return shared_files.index_dir(shared_files.SharedBucket(bucket, "team"), machine / "cache")


def test_a_second_machine_with_an_empty_cache_finds_the_index_on_s3(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    texts = synthetic_texts(400, seed=5)
    first_dir = machine_index_dir(s3_bucket, tmp_path / "first")
    built = ti.load_or_build_index(first_dir, "case", "v1", texts)
    assert built.built
    digest = shared_files.content_digest(built.path)
    keys = s3_server.keys(s3_bucket, "team/indexes/case-v1.tfidf/")
    assert f"team/indexes/case-v1.tfidf/{shared_files.POINTER_NAME}" in keys
    data_keys = [k for k in keys if not k.endswith(shared_files.POINTER_NAME)]
    assert data_keys and all(
        k.startswith(f"team/indexes/case-v1.tfidf/{digest}/") for k in data_keys
    )
    queries = np.arange(0, 400, 7)
    expected = rt.search(built.index, queries, k=5).neighbours

    # The first machine is gone: the second can read nothing of its folders.
    ti.clear_index_cache()
    shutil.rmtree(tmp_path / "first")
    second_dir = machine_index_dir(s3_bucket, tmp_path / "second")
    found = ti.open_index(second_dir, "case", "v1", n_docs=400)

    assert found is not None and not found.built
    assert found.path == second_dir / "case-v1.tfidf"
    assert shared_files.content_digest(found.path) == digest
    np.testing.assert_array_equal(rt.search(found.index, queries, k=5).neighbours, expected)


# A second machine: its own process, working folder and home, the shared location and the
# S3 server's variables only; it opens the index as a run does.
SECOND_MACHINE = """
import json, sys
from pathlib import Path
from eval_pipelines.stages import shared_files, text_index
folder = shared_files.run_index_dir(Path("warehouse.duckdb"))
found = text_index.open_index(folder, "case", "v1", n_docs=int(sys.argv[1]))
print(json.dumps({"found": found is not None, "path": str(found.path) if found else None}))
"""


def test_another_process_in_its_own_folder_finds_the_index_in_its_default_cache(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    built = ti.load_or_build_index(
        machine_index_dir(s3_bucket, tmp_path / "first"), "case", "v1", synthetic_texts(200, 2)
    )
    shutil.rmtree(tmp_path / "first")
    home = tmp_path / "second"
    home.mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(REPO),
        "HOME": str(home),
        SHARED_DIR_ENV: f"s3://{s3_bucket}/team",
        **s3_server.environment(),
    }
    out = subprocess.run(
        [sys.executable, "-c", SECOND_MACHINE, "200"],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    opened = json.loads(out.stdout.strip().splitlines()[-1])
    expected = home / ".cache" / "eval_pipelines" / "shared" / s3_bucket / "team" / "indexes"
    assert opened == {"found": True, "path": str(expected / built.path.name)}


def test_a_cached_copy_is_never_served_once_its_name_points_at_new_content(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    texts = synthetic_texts(300, seed=6)
    first_dir = machine_index_dir(s3_bucket, tmp_path / "first")
    second_dir = machine_index_dir(s3_bucket, tmp_path / "second")
    old = ti.load_or_build_index(first_dir, "case", "v1", texts)
    old_digest = shared_files.content_digest(old.path)
    assert ti.open_index(second_dir, "case", "v1", n_docs=300) is not None  # cached there now

    # The first machine rebuilds the same name with other content and publishes it.
    ti.clear_index_cache()
    rebuilt = first_dir / "case-v1.tfidf"
    sg.write_segmented_index(list(reversed(texts)), rebuilt)
    shared_files.publish(rebuilt)
    new_digest = shared_files.content_digest(rebuilt)
    assert new_digest != old_digest
    keys = s3_server.keys(s3_bucket, "team/indexes/case-v1.tfidf/")
    assert any(k.startswith(f"team/indexes/case-v1.tfidf/{new_digest}/") for k in keys)
    assert any(k.startswith(f"team/indexes/case-v1.tfidf/{old_digest}/") for k in keys)

    ti.clear_index_cache()
    served = ti.open_index(second_dir, "case", "v1", n_docs=300)

    # The second machine's old copy was replaced before opening: it searches the new content.
    assert served is not None
    assert shared_files.content_digest(served.path) == new_digest
    queries = np.arange(0, 300, 11)
    np.testing.assert_array_equal(
        rt.search(served.index, queries, k=3).neighbours,
        rt.search(sg.load_segmented_index(rebuilt), queries, k=3).neighbours,
    )


def test_a_single_file_round_trips_and_a_copy_that_disagrees_with_its_digest_is_refused(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    first = machine_index_dir(s3_bucket, tmp_path / "first")
    first.mkdir(parents=True)
    vectors = first / "case-e1.emb.npy"
    np.save(vectors, np.arange(12, dtype=np.float32).reshape(3, 4))
    digest = shared_files.IndexMirror(
        shared_files.SharedBucket(s3_bucket, "team"), s3_server.client()
    ).publish(vectors)
    second = machine_index_dir(s3_bucket, tmp_path / "second")

    shared_files.refresh(second / "case-e1.emb.npy")
    np.testing.assert_array_equal(np.load(second / "case-e1.emb.npy"), np.load(vectors))

    # An object altered on the bucket after publishing is caught by its digest.
    key = f"team/indexes/case-e1.emb.npy/{digest}/case-e1.emb.npy"
    s3_server.client().put_object(Bucket=s3_bucket, Key=key, Body=b"tampered")  # type: ignore[attr-defined]
    third = machine_index_dir(s3_bucket, tmp_path / "third")
    with pytest.raises(OSError, match="does not match its content"):
        shared_files.refresh(third / "case-e1.emb.npy")
    assert not (third / "case-e1.emb.npy").exists()


def test_without_a_shared_location_nothing_is_mirrored(tmp_path: Path) -> None:
    built = ti.load_or_build_index(tmp_path, "case", "v1", synthetic_texts(50, seed=1))
    assert built.built
    assert shared_files.configured_location() is None  # the test environment sets none
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case-v1.tfidf"]  # no digest record


def test_a_healthy_folder_and_bucket_pass_the_check(
    s3_bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SHARED_DIR_ENV, str(tmp_path))
    folder = shared_files.configured_location()
    assert folder == shared_files.SharedFolder(tmp_path)
    shared_files.check_location(folder, SHARED_DIR_ENV)
    bucket = shared_files.configured_location(f"s3://{s3_bucket}/team/")
    assert bucket == shared_files.SharedBucket(s3_bucket, "team")
    shared_files.check_location(bucket, "shared_dir")
    assert list(tmp_path.iterdir()) == []  # the write check leaves nothing


@pytest.mark.parametrize(
    "value, rule",
    [
        ("s3://No_Such/x", "bucket name of 3-63 lowercase"),
        ("gs://bucket/x", "must be a folder or s3://BUCKET"),
    ],
)
def test_a_malformed_location_is_refused_naming_the_setting(value: str, rule: str) -> None:
    with pytest.raises(InputError, match=rule) as refused:
        shared_files.parse_location(value, SHARED_DIR_ENV)
    assert str(refused.value).startswith(f"{SHARED_DIR_ENV}={value!r}: ")


def test_a_missing_bucket_is_refused(s3_server: S3Server, s3_bucket: str) -> None:
    location = shared_files.SharedBucket("no-such-bucket-here", "team")
    with pytest.raises(InputError, match="bucket 'no-such-bucket-here' does not exist at http"):
        shared_files.check_location(location, SHARED_DIR_ENV)
    assert "no-such-bucket-here" not in [
        b["Name"]
        for b in s3_server.client().list_buckets()["Buckets"]  # type: ignore[attr-defined]
    ]


def test_an_unreachable_endpoint_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", closed)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with pytest.raises(InputError, match=f"the S3 endpoint {closed} cannot be reached") as refused:
        shared_files.check_location(shared_files.SharedBucket("bucket", ""), SHARED_DIR_ENV)
    assert "\n" not in str(refused.value)


def test_a_folder_that_is_missing_or_cannot_be_written_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="must be an existing folder"):
        shared_files.check_location(shared_files.SharedFolder(tmp_path / "absent"), SHARED_DIR_ENV)
    assert not (tmp_path / "absent").exists()
    # Not writable even by root: the kernel's own folder.
    with pytest.raises(InputError, match="must be a folder this user can write"):
        shared_files.check_location(shared_files.SharedFolder(Path("/sys/kernel")), SHARED_DIR_ENV)
