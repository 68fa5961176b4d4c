"""Which store step payloads travel through, chosen when a run starts from the shared location
(``$EVAL_PIPELINES_SHARED_DIR`` or this resource's ``shared_dir``): none, the instance's folder
as on one machine; a folder, ``<folder>/step_payloads``; ``s3://bucket/prefix``, dagster-aws's
own pickle IO manager (the one its ``S3PickleIOManager`` wraps) under
``<prefix>/step_payloads``. Either way a run's payloads are removed once its predictions are
stored (``discard_run``)."""

from __future__ import annotations

from typing import Any

import dagster as dg
from dagster_aws.s3 import PickledObjectS3IOManager, S3Resource

from eval_pipelines.defs.io_managers import TransientPickleIOManager
from eval_pipelines.stages import shared_files


class S3RunPayloads(PickledObjectS3IOManager):
    """dagster-aws's pickle IO manager, plus removing one run's objects. It keeps op outputs
    at ``<prefix>/storage/<run id>/...``; objects of runs that failed stay until the bucket's
    lifecycle rule expires them (docs/operations.md, "Files runs share")."""

    def discard_run(self, run_id: str, instance: dg.DagsterInstance) -> None:
        prefix = f"{self._base_path.as_posix()}/storage/{run_id}/"
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        for page in pages:
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:
                self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": keys})


class StepPayloadIOManager(dg.ConfigurableIOManagerFactory):
    """Step payloads in the shared location when one is configured, else as on one machine
    (see the module docstring)."""

    shared_dir: str | None = None
    retention_hours: float = 168.0

    def create_io_manager(self, context: dg.InitResourceContext) -> Any:
        location = shared_files.configured_location(self.shared_dir)
        if isinstance(location, shared_files.SharedBucket):
            # What dagster-aws's S3PickleIOManager builds, from an S3Resource left to the
            # standard AWS variables (endpoint, region, credentials).
            return S3RunPayloads(
                s3_bucket=location.bucket,
                s3_session=S3Resource().get_client(),
                s3_prefix=location.key(shared_files.PAYLOAD_FOLDER),
            )
        base_dir = str(location.payload_dir()) if location is not None else None
        return TransientPickleIOManager(base_dir=base_dir, retention_hours=self.retention_hours)
