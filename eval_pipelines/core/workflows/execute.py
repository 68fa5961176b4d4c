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
from eval_pipelines.core.workflows.nodes import (
    NODE_TYPES,
    SERVED_FROM_STEP_CACHE,
    Document,
    NodeFailed,
    StepContext,
    StepUsage,
    is_metered,
    node_type_for,
)
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
    the run stopped early (a node failed); ``new_cache`` holds the steps executed now;
    ``usage`` what the steps of metered nodes (``chat``) called, by node id.
    """

    document_id: str
    revision: str
    outputs: dict[str, dict[str, Any]]
    error: str | None
    executed_steps: int
    cached_steps: int
    cost_units: float
    new_cache: dict[CacheKey, CachedStep] = field(default_factory=dict)
    usage: dict[str, StepUsage] = field(default_factory=dict)

    def total_usage(self) -> StepUsage | None:
        """The usage of every metered step (None: the workflow has none that ran)."""
        if not self.usage:
            return None
        total = StepUsage()
        for usage in self.usage.values():
            total = total + usage
        return total


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
    context: StepContext | None = None,
) -> Execution:
    """Run the nodes in order (stopping after ``until``), each node seeing the outputs of
    the nodes before it. A node that fails stops the run: later nodes have nothing to work on.
    ``context`` is handed to metered node types (a ``chat`` node's client and cache).

    Raises
    ------
    StepCanceled
        The caller is stopping (see :func:`~eval_pipelines.core.workflows.step_worker.cancel_on`):
        the document was not run to the end, which is not its failure.
    """
    outputs: dict[str, dict[str, Any]] = {}
    new_cache: dict[CacheKey, CachedStep] = {}
    usage: dict[str, StepUsage] = {}
    executed = cached = 0
    cost = 0.0
    error = None
    for node in workflow.nodes:
        key = (document.document_id, node.id, node.chain_hash)
        if key in cache:
            entry = cache[key]
            cached += 1
            if is_metered(NODE_TYPES.get(node.type)):
                usage[node.id] = SERVED_FROM_STEP_CACHE
            if isinstance(entry, StepFailure):
                error = f"node {node.id}: {entry.error}{FROM_CACHE}"
                break
            outputs[node.id] = entry
        else:
            executed += 1
            cost += node.cost
            try:
                output, used = _run(node, document, outputs, context or StepContext())
                if used is not None:
                    usage[node.id] = used
            except NodeFailed as failure:
                if failure.usage is not None:
                    usage[node.id] = failure.usage
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
        usage,
    )


def _run(
    node: Node, document: Document, upstream: dict[str, dict[str, Any]], context: StepContext
) -> tuple[dict[str, Any], StepUsage | None]:
    used: StepUsage | None = None
    try:
        node_type = node_type_for(node.type)
        if is_metered(node_type):
            output, used = node_type.run_metered(  # type: ignore[attr-defined]
                node.config, document, dict(upstream), context
            )
        else:
            output = node_type.run(node.config, document, dict(upstream))
    except (NodeFailed, StepCanceled):
        raise  # a canceled step is the run stopping, not this document failing
    except Exception as error:  # a node type's own bug must not sink the other cases
        raise NodeFailed(f"{type(error).__name__}: {error}") from error
    if not isinstance(output, dict):
        raise NodeFailed(f"returned {type(output).__name__}, not a mapping", usage=used)
    return output, used
