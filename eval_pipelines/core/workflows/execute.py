"""Running a workflow revision over one document, step by step, reusing cached steps.

A step's output is reusable when its node's configuration and every node's before it are
unchanged (the node's ``chain_hash``); such a step is served from the cache and charges
nothing. A failed step is cached the same way (:class:`StepFailure`): served again, it stops
the run with its error, says it came from the cache, and charges nothing. Everything here is
pure: the caller reads the cache and stores the new entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from eval_pipelines.core.workflows.definition import Node, Workflow
from eval_pipelines.core.workflows.nodes import Document, NodeFailed, node_type_for
from eval_pipelines.core.workflows.step_worker import StepCanceled

CacheKey = tuple[str, str, str]  # (document_id, node_id, chain_hash)
FROM_CACHE = (
    " (served from cache: this step failed the same way on an earlier run; a changed "
    "configuration runs it again)"
)


@dataclass(frozen=True)
class StepFailure:
    """A step that failed, as the cache keeps it: why it produced no output."""

    error: str


CachedStep = dict[str, Any] | StepFailure


@dataclass(frozen=True)
class Execution:
    """What running the workflow over one document produced and charged.

    ``outputs`` holds each node's raw output up to the last node that ran; ``error`` says why
    the run stopped early (a node failed); ``new_cache`` holds the steps executed now.
    """

    document_id: str
    revision: str
    outputs: dict[str, dict[str, Any]]
    error: str | None
    executed_steps: int
    cached_steps: int
    cost_units: float
    new_cache: dict[CacheKey, CachedStep] = field(default_factory=dict)


def cache_keys(workflow: Workflow, document_id: str, until: str | None = None) -> list[CacheKey]:
    """The cache keys of every node up to (and including) ``until``."""
    keys = []
    for node in workflow.nodes:
        keys.append((document_id, node.id, node.chain_hash))
        if node.id == until:
            break
    return keys


def execute(
    workflow: Workflow,
    document: Document,
    cache: Mapping[CacheKey, CachedStep],
    *,
    until: str | None = None,
) -> Execution:
    """Run the nodes in order (stopping after ``until``), each node seeing the outputs of
    the nodes before it. A node that fails stops the run: later nodes have nothing to work on.

    Raises
    ------
    StepCanceled
        The caller is stopping (see :func:`~eval_pipelines.core.workflows.step_worker.cancel_on`):
        the document was not run to the end, which is not its failure.
    """
    outputs: dict[str, dict[str, Any]] = {}
    new_cache: dict[CacheKey, CachedStep] = {}
    executed = cached = 0
    cost = 0.0
    error = None
    for node in workflow.nodes:
        key = (document.document_id, node.id, node.chain_hash)
        if key in cache:
            entry = cache[key]
            cached += 1
            if isinstance(entry, StepFailure):
                error = f"node {node.id}: {entry.error}{FROM_CACHE}"
                break
            outputs[node.id] = entry
        else:
            executed += 1
            cost += node.cost
            try:
                output = _run(node, document, outputs)
            except NodeFailed as failure:
                error = f"node {node.id}: {failure}"
                if failure.cacheable:
                    new_cache[key] = StepFailure(str(failure))
                break
            outputs[node.id] = output
            new_cache[key] = output
        if node.id == until:
            break
    return Execution(
        document.document_id,
        workflow.revision,
        outputs,
        error,
        executed,
        cached,
        cost,
        new_cache,
    )


def _run(node: Node, document: Document, upstream: dict[str, dict[str, Any]]) -> dict[str, Any]:
    try:
        output = node_type_for(node.type).run(node.config, document, dict(upstream))
    except (NodeFailed, StepCanceled):
        raise  # a canceled step is the run stopping, not this document failing
    except Exception as error:  # a node type's own bug must not sink the other cases
        raise NodeFailed(f"{type(error).__name__}: {error}") from error
    if not isinstance(output, dict):
        raise NodeFailed(f"returned {type(output).__name__}, not a mapping")
    return output
