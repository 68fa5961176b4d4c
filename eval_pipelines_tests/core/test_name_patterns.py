"""Every name the package checks against a pattern refuses a trailing newline.

A pattern ending in ``$`` used with ``re.match`` also matches just before a final newline, so
``"abc\\n"`` passed as a valid case id, memo id, workflow name, table name, ... and then became
part of partition keys, file names and tags. Each check now matches the whole string.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout.memo import parse_memo_entry
from eval_pipelines.core.holdout.spec import validate_case_id
from eval_pipelines.core.tree import tree_from_parent_links
from eval_pipelines.core.workflows.definition import parse_workflow, validate_name
from eval_pipelines.core.workflows.schema import parse_schema
from eval_pipelines.storage.data_tables import check_table_name


def _memo_entry(entry_id: str) -> None:
    tree = tree_from_parent_links(pl.DataFrame({"code": ["A"], "parent": [None]}))
    parse_memo_entry(
        {"id": entry_id, "instruction": "x", "when": {"keywords": ["x"]}, "then": {"assign": "A"}},
        tree,
    )


def _schema_field(field_id: str) -> None:
    parse_schema({"fields": [{"id": field_id, "name": "Total", "type": "number"}]}, "schema")


def _workflow(node_id: str = "checks", function: str = "json:dumps") -> None:
    node = {
        "id": node_id,
        "type": "python",
        "function": function,
        "schema": {"fields": [{"id": "ok", "name": "OK", "type": "boolean", "source": "ok"}]},
    }
    parse_workflow({"kind": "extract", "nodes": [node]}, name="checks", base_dir=Path("."))


CHECKS = {
    "case id": (validate_case_id, "abc"),
    "memo id": (_memo_entry, "m_abc"),
    "workflow name": (validate_name, "abc"),
    "table name": (check_table_name, "abc"),
    "schema field id": (_schema_field, "total"),
    "workflow node id": (lambda name: _workflow(node_id=name), "checks"),
    "python function": (lambda name: _workflow(function=name), "json:dumps"),
}


@pytest.mark.parametrize("what", sorted(CHECKS))
def test_a_trailing_newline_is_refused(what: str) -> None:
    check, good = CHECKS[what]
    check(good)  # the name itself is fine
    with pytest.raises(InputError):
        check(good + "\n")


def test_no_check_in_the_package_uses_match_with_an_end_anchor() -> None:
    """``re.match``/``pattern.match`` with ``$`` is the trap above; the package uses
    ``fullmatch`` for every whole-string check (found by reading every ``.py`` file)."""
    import re

    package = Path(__file__).resolve().parents[2] / "eval_pipelines"
    offenders = [
        f"{path.relative_to(package)}:{number}"
        for path in sorted(package.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"(\bre|PATTERN|_TABLE|_TEXT)\.match\(", line)
    ]
    assert offenders == []
