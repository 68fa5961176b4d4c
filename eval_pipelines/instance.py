"""The Dagster instance the CLI and API talk to (``$DAGSTER_HOME``, default ``.dagster_home``)."""

from __future__ import annotations

import os
from pathlib import Path

from dagster import DagsterInstance

DEFAULT_DAGSTER_HOME = ".dagster_home"


def dagster_instance() -> DagsterInstance:
    """The persistent instance; sets ``DAGSTER_HOME`` for child processes when it was unset."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        home = str(Path(DEFAULT_DAGSTER_HOME).absolute())
        os.environ["DAGSTER_HOME"] = home
    Path(home).mkdir(parents=True, exist_ok=True)
    config = Path(home) / "dagster.yaml"
    if not config.exists():
        # An explicit (empty) config: default local storage, without Dagster's warning.
        config.write_text("# Dagster instance for eval_pipelines: default local storage.\n")
    return DagsterInstance.get()
