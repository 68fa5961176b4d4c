"""Plug-ins: classifiers and extract node types found without editing this project.

A variant's ``config.classifier`` (and a workflow node's ``type``) is, in this order:

1. a name registered in this process (``register_classifier`` / ``register_node_type``:
   the built-ins ``knn-vote``, ``invoice2data``, ``python``, ``classify``);
2. a name an installed distribution declares in the entry-point group
   :data:`CLASSIFIER_GROUP` (``eval_pipelines.classifiers``) or :data:`NODE_GROUP`
   (``eval_pipelines.nodes``), the packaging convention pytest and Dagster use, so every
   process of a run (CLI, dispatcher, code server, run worker, Dask worker) finds it;
3. an import path ``package.module:attribute`` (the attribute may be dotted).

:func:`resolve` imports the object and checks its signature against the documented contract
(:data:`CLASSIFIER_ARGUMENTS`, or a node type's ``prepare`` and ``run``); :func:`identity_of`
says which code it is: how it was named, the object it resolved to, and the installed
distribution and version its module belongs to, or else a sha256 of the module's file.
Registered names have no identity (None): they are this project's own code, pinned by its
version. Everything here raises :class:`PluginError` (a rule, phrased for the user); callers
turn it into an :class:`~eval_pipelines.core.errors.InputError` naming their field.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from eval_pipelines.core import module_files
from eval_pipelines.core.errors import EvalPipelinesError

CLASSIFIER_GROUP = "eval_pipelines.classifiers"
NODE_GROUP = "eval_pipelines.nodes"
# The Classifier protocol: four positional arguments and the keyword-only tree.
CLASSIFIER_ARGUMENTS = ("records", "evidence", "memo", "config")
CLASSIFIER_KEYWORDS = ("tree",)
# A node type's two methods (NodeType protocol), called positionally.
NODE_METHODS = {
    "prepare": ("config", "where", "base_dir"),
    "run": ("config", "document", "upstream"),
}

_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
IMPORT_PATH = re.compile(rf"^{_DOTTED}:{_DOTTED}$")


class PluginError(EvalPipelinesError, LookupError):
    """The plug-in cannot be used; the message is the rule it breaks."""


@dataclass(frozen=True)
class Resolved:
    """A plug-in found: the object, and where it came from (``entry point`` or ``import
    path``) with the ``module:attribute`` it names."""

    value: Any
    source: str
    target: str


def is_import_path(name: str) -> bool:
    return bool(IMPORT_PATH.fullmatch(name))


def _entry_point(group: str, name: str) -> metadata.EntryPoint | None:
    """The entry point ``name`` of ``group``; refused when installed distributions declare
    the name for different objects (which one wins would depend on ``sys.path`` order, so a
    run's processes could disagree on the code that runs)."""
    found = [ep for ep in metadata.entry_points(group=group) if ep.name == name]
    targets = sorted({ep.value for ep in found})
    if len(targets) > 1:
        declared = ", ".join(
            sorted({f"{_declaring_distribution(ep)} -> {ep.value}" for ep in found})
        )
        raise PluginError(
            f"entry point {name} of group {group} is declared for different objects by "
            f"several installed distributions ({declared}); name the one you mean by its "
            "import path 'package.module:attribute'"
        )
    return found[0] if found else None


def _declaring_distribution(entry_point: metadata.EntryPoint) -> str:
    dist = getattr(entry_point, "dist", None)
    return (dist.metadata["Name"] or "unknown") if dist is not None else "unknown"


def entry_point_names(group: str) -> list[str]:
    """Names installed distributions declare in ``group``."""
    return sorted({ep.name for ep in metadata.entry_points(group=group)})


def _load(target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    if module_name == "__main__":
        raise PluginError(
            "an object of __main__ cannot be imported by the run's other processes; put it "
            "in a module on sys.path or in an installed package"
        )
    value: Any = _import_current(module_name)
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise PluginError(f"module {module_name} has no attribute {attribute}")
        value = getattr(value, part)
    return value


def _import_current(module_name: str) -> Any:
    """The module as its file is now: imported again when its file changed since this
    process imported it (as a new process would), so the code that runs is the code whose
    hash :func:`identity_of` pins."""
    module_files.forget_if_edited(module_name, _file_hash)
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # the user's module: any failure is "cannot be imported"
        raise PluginError(
            f"module {module_name} cannot be imported ({type(error).__name__}: {error})"
        ) from None
    module_files.remember_import(module_name, _file_hash)
    return module


def find(name: str, group: str) -> Resolved:
    """The object an entry-point name of ``group`` or an import path names (not checked).

    Raises
    ------
    PluginError
        Neither an installed entry-point name nor an importable ``module:attribute``.
    """
    entry_point = _entry_point(group, name)
    if entry_point is not None:
        return Resolved(_load(entry_point.value), "entry point", entry_point.value)
    if is_import_path(name):
        return Resolved(_load(name), "import path", name)
    installed = entry_point_names(group)
    raise PluginError(
        f"not a registered name, not an entry point of group {group} (installed: "
        f"{installed}) and not an import path 'package.module:attribute'"
    )


def _accepts(function: Callable[..., Any], positional: int, keywords: tuple[str, ...]) -> bool:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return False
    try:
        signature.bind(*([None] * positional), **dict.fromkeys(keywords))
    except TypeError:
        return False
    return True


def check_classifier(value: Any) -> Callable[..., Any]:
    """``value`` if it can be called as the Classifier protocol says:
    ``(records, evidence, memo, config, *, tree) -> list[Prediction]``."""
    if not callable(value):
        raise PluginError(f"is not callable (it is a {type(value).__name__})")
    if not _accepts(value, len(CLASSIFIER_ARGUMENTS), CLASSIFIER_KEYWORDS):
        raise PluginError(
            f"does not take the classifier arguments ({', '.join(CLASSIFIER_ARGUMENTS)}, *, "
            f"{', '.join(CLASSIFIER_KEYWORDS)}); its signature is {_signature(value)}"
        )
    return value  # type: ignore[no-any-return]


def check_node_type(value: Any) -> Any:
    """A node type object from ``value``: a class is instantiated without arguments; the
    object must have ``prepare(config, where, base_dir)`` and ``run(config, document,
    upstream)``."""
    if inspect.isclass(value):
        try:
            value = value()
        except Exception as error:
            raise PluginError(
                f"class {value.__name__} cannot be instantiated without arguments "
                f"({type(error).__name__}: {error})"
            ) from None
    for method, arguments in NODE_METHODS.items():
        function = getattr(value, method, None)
        if not callable(function):
            raise PluginError(
                f"is not a node type: it has no method {method}({', '.join(arguments)})"
            )
        if not _accepts(function, len(arguments), ()):
            raise PluginError(
                f"is not a node type: {method} does not take ({', '.join(arguments)}); its "
                f"signature is {_signature(function)}"
            )
    return value


def _signature(function: Any) -> str:
    try:
        return str(inspect.signature(function))
    except (TypeError, ValueError):
        return "unknown"


def resolve_classifier(name: str) -> tuple[Callable[..., Any], Resolved]:
    """A plug-in classifier by entry-point name or import path, checked."""
    found = find(name, CLASSIFIER_GROUP)
    return check_classifier(found.value), found


def resolve_node_type(name: str) -> tuple[Any, Resolved]:
    """A plug-in node type by entry-point name or import path, checked (a class is
    instantiated)."""
    found = find(name, NODE_GROUP)
    return check_node_type(found.value), found


def identity_of(name: str, found: Resolved) -> dict[str, str]:
    """Which code a plug-in is: ``{"name", "source", "target"}`` plus ``distribution`` and
    ``version`` when its module belongs to an installed distribution, else ``sha256`` (the
    first 16 hex digits of the module file's hash)."""
    module_name = found.target.partition(":")[0]
    identity = {"name": name, "source": found.source, "target": found.target}
    distribution = _distribution_of(module_name)
    if distribution is not None:
        identity["distribution"] = distribution[0]
        identity["version"] = distribution[1]
    else:
        identity["sha256"] = module_file_hash(module_name)
    return identity


def _distribution_of(module_name: str) -> tuple[str, str] | None:
    top = module_name.partition(".")[0]
    names = metadata.packages_distributions().get(top, [])
    if not names:
        return None
    name = sorted(names)[0]
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    return dist.metadata["Name"] or name, dist.version


def module_file_hash(module_name: str) -> str:
    """The first 16 hex digits of the sha256 of the module's file as it is now."""
    return _file_hash(sys.modules.get(module_name) or _import_current(module_name))


def _file_hash(module: Any) -> str:
    try:
        return module_files.file_hash(module)
    except OSError as error:
        raise PluginError(f"the file of module {module.__name__} cannot be read: {error}") from None


def check_pinned(
    name: str,
    pinned: dict[str, str] | None,
    group: str = CLASSIFIER_GROUP,
    *,
    pinned_when: str = "the evaluation was registered",
    remedy: str = "start a new evaluation to evaluate the new code",
) -> None:
    """Refuse to run a plug-in whose identity is no longer the one pinned ``pinned_when``
    (another version installed, its module edited since): its results would be reported
    under an identity they do not have."""
    if pinned is None:
        return
    now = identity_of(name, find(name, group))
    if now != pinned:
        raise PluginError(
            f"plug-in {name} changed since {pinned_when} (pinned {pinned}, now {now}); {remedy}"
        )
