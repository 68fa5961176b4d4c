"""Workflow files: parsed and validated once, then content-addressed.

A workflow is a named pipeline of nodes that turns an input into output fields::

    kind: extract                 # or classify
    description: Supplier invoices
    nodes:
      - id: invoice
        type: invoice2data        # or python (function: "module:function"), or chat
        templates: [...]          # invoice2data templates, inline or template_files: [...]
        cost: 1                   # cost units charged per executed (not cached) step
        schema:
          fields:
            - {id: invoice_number, name: Invoice number, source: invoice_number}
            - id: lines
              name: Line items
              type: table
              source: lines       # every field and column names the key the node outputs
              columns: [{id: sku, name: SKU, source: sku}, {id: qty, name: Qty, source: qty}]

The revision id is the hash of the name and the prepared content (templates and referenced
files folded in), so saving identical content twice is the same revision, and any change is
a new one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import eval_pipelines.core.workflows.builtin_nodes  # noqa: F401
from eval_pipelines.core.errors import ConflictError, InputError
from eval_pipelines.core.hashing import hash_json
from eval_pipelines.core.inputs import check_name, is_finite_number
from eval_pipelines.core.plugins import (
    CLASSIFIER_GROUP,
    NODE_GROUP,
    PluginError,
    check_pinned,
    identity_of,
    resolve_node_type,
)
from eval_pipelines.core.workflows.classify_node import CLASSIFIER_PLUGIN
from eval_pipelines.core.workflows.nodes import NODE_TYPES, node_type_for, reject_unknown_keys
from eval_pipelines.core.workflows.schema import Schema, parse_schema

KINDS = ("extract", "classify")
REVISION_LENGTH = 12
DEFAULT_COST = 1.0
CLASSIFY_NODE = "classify"


def validate_name(name: str, what: str = "workflow") -> str:
    """Workflow and golden-set names become file names and tags: the one name pattern."""
    return check_name(name, what, "a name")


@dataclass(frozen=True)
class Node:
    """One step of a workflow. ``chain_hash`` covers this node's configuration and every
    node before it: a cached output is reusable exactly when it is unchanged."""

    id: str
    type: str
    config: dict[str, Any]
    schema: Schema
    cost: float
    chain_hash: str
    # A plug-in node type's identity as pinned when the revision was saved (None: built-in).
    plugin: dict[str, str] | None = None


@dataclass(frozen=True)
class Workflow:
    name: str
    kind: str
    description: str
    nodes: tuple[Node, ...]
    content: dict[str, Any]
    revision: str

    def node(self, node_id: str) -> Node | None:
        return next((n for n in self.nodes if n.id == node_id), None)

    def scored_node(self, node_id: str | None) -> Node:
        """The node a golden set scores: named, or the only one."""
        if node_id is None:
            if len(self.nodes) != 1:
                raise InputError(
                    "node",
                    None,
                    f"workflow {self.name} has {len(self.nodes)} nodes "
                    f"({', '.join(n.id for n in self.nodes)}); name the one the set scores",
                )
            return self.nodes[0]
        found = self.node(node_id)
        if found is None:
            raise InputError(
                "node",
                node_id,
                f"workflow {self.name} has no such node "
                f"(its nodes: {', '.join(n.id for n in self.nodes)})",
            )
        return found


CLASSIFY_SCHEMA = {"fields": [{"id": "code", "name": "code", "type": "string", "source": "code"}]}


def parse_workflow(document: Any, *, name: str, base_dir: Path) -> Workflow:
    """Validate a workflow document and prepare every node; raises :class:`InputError`
    naming the offending path (``nodes[1].templates[0].fields.amount``)."""
    validate_name(name)
    if not isinstance(document, dict):
        raise InputError("workflow", document, "must be a mapping with 'kind' and 'nodes'")
    reject_unknown_keys(document, ("kind", "description", "nodes", "name"), "")
    kind = document.get("kind", "extract")
    if kind not in KINDS:
        raise InputError("kind", kind, f"must be one of {', '.join(KINDS)}")
    description = document.get("description") or ""
    if not isinstance(description, str):
        raise InputError("description", description, "must be a string")
    raw_nodes = document.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise InputError("nodes", raw_nodes, "a workflow has a non-empty list of nodes")
    prepared: list[dict[str, Any]] = []
    node_ids: set[str] = set()
    for index, raw in enumerate(raw_nodes):
        where = f"nodes[{index}]"
        if not isinstance(raw, dict):
            raise InputError(where, raw, "a node is a mapping with id, type and schema")
        node_id = raw.get("id")
        if not isinstance(node_id, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,63}", node_id):
            raise InputError(f"{where}.id", node_id, "a letter then up to 63 letters, digits, '_'")
        if node_id in node_ids:
            raise InputError(f"{where}.id", node_id, "node ids must be unique")
        node_ids.add(node_id)
        node_type = raw.get("type")
        allowed = (
            [CLASSIFY_NODE] if kind == "classify" else sorted(set(NODE_TYPES) - {CLASSIFY_NODE})
        )
        plugin: dict[str, str] | None = None
        if node_type not in allowed:
            if kind == "classify" or not isinstance(node_type, str) or node_type in NODE_TYPES:
                raise InputError(f"{where}.type", node_type, f"must be one of {', '.join(allowed)}")
            try:
                _, found = resolve_node_type(node_type)
                plugin = identity_of(node_type, found)
            except PluginError as error:
                raise InputError(
                    f"{where}.type",
                    node_type,
                    f"must be one of {', '.join(allowed)}, or a plug-in: {error}",
                ) from None
        cost = raw.get("cost", DEFAULT_COST)
        if not is_finite_number(cost) or cost < 0:
            raise InputError(f"{where}.cost", cost, "cost units per step: a number >= 0")
        schema_doc = CLASSIFY_SCHEMA if kind == "classify" else raw.get("schema")
        schema = parse_schema(schema_doc, f"{where}.schema", require_source=True)
        config = {k: v for k, v in raw.items() if k not in ("id", "type", "cost", "schema")}
        implementation = node_type_for(node_type)
        if getattr(implementation, "uses_schema", False):
            # Its output depends on the schema (a chat node's prompt and answer format): the
            # configuration, hence the step's cache key, must cover it.
            config = {**config, "schema": schema.to_json()}
        config = implementation.prepare(config, where, base_dir)
        prepared.append(
            {
                "id": node_id,
                "type": node_type,
                "cost": float(cost),
                "config": config,
                "schema": schema.to_json(),
                # A plug-in's identity is part of the revision's content (and id).
                **({"plugin": plugin} if plugin is not None else {}),
            }
        )
    if kind == "classify" and len(prepared) != 1:
        raise InputError("nodes", len(prepared), "a classify workflow has exactly one node")
    content = {"kind": kind, "description": description, "nodes": prepared}
    return workflow_from_content(name, content)


def workflow_from_content(name: str, content: dict[str, Any]) -> Workflow:
    """A stored revision's workflow (its content is already prepared and validated)."""
    nodes = []
    chain: list[Any] = []
    for raw in content["nodes"]:
        # A plug-in's identity is part of the chain: outputs cached under one version of its
        # code are not served to a revision pinning another. Built-in nodes hash as before.
        chain.append([raw["type"], raw["config"], *([raw["plugin"]] if "plugin" in raw else [])])
        nodes.append(
            Node(
                id=raw["id"],
                type=raw["type"],
                config=raw["config"],
                schema=parse_schema({"fields": raw["schema"]}, f"nodes.{raw['id']}.schema"),
                cost=float(raw["cost"]),
                chain_hash=hash_json(chain),
                plugin=raw.get("plugin"),
            )
        )
    return Workflow(
        name=name,
        kind=content["kind"],
        description=content.get("description", ""),
        nodes=tuple(nodes),
        content=content,
        revision=revision_of(name, content),
    )


def revision_of(name: str, content: dict[str, Any]) -> str:
    """The revision id: the hash of the workflow's name and prepared content (the name is in
    it so that a revision id names exactly one workflow, and one Dagster partition)."""
    return hash_json({"workflow": name, "content": content}, length=REVISION_LENGTH)


def check_plugins(workflow: Workflow) -> None:
    """Refuse to run a revision whose plug-in code is no longer the code it pinned (another
    version installed, or its module edited since the revision was saved): its outputs would
    be scored, and could open the gate, under a revision they do not belong to.

    Raises
    ------
    ConflictError
        Naming the node, the plug-in and what changed; saving the workflow again makes a new
        revision (which a gating set must pass before it can be activated).
    """
    for node in workflow.nodes:
        checks = [(node.type, node.plugin, NODE_GROUP)]
        if node.type == CLASSIFY_NODE:
            classifier = (node.config.get("config") or {}).get("classifier", "knn-vote")
            checks.append((classifier, node.config.get(CLASSIFIER_PLUGIN), CLASSIFIER_GROUP))
        for name, pinned, group in checks:
            try:
                check_pinned(
                    name,
                    pinned,
                    group,
                    pinned_when=f"revision {workflow.revision} was saved",
                    remedy="save the workflow again to make a new revision",
                )
            except PluginError as error:
                raise ConflictError(f"workflow {workflow.name}, node {node.id}: {error}") from None
