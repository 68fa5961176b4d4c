"""Every public statistics function shows a runnable ``Examples`` section (scipy's habit), and
each example prints what its docstring says: the docstrings are run as doctests."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import eval_pipelines.core.stats as stats

MODULES = sorted(info.name for info in pkgutil.iter_modules(stats.__path__, f"{stats.__name__}."))


def _public_functions(module: ModuleType) -> list[str]:
    return [
        name
        for name, value in vars(module).items()
        if inspect.isfunction(value)
        and value.__module__ == module.__name__
        and not name.startswith("_")
    ]


@pytest.mark.parametrize("name", MODULES)
def test_every_public_statistics_function_has_an_examples_section(name: str) -> None:
    module = importlib.import_module(name)
    missing = [
        function
        for function in _public_functions(module)
        if "\n    Examples\n    --------\n" not in (getattr(module, function).__doc__ or "")
    ]
    assert missing == []


@pytest.mark.parametrize("name", MODULES)
def test_the_examples_print_what_they_say(name: str) -> None:
    module = importlib.import_module(name)
    # Not the module's own globals, so an example imports what it uses, as a reader would.
    result = doctest.testmod(module, extraglobs={}, globs={}, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted >= len(_public_functions(module))
