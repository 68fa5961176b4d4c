"""Extract node types: how a node's configuration is prepared (validated, made
self-contained) and how it turns a document into raw output.

A node type is registered by name; the workflow file's ``type`` picks it. Preparing happens
once, when a revision is saved: everything the node needs (templates, the function's
reference) is folded into its configuration, so the revision's content hash pins it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from eval_pipelines.core.errors import EvalPipelinesError, InputError


@dataclass(frozen=True)
class Document:
    """A document's content as nodes see it.

    ``document_id`` is the content hash of the file's bytes; ``media_type`` is ``pdf`` or
    ``text``; ``text`` is the text layer (pdfplumber for a PDF).
    """

    document_id: str
    name: str
    media_type: str
    text: str
    path: Path | None = None


class NodeFailed(EvalPipelinesError, RuntimeError):
    """The node produced no output for this document; the message says why (no template
    matched, the user function raised, ...).

    A failure is cached like an output (the same configuration on the same document fails
    the same way, and is not charged again) unless ``cacheable`` is false: a failure that
    says nothing about the step itself (its code changed under the revision, say) runs again.
    """

    def __init__(
        self, message: str, *, cacheable: bool = True, usage: StepUsage | None = None
    ) -> None:
        super().__init__(message)
        self.cacheable = cacheable
        self.usage = usage  # a metered step's calls made before it failed (they were paid)


@dataclass(frozen=True)
class StepUsage:
    """What a metered step's model calls did (a ``chat`` node: one call per document).

    ``calls`` were answered by the endpoint now (paid), ``from_cache`` were served from a
    cache (the ``chat_calls`` cache, or the whole step from the step cache: free), ``failed``
    got no answer. Tokens are the endpoint's counts for the calls made now; ``cost`` is theirs
    from the node's price table, None when the model has no price (``cost_note`` says so).
    """

    calls: int = 0
    from_cache: int = 0
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = 0.0
    cost_note: str | None = None

    def __add__(self, other: StepUsage) -> StepUsage:
        cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        return StepUsage(
            self.calls + other.calls,
            self.from_cache + other.from_cache,
            self.failed + other.failed,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            cost,
            self.cost_note or other.cost_note,
        )

    def summary(self) -> str:
        """One line: ``model calls: 3 made, 0 from cache, 0 failed; tokens 812 in, 96 out;
        cost 0.000180`` (``cost unknown (...)`` without a price)."""
        cost = (
            f"cost {self.cost:.6g}"
            if self.cost is not None
            else (f"cost unknown ({self.cost_note})" if self.cost_note else "cost unknown")
        )
        return (
            f"model calls: {self.calls} made, {self.from_cache} from cache, {self.failed} "
            f"failed; tokens {self.input_tokens} in, {self.output_tokens} out; {cost}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "fromCache": self.from_cache,
            "failed": self.failed,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "cost": self.cost,
            "costNote": self.cost_note,
        }


SERVED_FROM_STEP_CACHE = StepUsage(from_cache=1)


@dataclass(frozen=True)
class StepContext:
    """What a run hands to the steps of a metered node type: ``call_chat(settings,
    requests, stop)`` answers chat requests through the run's warehouse cache (see
    :mod:`eval_pipelines.stages.workflow_chat`); None where no run gives one."""

    call_chat: Callable[..., Any] | None = None


class MeteredNodeType(Protocol):
    """A node type whose steps call a model and say what that cost: the executor calls
    :meth:`run_metered` (with the run's :class:`StepContext`) instead of ``run``, and counts a
    step served from the step cache as one call from cache."""

    def run_metered(
        self,
        config: dict[str, Any],
        document: Document,
        upstream: Mapping[str, Mapping[str, Any]],
        context: StepContext,
    ) -> tuple[dict[str, Any], StepUsage]:
        """Raw output and usage; raises :class:`NodeFailed` (with its ``usage``)."""
        ...


def is_metered(node_type: object) -> bool:
    return callable(getattr(node_type, "run_metered", None))


class NodeType(Protocol):
    def prepare(self, config: dict[str, Any], where: str, base_dir: Path) -> dict[str, Any]:
        """Validate the node's configuration (raising :class:`InputError` naming
        ``where``'s sub-path) and return it self-contained and JSON-serialisable."""
        ...

    def run(
        self,
        config: dict[str, Any],
        document: Document,
        upstream: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, Any]:
        """Raw output keyed by the schema's ``source`` names (tables: lists of row mappings
        keyed by column sources). Raises :class:`NodeFailed` when there is nothing to give."""
        ...


def reject_unknown_keys(mapping: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    """A typo in a workflow file must be an error, never a silently ignored key."""
    for key in mapping:
        if key not in allowed:
            raise InputError(
                f"{where}.{key}" if where else str(key),
                mapping[key],
                f"unknown key; allowed: {', '.join(allowed)}",
            )


NODE_TYPES: dict[str, NodeType] = {}


def register_node_type(name: str, node_type: NodeType) -> None:
    NODE_TYPES[name] = node_type


def node_type_for(name: str) -> NodeType:
    """The registered node type, else the plug-in ``name`` names (an entry point of
    ``eval_pipelines.nodes`` or ``package.module:Class``/``:object``, see core.plugins)."""
    if name in NODE_TYPES:
        return NODE_TYPES[name]
    from eval_pipelines.core.plugins import PluginError, resolve_node_type

    try:
        node_type, _ = resolve_node_type(name)
    except PluginError as error:
        raise NodeFailed(f"node type {name}: {error}", cacheable=False) from None
    return node_type  # type: ignore[no-any-return]
