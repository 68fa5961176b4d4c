"""A user's own module for ``python`` nodes, written under a test's folder and imported
afresh each time it is rewritten (as a new process would import it after an edit)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

MODULE = "user_fields"
KEEPS_CUSTOMER = """
def fields(document, upstream, *, options):
    return {"number": "INV-1", "customer": "Acme"}
"""
DROPS_CUSTOMER = """
def fields(document, upstream, *, options):
    return {"number": "INV-1"}
"""
WORKFLOW_YAML = f"""\
kind: extract
nodes:
  - id: fields
    type: python
    function: "{MODULE}:fields"
    schema:
      fields:
        - {{id: number, name: Number, source: number}}
        - {{id: customer, name: Customer, source: customer}}
"""


def write_user_module(folder: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> str:
    """Write (or rewrite) ``user_fields.py`` under ``folder``, forget any earlier import of
    it, and return the node's function reference. The import is undone at teardown."""
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    (folder / f"{MODULE}.py").write_text(source, encoding="utf-8")
    monkeypatch.setitem(sys.modules, MODULE, None)  # removed again at teardown
    del sys.modules[MODULE]
    importlib.invalidate_caches()
    return f"{MODULE}:fields"
