"""Dagster's files of a step kept on the machine that runs it.

A process that executes a step of another process's run (a Dask worker, a step's pod) opens the
instance from the run's reference, which carries the ``dagster.yaml`` sections as written, or,
for a section left out, the launching machine's absolute folders: so a worker on machine B
wrote the compute logs of its steps into machine A's ``$DAGSTER_HOME/storage`` (seen in
``eval_pipelines_tests/runs/test_dask_machines.py``), a folder that on two real hosts does not
exist on B, or is another B user's. The team's ``dagster.yaml`` therefore names the artifact
storage with ``base_dir: {env: DAGSTER_HOME}`` and the compute logs with
:class:`HomeComputeLogManager`: both resolved, in each process, from that machine's own
``DAGSTER_HOME``.
"""

from __future__ import annotations

import os
from typing import Any

from eval_pipelines.defs.dagster_private import LocalComputeLogManager

# Where Dagster's default puts compute logs, under the instance's folder.
COMPUTE_LOGS_FOLDER = "storage"


class HomeComputeLogManager(LocalComputeLogManager):
    """Dagster's local compute logs in ``$DAGSTER_HOME/storage`` of the process that opens the
    instance (the default's folder, taken from this machine rather than from the launcher's)."""

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {}

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> HomeComputeLogManager:
        home = os.environ.get("DAGSTER_HOME")
        if not home:
            raise ValueError(
                "DAGSTER_HOME is not set: the compute logs of deploy/team/dagster.yaml live in "
                "$DAGSTER_HOME/storage of each machine"
            )
        return cls(base_dir=os.path.join(home, COMPUTE_LOGS_FOLDER), inst_data=inst_data)
