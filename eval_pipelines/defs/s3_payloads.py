"""Step payloads in an S3 bucket: dagster-aws's pickle IO manager (the one its
``S3PickleIOManager`` builds), plus removing one run's objects once its predictions are stored.
Imported only by a run whose shared location is a bucket (boto3 and dagster-aws take seconds to
import)."""

from __future__ import annotations

import dagster as dg
from dagster_aws.s3 import PickledObjectS3IOManager, S3Resource

from eval_pipelines.stages.shared_files import PAYLOAD_FOLDER, SharedBucket


class S3RunPayloads(PickledObjectS3IOManager):
    """Op outputs at ``<prefix>/storage/<run id>/...``; objects of runs that failed stay until
    the bucket's lifecycle rule expires them (docs/operations.md, "Files runs share")."""

    def discard_run(self, run_id: str, instance: dg.DagsterInstance) -> None:
        prefix = f"{self._base_path.as_posix()}/storage/{run_id}/"
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        for page in pages:
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:
                self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": keys})


def s3_run_payloads(location: SharedBucket) -> S3RunPayloads:
    """Payloads under ``<prefix>/step_payloads``, through an ``S3Resource`` left to the standard
    AWS variables (endpoint, region, credentials)."""
    return S3RunPayloads(
        s3_bucket=location.bucket,
        s3_session=S3Resource().get_client(),
        s3_prefix=location.key(PAYLOAD_FOLDER),
    )
