"""Files that runs on several machines share: the index files (text index segments, embedding
vectors, approximate indexes) and the step payloads, under one configured location every
machine reaches (``$EVAL_PIPELINES_SHARED_DIR``): a folder (a mounted shared disk) or
``s3://bucket/prefix``.

In a folder, index files are opened in place (``<folder>/indexes``). On S3 they are written to
this machine's cache folder, then uploaded under a key that carries their content digest,
``<prefix>/indexes/<name>/<digest>/...``, and named current by a small pointer object,
``<prefix>/indexes/<name>/current.json``. A reader fetches the pointer each time it opens a
file and uses its cached copy only when the copy's recorded digest is the pointer's; otherwise
it downloads that digest's objects (checked against the digest) and swaps them in whole. The
name already carries the records or embedding version, and the digest covers a rebuild under
the same name, so a cache cannot serve a stale file. The client is boto3's, configured by the
standard AWS variables (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipelines import settings
from eval_pipelines.core.errors import InputError

INDEX_FOLDER = "indexes"
PAYLOAD_FOLDER = "step_payloads"
POINTER_NAME = "current.json"
# S3 bucket names: 3-63 lowercase letters, digits, dots and hyphens, starting and ending with
# a letter or digit.
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class SharedFolder:
    """A folder every machine mounts at the same path."""

    path: Path

    def index_dir(self) -> Path:
        return self.path / INDEX_FOLDER

    def payload_dir(self) -> Path:
        return self.path / PAYLOAD_FOLDER


@dataclass(frozen=True)
class SharedBucket:
    """``s3://bucket/prefix``: keys under ``prefix`` (no leading or trailing slash)."""

    bucket: str
    prefix: str

    def key(self, *parts: str) -> str:
        return "/".join(part for part in (self.prefix, *parts) if part)

    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")


SharedLocation = SharedFolder | SharedBucket


def parse_location(value: str, setting: str) -> SharedLocation:
    """The location ``value`` names: ``s3://bucket[/prefix]`` or a folder (made absolute);
    :class:`InputError` naming ``setting`` when it is neither."""
    if value.startswith("s3://"):
        bucket, _, prefix = value[len("s3://") :].partition("/")
        if not _BUCKET_NAME.match(bucket):
            raise InputError(
                setting,
                value,
                "must be s3://BUCKET[/PREFIX] with a bucket name of 3-63 lowercase letters, "
                "digits, dots and hyphens",
            )
        return SharedBucket(bucket, prefix.strip("/"))
    if "://" in value:
        raise InputError(setting, value, "must be a folder or s3://BUCKET[/PREFIX]")
    return SharedFolder(Path(value).absolute())


def configured_location(configured: str | None = None) -> SharedLocation | None:
    """The location a resource's ``shared_dir`` names, else ``$EVAL_PIPELINES_SHARED_DIR``;
    None when neither is set (everything stays on this machine, as before)."""
    if configured:
        return parse_location(configured, "shared_dir")
    value = settings.shared_dir()
    return parse_location(value, settings.SHARED_DIR_ENV) if value else None


def s3_client() -> Any:
    """A boto3 S3 client configured as every AWS tool is: endpoint, region and credentials from
    the standard variables (``AWS_ENDPOINT_URL``, ``AWS_DEFAULT_REGION``,
    ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, a profile, an instance role)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", config=Config(connect_timeout=10, read_timeout=60, retries={"max_attempts": 3})
    )


def check_location(location: SharedLocation, setting: str) -> None:
    """Refuse, before anything is written, a location runs could not use: a folder that is
    missing or cannot be written, a bucket whose endpoint cannot be reached, that does not
    exist or that these credentials may not use."""
    if isinstance(location, SharedFolder):
        _check_folder(location.path, setting)
    else:
        _check_bucket(location, setting)


def _check_folder(path: Path, setting: str) -> None:
    if not path.is_dir():
        raise InputError(
            setting, str(path), "must be an existing folder (the shared disk, mounted)"
        )
    try:
        with tempfile.TemporaryFile(dir=path, prefix=".write-check."):
            pass
    except OSError as error:
        raise InputError(
            setting, str(path), f"must be a folder this user can write ({error.strerror})"
        ) from None


def _check_bucket(location: SharedBucket, setting: str) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    client = s3_client()
    endpoint = client.meta.endpoint_url
    try:
        client.head_bucket(Bucket=location.bucket)
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchBucket"):
            rule = f"bucket {location.bucket!r} does not exist at {endpoint}"
        elif code in ("403", "AccessDenied"):
            rule = f"these AWS credentials may not use bucket {location.bucket!r} at {endpoint}"
        else:
            rule = f"bucket {location.bucket!r} at {endpoint} answered {code or error}"
        raise InputError(setting, location.url(), rule) from None
    except BotoCoreError as error:
        raise InputError(
            setting,
            location.url(),
            f"the S3 endpoint {endpoint} cannot be reached ({type(error).__name__}); set "
            "AWS_ENDPOINT_URL to a reachable one",
        ) from None


class IndexMirror:
    """Index files of one bucket location, cached in one local folder of this machine."""

    def __init__(self, location: SharedBucket, client: Any) -> None:
        self.location = location
        self.client = client

    def _key(self, name: str, *parts: str) -> str:
        return self.location.key(INDEX_FOLDER, name, *parts)

    def current_digest(self, name: str) -> dict[str, Any] | None:
        """The pointer of ``name``: its digest and files; None when it was never published."""
        try:
            body = self.client.get_object(
                Bucket=self.location.bucket, Key=self._key(name, POINTER_NAME)
            )["Body"].read()
        except self.client.exceptions.NoSuchKey:
            return None
        pointer: dict[str, Any] = json.loads(body)
        return pointer

    def refresh(self, path: Path) -> None:
        """Make ``path`` this machine's copy of the published file or directory of that name
        (nothing when none is published); a copy whose recorded digest is not the current one
        is replaced whole, so an old copy is never opened for a new version."""
        from eval_pipelines.core.text.index_files import replace_directory

        pointer = self.current_digest(path.name)
        if pointer is None or (path.exists() and _recorded_digest(path) == pointer["digest"]):
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(
            tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".download")
        )
        try:
            for relative in pointer["files"]:
                target = staging / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                self.client.download_file(
                    self.location.bucket,
                    self._key(path.name, pointer["digest"], relative),
                    str(target),
                )
            root = staging if pointer["directory"] else staging / path.name
            if content_digest(root) != pointer["digest"]:
                raise OSError(
                    f"{self.location.url()}: {path.name} at digest {pointer['digest']} does not "
                    "match its content; publish it again"
                )
            if pointer["directory"]:
                replace_directory(staging, path)
            else:
                os.replace(root, path)
            _record_digest(path, pointer["digest"])
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def publish(self, path: Path) -> str:
        """Upload the file or directory ``path`` under its content digest, then point its name
        at that digest; returns the digest."""
        digest = content_digest(path)
        files = _relative_files(path)
        for relative in files:
            source = path / relative if path.is_dir() else path
            self.client.upload_file(
                str(source), self.location.bucket, self._key(path.name, digest, relative)
            )
        pointer = {"digest": digest, "files": files, "directory": path.is_dir()}
        # Written last: a reader finds the pointer only once every object it names is there.
        self.client.put_object(
            Bucket=self.location.bucket,
            Key=self._key(path.name, POINTER_NAME),
            Body=json.dumps(pointer).encode(),
        )
        _record_digest(path, digest)
        return digest


def _relative_files(path: Path) -> list[str]:
    if path.is_dir():
        return sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())
    return [path.name]


def content_digest(path: Path) -> str:
    """SHA-256 over a file's bytes, or over a directory's file names and bytes in name order."""
    digest = hashlib.sha256()
    for relative in _relative_files(path):
        source = path / relative if path.is_dir() else path
        digest.update(relative.encode() + b"\0")
        with open(source, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()


def _digest_record(path: Path) -> Path:
    return path.parent / f".{path.name}.digest"


def _recorded_digest(path: Path) -> str | None:
    try:
        return _digest_record(path).read_text().strip()
    except FileNotFoundError:
        return None


def _record_digest(path: Path, digest: str) -> None:
    record = _digest_record(path)
    temporary = record.with_name(f"{record.name}.{os.getpid()}.tmp")
    temporary.write_text(digest)
    temporary.replace(record)


# Which local folder mirrors which bucket, in this process (set by :func:`index_dir`).
_mirrors: dict[Path, IndexMirror] = {}
_mirrors_lock = threading.Lock()


def index_dir(location: SharedLocation, cache_root: Path) -> Path:
    """The folder this machine opens index files from: the shared folder's ``indexes``, or for
    a bucket this machine's cache ``<cache_root>/<bucket>/<prefix>/indexes``, which from then
    on mirrors the bucket in this process (:func:`refresh`, :func:`publish`)."""
    if isinstance(location, SharedFolder):
        return location.index_dir()
    local = cache_root.joinpath(location.bucket, *location.prefix.split("/"), INDEX_FOLDER)
    with _mirrors_lock:
        if local not in _mirrors or _mirrors[local].location != location:
            _mirrors[local] = IndexMirror(location, s3_client())
    return local


def run_index_dir(warehouse: settings.WarehouseLocation, shared_dir: str | None = None) -> Path:
    """Where a run opens index files: under the shared location (``shared_dir``, else
    ``$EVAL_PIPELINES_SHARED_DIR``) when one is set, in this machine's cache
    (:func:`eval_pipelines.settings.shared_cache_dir`) for a bucket; else the index folder of
    ``warehouse`` (:func:`eval_pipelines.settings.index_dir`), as on one machine."""
    location = configured_location(shared_dir)
    if location is None:
        return settings.index_dir(warehouse)
    return index_dir(location, settings.shared_cache_dir())


def refresh(path: Path) -> None:
    """Bring the index file or directory ``path`` up to date from the bucket its folder
    mirrors; nothing for a folder that mirrors none."""
    mirror = _mirrors.get(path.parent)
    if mirror is not None:
        mirror.refresh(path)


def publish(path: Path) -> None:
    """Upload a freshly built index file or directory to the bucket its folder mirrors;
    nothing for a folder that mirrors none."""
    mirror = _mirrors.get(path.parent)
    if mirror is not None:
        mirror.publish(path)
