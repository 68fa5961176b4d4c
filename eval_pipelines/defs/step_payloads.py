"""Which store step payloads travel through, chosen when a run starts from the shared location
(``$EVAL_PIPELINES_SHARED_DIR`` or this resource's ``shared_dir``): none, the instance's folder
as on one machine; a folder, ``<folder>/step_payloads``; ``s3://bucket/prefix``, dagster-aws's
own pickle IO manager under ``<prefix>/step_payloads`` (:mod:`eval_pipelines.defs.s3_payloads`).
Either way a run's payloads are removed once its predictions are stored (``discard_run``)."""

from __future__ import annotations

from typing import Any

import dagster as dg

from eval_pipelines.defs.io_managers import TransientPickleIOManager
from eval_pipelines.stages import shared_files


class StepPayloadIOManager(dg.ConfigurableIOManagerFactory):
    """Step payloads in the shared location when one is configured, else as on one machine
    (see the module docstring)."""

    shared_dir: str | None = None
    retention_hours: float = 168.0

    def create_io_manager(self, context: dg.InitResourceContext) -> Any:
        location = shared_files.configured_location(self.shared_dir)
        if isinstance(location, shared_files.SharedBucket):
            from eval_pipelines.defs.s3_payloads import s3_run_payloads

            return s3_run_payloads(location)
        base_dir = str(location.payload_dir()) if location is not None else None
        return TransientPickleIOManager(base_dir=base_dir, retention_hours=self.retention_hours)
