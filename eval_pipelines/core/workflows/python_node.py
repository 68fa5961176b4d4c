"""The ``python`` node: a function of yours turns the document into output fields.

Configuration (the node mapping besides ``id``, ``type``, ``cost``, ``schema``)::

    function: my_package.extract:invoice_fields   # "module:attribute", importable
    options: {threshold: 0.5}                     # optional, passed as options=
    time_limit: 30                                # seconds per step (optional, default 30)

The function is called as ``function(document, upstream, options=options)`` with the
:class:`~eval_pipelines.core.workflows.nodes.Document`, the raw outputs of the nodes before
it (by node id), and a copy of ``options``; it returns a mapping keyed by the schema's
``source`` names.

The revision pins the reference, the options and the function's code: preparing adds
``source: {module, sha256}``, the hash of the source file of the function's module, so an
edit of that module is a new revision (and a new step cache key) that the gate must pass.
Running a revision whose module has changed since it was saved fails the step rather than
scoring code the revision does not pin. Code the module imports from other modules is not
covered: keep what the function's output depends on in its module, or put a version of it in
``options``.

The function runs in a worker process with a time limit
(:mod:`~eval_pipelines.core.workflows.step_worker`), so a function that never returns fails
that document's step ("timed out after 30 s") and a canceled run kills it, instead of the
run waiting for a stuck thread. The worker imports the module from the file this process
finds (searching this process's ``sys.path`` first): again when that file changed since the
worker imported it, or when this process now finds the module in another folder; the
document, upstream outputs and options reach the function as copies.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from eval_pipelines.core import module_files
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.workflows.nodes import Document, NodeFailed, reject_unknown_keys
from eval_pipelines.core.workflows.output import to_jsonable
from eval_pipelines.core.workflows.step_worker import (
    DEFAULT_TIME_LIMIT_SECONDS,
    run_step,
    time_limit_of,
)

CONFIG_KEYS = ("function", "options", "time_limit")
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
        if reference.partition(":")[0] == "__main__":
            raise InputError(
                f"{where}.function",
                reference,
                "a function of __main__ cannot be imported by the step's worker process; "
                "put it in a module on sys.path",
            )
        try:
            load_function(reference)
            source = source_of(reference)
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
        # Only when given: revisions saved before the limit existed keep their ids.
        limit = {} if "time_limit" not in config else {"time_limit": time_limit_of(config, where)}
        return {"function": reference, "options": options, "source": source, **limit}

    def run(
        self,
        config: dict[str, Any],
        document: Document,
        upstream: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, Any]:
        reference = config["function"]
        pinned = config.get("source")  # absent in revisions saved before it was pinned
        try:
            load_function(reference)  # imported here to check it; called in the worker
            now = source_of(reference)
        except LookupError as error:
            # The environment, not the document: a fixed import must run the step again.
            raise NodeFailed(f"{reference}: {error}", cacheable=False) from None
        if pinned is not None and now != pinned:
            raise NodeFailed(
                f"the source of module {pinned['module']} changed since this revision was "
                f"saved (pinned {pinned['sha256']}, now {now['sha256']}): save the workflow "
                "again to gate the new code",
                cacheable=False,  # reverting the module must run the step again
            )
        module = sys.modules[now["module"]]
        expected = module_files.Identity(module_files.real_path(module), now["sha256"])
        return run_step(  # type: ignore[no-any-return]
            call_in_worker,
            reference,
            expected,
            [p for p in sys.path if p],
            sys.dont_write_bytecode,
            document,
            {k: dict(v) for k, v in upstream.items()},
            dict(config.get("options", {})),
            seconds=float(config.get("time_limit", DEFAULT_TIME_LIMIT_SECONDS)),
            hint=f"{reference} did not return (a loop that never ends, or a wait)",
        )


def call_in_worker(
    reference: str,
    expected: module_files.Identity,
    paths: list[str],
    dont_write_bytecode: bool,
    document: Document,
    upstream: dict[str, dict[str, Any]],
    options: dict[str, Any],
) -> dict[str, Any]:
    """The worker's side of :meth:`PythonNode.run`: import the function from the file the
    run's process has (``expected``: the file and its hash), searching its ``sys.path`` first,
    call it and return its output as JSON values.

    A kept worker may have imported a module of that name before: from another folder (the
    run's process now finds it elsewhere) or from the file before an edit. Either way it is
    imported again; should it still not be the expected file, the step fails rather than
    score code the revision does not pin."""
    sys.path[:] = paths + [p for p in sys.path if p not in paths]
    sys.dont_write_bytecode = dont_write_bytecode
    module_name = reference.partition(":")[0]
    try:
        module_files.forget_unless(module_name, expected)
        function = load_function(reference)
        imported = module_files.remember_import(module_name, _file_hash)
    except LookupError as error:
        raise NodeFailed(f"{reference}: {error}", cacheable=False) from None
    found = module_files.Identity(module_files.real_path(sys.modules[module_name]), imported)
    if found != expected:
        raise NodeFailed(
            f"the step's worker process imported {module_name} from {found.where()}, not "
            f"{expected.where()} as the run's process does: the step is not run on code "
            "the revision does not pin",
            cacheable=False,
        )
    try:
        result = function(document, upstream, options=options)
    except Exception as error:  # user code: any failure is this document's failure
        raise NodeFailed(f"{reference} raised {type(error).__name__}: {error}") from None
    if not isinstance(result, Mapping):
        raise NodeFailed(
            f"{reference} returned {type(result).__name__}; it must return a mapping "
            "of output names to values"
        )
    return to_jsonable(result)


def source_of(reference: str) -> dict[str, str]:
    """``{"module": name, "sha256": digest}`` of the referenced function's module: the hash
    of its source file's bytes as it is on disk now (a module without a file, a built-in, is
    pinned by the Python version instead)."""
    module_name = reference.partition(":")[0]
    module = sys.modules.get(module_name) or importlib.import_module(module_name)
    return {"module": module_name, "sha256": _file_hash(module)}


def _file_hash(module: ModuleType) -> str:
    try:
        return module_files.file_hash(module)
    except OSError as error:
        raise LookupError(f"the source of {module.__name__} cannot be read: {error}") from None


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
