"""Workflow files committed under a folder (``data/workflows/NAME.yaml``): the file's stem is
the workflow's name, its content a revision."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.files import read_yaml
from eval_pipelines.core.workflows.definition import Workflow, parse_workflow

SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class WorkflowFile:
    """A committed workflow file: parsed, or the one-line reason it could not be."""

    path: Path
    name: str
    workflow: Workflow | None
    error: str | None


def load_workflow_file(path: Path, *, name: str | None = None) -> Workflow:
    """Parse one workflow file (its stem names the workflow unless ``name`` is given)."""
    document = read_yaml(path, "file")
    return parse_workflow(document, name=name or path.stem, base_dir=path.parent)


def scan_workflow_files(folder: Path, *, limit: int = 100) -> list[WorkflowFile]:
    """Every workflow file in ``folder`` (not recursive), in name order, at most ``limit``."""
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(p for p in folder.iterdir() if p.suffix in SUFFIXES)[:limit]:
        try:
            found.append(WorkflowFile(path, path.stem, load_workflow_file(path), None))
        except InputError as error:
            found.append(WorkflowFile(path, path.stem, None, str(error)))
    return found
