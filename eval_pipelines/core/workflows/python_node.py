"""The ``python`` node: a function of yours turns the document into output fields.

Configuration (the node mapping besides ``id``, ``type``, ``cost``, ``schema``)::

    function: my_package.extract:invoice_fields   # "module:attribute", importable
    options: {threshold: 0.5}                     # optional, passed as options=

The function is called as ``function(document, upstream, options=options)`` with the
:class:`~eval_pipelines.core.workflows.nodes.Document`, the raw outputs of the nodes before
it (by node id), and a copy of ``options``; it returns a mapping keyed by the schema's
``source`` names. The revision pins the reference and the options, not the function's code.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.workflows.nodes import Document, NodeFailed, reject_unknown_keys
from eval_pipelines.core.workflows.output import to_jsonable

CONFIG_KEYS = ("function", "options")
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
FUNCTION_PATTERN = re.compile(rf"^{_DOTTED}:{_DOTTED}$")


class PythonNode:
    """Node type ``python``."""

    def prepare(self, config: dict[str, Any], where: str, base_dir: Path) -> dict[str, Any]:
        reject_unknown_keys(config, CONFIG_KEYS, where)
        reference = config.get("function")
        if not isinstance(reference, str) or not FUNCTION_PATTERN.fullmatch(reference):
            raise InputError(
                f"{where}.function",
                reference,
                "a function reference is 'package.module:function' (importable)",
            )
        try:
            load_function(reference)
        except LookupError as error:
            raise InputError(f"{where}.function", reference, str(error)) from None
        options = config.get("options", {})
        if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
            raise InputError(f"{where}.options", options, "a mapping with string keys")
        # Options are part of the revision's content, so they must hash like the JSON they
        # are stored as.
        if to_jsonable(options) != options:
            raise InputError(
                f"{where}.options", options, "only text, numbers, true/false, lists and mappings"
            )
        return {"function": reference, "options": options}

    def run(
        self,
        config: dict[str, Any],
        document: Document,
        upstream: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, Any]:
        reference = config["function"]
        try:
            function = load_function(reference)
        except LookupError as error:
            raise NodeFailed(f"{reference}: {error}") from None
        try:
            result = function(document, upstream, options=dict(config.get("options", {})))
        except Exception as error:  # user code: any failure is this document's failure
            raise NodeFailed(f"{reference} raised {type(error).__name__}: {error}") from None
        if not isinstance(result, Mapping):
            raise NodeFailed(
                f"{reference} returned {type(result).__name__}; it must return a mapping "
                "of output names to values"
            )
        return to_jsonable(result)


def load_function(reference: str) -> Callable[..., Any]:
    """Import ``module:attribute`` (the attribute may be dotted, e.g. ``Class.method``).

    Raises
    ------
    LookupError
        The module cannot be imported, the attribute is missing, or it is not callable; the
        message says which.
    """
    module_name, _, attribute = reference.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as error:
        raise LookupError(
            f"module {module_name} cannot be imported ({type(error).__name__}: {error})"
        ) from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise LookupError(f"{module_name} has no attribute {attribute}") from None
        target = getattr(target, part)
    if not callable(target):
        raise LookupError(f"{reference} is not callable (it is a {type(target).__name__})")
    return target
