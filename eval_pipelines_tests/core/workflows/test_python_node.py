"""The python node: a referenced function is checked when the workflow is saved and called
with the document, the upstream outputs and its options."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.workflows.documents import document_from_text
from eval_pipelines.core.workflows.nodes import NodeFailed
from eval_pipelines.core.workflows.python_node import PythonNode
from eval_pipelines_tests.helpers.user_code import (
    DROPS_CUSTOMER,
    KEEPS_CUSTOMER,
    MODULE,
    write_user_module,
)

HERE = "eval_pipelines_tests.core.workflows.test_python_node"
NODE = PythonNode()
NOT_CALLABLE = 42


def total_line(
    document: Any, upstream: Mapping[str, Mapping[str, Any]], *, options: dict[str, Any]
) -> dict[str, Any]:
    """A user function: the line after the configured label, plus what upstream found."""
    label = options.get("label", "Total:")
    line = next(line for line in document.text.splitlines() if line.startswith(label))
    return {
        "total": line.removeprefix(label).strip(),
        "issued": dt.date(2024, 3, 15),
        "seen_upstream": sorted(upstream),
    }


def broken(document: Any, upstream: Any, *, options: dict[str, Any]) -> dict[str, Any]:
    raise KeyError("vendor")


def returns_list(document: Any, upstream: Any, *, options: dict[str, Any]) -> list[str]:
    return ["not", "a", "mapping"]


def prepare(config: dict[str, Any]) -> dict[str, Any]:
    return NODE.prepare(config, "nodes[1]", Path("."))


def test_prepare_keeps_the_reference_and_the_options() -> None:
    config = prepare({"function": f"{HERE}:total_line", "options": {"label": "Sum:"}})

    # ... and the hash of the module's source file, so an edit of the code is a new revision.
    source = {
        "module": HERE,
        "sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16],
    }
    assert config == {
        "function": f"{HERE}:total_line",
        "options": {"label": "Sum:"},
        "source": source,
    }
    assert prepare({"function": f"{HERE}:total_line"})["options"] == {}


@pytest.mark.exhaustive
def test_run_calls_the_function_with_document_upstream_and_options() -> None:
    config = prepare({"function": f"{HERE}:total_line", "options": {"label": "Sum:"}})
    document = document_from_text("d.txt", "ACME\nSum: 12.50 EUR\n")

    output = NODE.run(config, document, {"ocr": {"text": "..."}})

    # Dates come back as ISO text, so the output is JSON like every node's.
    assert output == {"total": "12.50 EUR", "issued": "2024-03-15", "seen_upstream": ["ocr"]}


@pytest.mark.parametrize(
    ("reference", "rule"),
    [
        ("total_line", "a function reference is 'package.module:function' (importable)"),
        ("pkg.mod:fn:extra", "a function reference is 'package.module:function' (importable)"),
        ("no_such_package_xyz.mod:fn", "module no_such_package_xyz.mod cannot be imported"),
        (f"{HERE}:missing", f"{HERE} has no attribute missing"),
        (f"{HERE}:NOT_CALLABLE", f"{HERE}:NOT_CALLABLE is not callable (it is a int)"),
    ],
)
def test_bad_function_references_are_refused(reference: str, rule: str) -> None:
    with pytest.raises(InputError) as raised:
        prepare({"function": reference})

    assert raised.value.field == "nodes[1].function"
    assert raised.value.value == reference
    assert raised.value.rule.startswith(rule)


def test_bad_options_and_unknown_keys_are_refused() -> None:
    with pytest.raises(InputError) as raised:
        prepare({"function": f"{HERE}:total_line", "options": ["label"]})
    assert raised.value.field == "nodes[1].options"

    with pytest.raises(InputError) as raised:
        prepare({"function": f"{HERE}:total_line", "options": {"since": dt.date(2024, 1, 1)}})
    assert raised.value.field == "nodes[1].options"

    with pytest.raises(InputError) as raised:
        prepare({"function": f"{HERE}:total_line", "templates": []})
    assert raised.value.field == "nodes[1].templates"
    assert raised.value.rule == "unknown key; allowed: function, options, time_limit"


def test_a_raising_function_fails_the_node_with_its_error() -> None:
    config = prepare({"function": f"{HERE}:broken"})

    with pytest.raises(NodeFailed) as raised:
        NODE.run(config, document_from_text("d.txt", "x"), {})

    assert str(raised.value) == f"{HERE}:broken raised KeyError: 'vendor'"


@pytest.mark.exhaustive
def test_a_function_must_return_a_mapping() -> None:
    config = prepare({"function": f"{HERE}:returns_list"})

    with pytest.raises(NodeFailed, match="returned list; it must return a mapping"):
        NODE.run(config, document_from_text("d.txt", "x"), {})


WORKFLOW_WITH_FUNCTION = {
    "kind": "extract",
    "nodes": [
        {
            "id": "fields",
            "type": "python",
            "function": f"{MODULE}:fields",
            "schema": {
                "fields": [
                    {"id": "number", "name": "Number", "source": "number"},
                    {"id": "customer", "name": "Customer", "source": "customer"},
                ]
            },
        }
    ],
}


def test_the_module_source_is_part_of_the_revision_and_the_cache_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eval_pipelines.core.workflows.definition import parse_workflow

    write_user_module(tmp_path, monkeypatch, KEEPS_CUSTOMER)
    before = parse_workflow(WORKFLOW_WITH_FUNCTION, name="w", base_dir=tmp_path)
    write_user_module(tmp_path, monkeypatch, DROPS_CUSTOMER)
    after = parse_workflow(WORKFLOW_WITH_FUNCTION, name="w", base_dir=tmp_path)

    # Same file, same reference, same options: only the function's code changed.
    assert after.revision != before.revision
    assert after.nodes[0].chain_hash != before.nodes[0].chain_hash
    assert before.nodes[0].config["source"]["module"] == "user_fields"
    # Saving it again unchanged is the same revision.
    assert parse_workflow(WORKFLOW_WITH_FUNCTION, name="w", base_dir=tmp_path) == after


def test_a_module_changed_since_the_revision_was_saved_fails_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = write_user_module(tmp_path, monkeypatch, KEEPS_CUSTOMER)
    config = prepare({"function": reference})
    document = document_from_text("d.txt", "x")
    assert NODE.run(config, document, {}) == {"number": "INV-1", "customer": "Acme"}

    write_user_module(tmp_path, monkeypatch, DROPS_CUSTOMER)

    # Running the old revision with the new code would score code the revision does not pin.
    with pytest.raises(NodeFailed) as raised:
        NODE.run(config, document, {})
    assert str(raised.value).startswith(
        f"the source of module user_fields changed since this revision was saved "
        f"(pinned {config['source']['sha256']}, now "
    )
    assert str(raised.value).endswith("save the workflow again to gate the new code")


def test_a_module_of_the_same_name_in_another_folder_runs_as_this_process_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Step workers are kept between steps. One that imported ``user_fields`` from one folder
    must not answer a step whose process now finds ``user_fields`` in another folder with the
    old folder's code (the file there unchanged): the output would be scored under a revision
    that pins the other file. Found in CI, where a golden test's steps got another test's
    function from a kept worker."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    document = document_from_text("d.txt", "x")
    reference = write_user_module(first, monkeypatch, DROPS_CUSTOMER)
    assert NODE.run(prepare({"function": reference}), document, {}) == {"number": "INV-1"}

    write_user_module(second, monkeypatch, KEEPS_CUSTOMER)
    config = prepare({"function": reference})

    assert config["source"]["sha256"] == hashlib.sha256(KEEPS_CUSTOMER.encode()).hexdigest()[:16]
    assert NODE.run(config, document, {}) == {"number": "INV-1", "customer": "Acme"}


def test_a_worker_that_finds_another_file_than_this_process_fails_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This process has ``user_fields`` from one folder imported while its ``sys.path`` now
    finds another: the revision pins the imported file, so the worker, which can only import
    the other, fails the step (not cached) instead of running code the revision does not pin."""
    first, second = tmp_path.resolve() / "first", tmp_path.resolve() / "second"
    first.mkdir()
    second.mkdir()
    reference = write_user_module(first, monkeypatch, KEEPS_CUSTOMER)
    config = prepare({"function": reference})
    monkeypatch.syspath_prepend(str(second))
    (second / f"{MODULE}.py").write_text(DROPS_CUSTOMER, encoding="utf-8")

    with pytest.raises(NodeFailed) as raised:
        NODE.run(config, document_from_text("d.txt", "x"), {})

    assert str(raised.value) == (
        f"the step's worker process imported {MODULE} from {second / MODULE}.py (sha256 "
        f"{hashlib.sha256(DROPS_CUSTOMER.encode()).hexdigest()[:16]}), not {first / MODULE}.py "
        f"(sha256 {config['source']['sha256']}) as the run's process does: the step is not "
        "run on code the revision does not pin"
    )
    assert raised.value.cacheable is False
