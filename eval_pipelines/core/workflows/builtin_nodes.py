"""The node types every workflow can use; importing this module registers them."""

from __future__ import annotations

from eval_pipelines.core.workflows.chat_node import ChatNode
from eval_pipelines.core.workflows.classify_node import ClassifyNode
from eval_pipelines.core.workflows.invoice2data_node import Invoice2DataNode
from eval_pipelines.core.workflows.nodes import register_node_type
from eval_pipelines.core.workflows.python_node import PythonNode

register_node_type("invoice2data", Invoice2DataNode())
register_node_type("python", PythonNode())
register_node_type("classify", ClassifyNode())
register_node_type("chat", ChatNode())
