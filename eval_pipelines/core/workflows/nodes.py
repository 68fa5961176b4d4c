"""Extract node types: how a node's configuration is prepared (validated, made
self-contained) and how it turns a document into raw output.

A node type is registered by name; the workflow file's ``type`` picks it. Preparing happens
once, when a revision is saved: everything the node needs (templates, the function's
reference) is folded into its configuration, so the revision's content hash pins it.
"""

from __future__ import annotations

from collections.abc import Mapping
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

    def __init__(self, message: str, *, cacheable: bool = True) -> None:
        super().__init__(message)
        self.cacheable = cacheable


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
