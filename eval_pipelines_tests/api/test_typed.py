"""A typed API: every public function of ``eval_pipelines.api`` declares what it returns, and
what it returns is a frozen result (or a plain value, a list of them, None), never an untyped
``dict[str, Any]`` or ``Any``; its parameters are typed, none ``Any``. The JSON a command
prints is the result's ``to_json()``, built once, where the CLI prints."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import types
import typing
from typing import Any

import pytest

from eval_pipelines import api
from eval_pipelines.core.results import JsonResult, camel_case, json_field

API_MODULES = sorted(
    info.name
    for info in pkgutil.iter_modules(api.__path__, "eval_pipelines.api.")
    if not info.name.rsplit(".", 1)[1].startswith("_")
)


def _public_functions(module: types.ModuleType) -> list[tuple[str, Any]]:
    return [
        (name, value)
        for name, value in vars(module).items()
        if inspect.isfunction(value)
        and value.__module__ == module.__name__
        and not name.startswith("_")
    ]


def _untyped(annotation: Any) -> bool:
    """``Any``, a bare or ``str``-keyed dict of ``Any``, anywhere in the annotation."""
    if annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    if origin is dict or annotation is dict:
        return True
    return any(_untyped(argument) for argument in typing.get_args(annotation))


@pytest.mark.parametrize("module_name", API_MODULES)
def test_public_api_functions_return_typed_results(module_name: str) -> None:
    module = importlib.import_module(module_name)
    untyped = []
    for name, function in _public_functions(module):
        hints = typing.get_type_hints(function)
        if "return" not in hints:
            untyped.append(f"{name}: no return annotation")
        elif _untyped(hints["return"]):
            untyped.append(f"{name} returns {hints['return']}")
        untyped += [
            f"{name}({parameter}: Any)"
            for parameter, hint in hints.items()
            if parameter != "return" and hint is Any
        ]
    assert not untyped, f"{module_name}:\n" + "\n".join(untyped)


@dataclasses.dataclass(frozen=True)
class _Inner(JsonResult):
    run_id: str


@dataclasses.dataclass(frozen=True)
class _Outer(JsonResult):
    eval_id: str
    runs: tuple[_Inner, ...]
    n_used: int = json_field("nUsed")
    reason: str | None = json_field(omit_none=True, default=None)


def test_a_result_is_frozen_and_its_json_is_the_camel_case_document() -> None:
    result = _Outer("e1", (_Inner("r1"),), 3)
    assert result.to_json() == {"evalId": "e1", "runs": [{"runId": "r1"}], "nUsed": 3}
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.eval_id = "e2"  # type: ignore[misc]
    assert camel_case("records_version") == "recordsVersion"


@pytest.mark.parametrize("module_name", API_MODULES)
def test_wait_defaults_to_submit_and_return(module_name: str) -> None:
    """``wait=`` means one thing (docs/api.md, Runs and waiting): only a call that can return
    before its run ends takes it, and ``wait=False``, its default, submits and returns. A call
    whose result is the run's answer always waits and takes no ``wait=`` (``run_query`` took
    ``wait=True`` for where its run executes, and waited either way)."""
    module = importlib.import_module(module_name)
    waits_by_default = [
        name
        for name, function in _public_functions(module)
        if "wait" in (parameters := inspect.signature(function).parameters)
        and parameters["wait"].default is not False
    ]
    assert waits_by_default == []
