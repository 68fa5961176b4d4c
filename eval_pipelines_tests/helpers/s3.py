"""A real S3-compatible server for tests: moto's server on a free TCP port of 127.0.0.1, reached
over HTTP by the real boto3 client through the standard AWS variables, as AWS itself would be."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import boto3
from moto.server import ThreadedMotoServer

from eval_pipelines.core.ports import free_port

# Not secrets: moto accepts any credentials; boto3 only needs some to sign requests.
TEST_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "test-access-key",
    "AWS_SECRET_ACCESS_KEY": "test-secret-key",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str

    def environment(self) -> dict[str, str]:
        """The variables a process sets to reach this server with any AWS client."""
        return {"AWS_ENDPOINT_URL": self.endpoint_url, **TEST_CREDENTIALS}

    def client(self) -> object:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=TEST_CREDENTIALS["AWS_DEFAULT_REGION"],
            aws_access_key_id=TEST_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=TEST_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )

    def new_bucket(self) -> str:
        name = "t-" + secrets.token_hex(6)
        self.client().create_bucket(Bucket=name)  # type: ignore[attr-defined]
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key under ``prefix`` (pages followed)."""
        pages = self.client().get_paginator("list_objects_v2")  # type: ignore[attr-defined]
        return sorted(
            item["Key"]
            for page in pages.paginate(Bucket=bucket, Prefix=prefix)
            for item in page.get("Contents", [])
        )


@contextmanager
def running_s3_server() -> Iterator[S3Server]:
    """Start moto's server on 127.0.0.1 (a free port), stop it on exit."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        server.stop()
