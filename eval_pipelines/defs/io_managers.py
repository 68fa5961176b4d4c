"""Where step outputs travel between steps: pickles that do not outlive their use.

Classify steps receive their task and hand back their predictions through files (they never
open the warehouse). Dagster's default filesystem IO manager keeps every such file forever;
this one writes them under ``<base>/<run id>/``, removes a run's folder once its predictions
are stored, and on every write removes folders older than ``retention_hours`` (kept that long
so "re-execute from failure" can still read a failed run's outputs).
"""

from __future__ import annotations

import pickle
import shutil
import time
from pathlib import Path
from typing import Any

import dagster as dg

PAYLOAD_FOLDER = "step_payloads"


def payload_root(instance: dg.DagsterInstance, base_dir: str | None = None) -> Path:
    return Path(base_dir) if base_dir else Path(instance.storage_directory()) / PAYLOAD_FOLDER


def discard_run_payloads(
    instance: dg.DagsterInstance, run_id: str, base_dir: str | None = None
) -> None:
    """Remove one run's payload folder (its predictions are stored; nothing reads them again)."""
    shutil.rmtree(payload_root(instance, base_dir) / run_id, ignore_errors=True)


class TransientPickleIOManager(dg.ConfigurableIOManager):
    """Pickles step outputs per run; see the module docstring for when they are removed."""

    base_dir: str | None = None
    retention_hours: float = 168.0

    def discard_run(self, run_id: str, instance: dg.DagsterInstance) -> None:
        """Remove the run's payloads (its predictions are stored)."""
        discard_run_payloads(instance, run_id, self.base_dir)

    def _path(self, root: Path, context: dg.OutputContext) -> Path:
        parts = [p.replace("/", "_") for p in context.get_identifier()]
        return root.joinpath(*parts).with_suffix(".pickle")

    def _sweep(self, root: Path) -> None:
        cutoff = time.time() - self.retention_hours * 3600
        if not root.exists():
            return
        for folder in root.iterdir():
            if folder.is_dir() and folder.stat().st_mtime < cutoff:
                shutil.rmtree(folder, ignore_errors=True)

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        root = payload_root(context.step_context.instance, self.base_dir)
        path = self._path(root, context)
        self._sweep(root)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        with open(temporary, "wb") as handle:
            pickle.dump(obj, handle, protocol=pickle.HIGHEST_PROTOCOL)
        temporary.replace(path)

    def load_input(self, context: dg.InputContext) -> Any:
        root = payload_root(context.step_context.instance, self.base_dir)
        upstream = context.upstream_output
        if upstream is None:
            raise RuntimeError(f"input {context.name} has no upstream output to load")
        path = self._path(root, upstream)
        if not path.exists():
            raise FileNotFoundError(
                f"step output {path} is gone (removed after its run stored its predictions, or "
                f"older than {self.retention_hours:g} h): re-run the whole evaluation"
            )
        with open(path, "rb") as handle:
            return pickle.load(handle)
