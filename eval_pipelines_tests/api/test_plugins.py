"""Plug-in classifiers and node types, found by entry-point name or import path without
editing the project: resolved and checked when an evaluation (or workflow) is registered,
their identity pinned in the spec and the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipelines_tests.helpers.cli_calls import succeeded
from eval_pipelines_tests.helpers.paths import REPO

CLI = [sys.executable, "-m", "eval_pipelines.cli.main"]
PLUGIN_MODULE = "my_plugin_classifiers"
PLUGIN_SOURCE = """
from eval_pipelines.core.holdout.classify import Prediction

NOT_CALLABLE = 42


def wrong_arguments(records):
    return []


def everything_declines(records, evidence, memo, config, *, tree):
    return [Prediction(r.record_key, None, 0.0, "declined") for r in records]
"""


@pytest.fixture
def plugin_path(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's module of classifiers on PYTHONPATH (this process and the CLI's)."""
    folder = workdir / "user_code"
    folder.mkdir()
    (folder / f"{PLUGIN_MODULE}.py").write_text(PLUGIN_SOURCE)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p)
    )
    return folder


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=os.environ.copy(), timeout=300
    )


@pytest.mark.parametrize(
    ("classifier", "rule"),
    [
        ("no_such_module_anywhere:classify", "module no_such_module_anywhere cannot be imported"),
        (f"{PLUGIN_MODULE}:missing", f"module {PLUGIN_MODULE} has no attribute missing"),
        (f"{PLUGIN_MODULE}:NOT_CALLABLE", "is not callable (it is a int)"),
        (f"{PLUGIN_MODULE}:wrong_arguments", "does not take the classifier arguments"),
        ("no-such-classifier", "not an entry point of group eval_pipelines.classifiers"),
    ],
)
def test_unusable_plugin_classifier_exits_2_naming_it(
    small_case: str,
    plugin_path: Path,
    capsys: pytest.CaptureFixture[str],
    classifier: str,
    rule: str,
) -> None:
    variants = plugin_path / "variants.json"
    variants.write_text(
        json.dumps([{"name": "baseline"}, {"name": "mine", "config": {"classifier": classifier}}])
    )
    result = cli("eval", "holdout", small_case, "--variants-file", str(variants))
    assert result.returncode == 2, result.stderr
    assert "variants[1].config.classifier" in result.stderr, result.stderr
    assert repr(classifier) in result.stderr and rule in result.stderr, result.stderr
    listed = succeeded(capsys, "eval", "list", small_case)  # in this process: a read
    assert json.loads(listed) == []  # nothing written


def test_import_path_classifier_is_accepted(small_case: str, plugin_path: Path) -> None:
    variants = plugin_path / "variants.json"
    reference = f"{PLUGIN_MODULE}:everything_declines"
    variants.write_text(json.dumps([{"name": "mine", "config": {"classifier": reference}}]))
    result = cli("eval", "holdout", small_case, "--variants-file", str(variants), "--no-launch")
    assert result.returncode == 0, result.stderr


NODE_SOURCE = '''
class FirstLine:
    """A node type: the document's first line as its title."""

    def prepare(self, config, where, base_dir):
        return dict(config)

    def run(self, config, document, upstream):
        return {"title": document.text.splitlines()[0]}


class NoRun:
    def prepare(self, config, where, base_dir):
        return dict(config)
'''


def node_workflow(folder: Path, node_type: str) -> Path:
    path = folder / "workflow.yaml"
    path.write_text(
        "kind: extract\nnodes:\n"
        f"  - id: title\n    type: '{node_type}'\n"
        "    schema:\n      fields:\n        - {id: title, name: Title, source: title}\n"
    )
    return path


def test_import_path_node_type_runs(plugin_path: Path) -> None:
    from eval_pipelines.api import workflows as api

    (plugin_path / "my_plugin_nodes.py").write_text(NODE_SOURCE)
    saved = api.save_workflow("titles", node_workflow(plugin_path, "my_plugin_nodes:FirstLine"))
    document = plugin_path / "invoice.txt"
    document.write_text("ACME invoice 7\nTotal: 3 EUR\n")
    run = api.run_workflow("titles", document)
    assert run.error is None and run.outputs == {"title": {"title": "ACME invoice 7"}}
    content = api.show_workflow("titles").to_json()
    assert saved.revision in json.dumps(content)
    assert '"source": "import path"' in json.dumps(content)  # the node's identity is pinned


@pytest.mark.parametrize(
    ("node_type", "rule"),
    [
        ("my_plugin_nodes:NoRun", "is not a node type: it has no method run"),
        ("no_such_module_anywhere:Node", "module no_such_module_anywhere cannot be imported"),
        ("no-such-node", "not an entry point of group eval_pipelines.nodes"),
    ],
)
def test_unusable_plugin_node_type_exits_2_naming_it(
    plugin_path: Path, node_type: str, rule: str
) -> None:
    (plugin_path / "my_plugin_nodes.py").write_text(NODE_SOURCE)
    result = cli("workflow", "save", "titles", "--file", str(node_workflow(plugin_path, node_type)))
    assert result.returncode == 2, result.stderr
    assert f"nodes[0].type={node_type!r}" in result.stderr and rule in result.stderr, result.stderr
    assert not (plugin_path.parent / "warehouse.duckdb").exists()  # nothing written


def test_plugin_identity_is_pinned_and_a_changed_plugin_is_refused_by_compare(
    small_case: str, plugin_path: Path
) -> None:
    import hashlib

    from eval_pipelines import api
    from eval_pipelines.core.errors import ConflictError

    reference = f"{PLUGIN_MODULE}:everything_declines"
    variants = [{"name": "baseline"}, {"name": "mine", "config": {"classifier": reference}}]
    first = api.start_holdout_eval(
        small_case, variants, api.HoldoutOptions(sample_size=20, seed=3), wait=True
    )
    report = api.get_holdout_eval(small_case, first.eval_id).report
    module_file = plugin_path / f"{PLUGIN_MODULE}.py"
    pinned = {
        "name": reference,
        "source": "import path",
        "target": reference,
        "sha256": hashlib.sha256(module_file.read_bytes()).hexdigest()[:16],
    }
    assert "plugin" not in report["variants"][0]  # the built-in knn-vote has no identity
    assert report["variants"][1]["plugin"] == pinned
    assert report["variants"][1]["score"]["declineRate"]["k"] == 20  # it ran, and declined

    module_file.write_text(PLUGIN_SOURCE + "\n# edited\n")
    second = api.start_holdout_eval(
        small_case, variants, api.HoldoutOptions(sample_size=20, seed=3), wait=True
    )
    arguments = {
        "baseline_eval_id": first.eval_id,
        "candidate_eval_id": second.eval_id,
        "baseline_variant": "mine",
        "candidate_variant": "mine",
    }
    with pytest.raises(ConflictError, match="their plug-in differs"):
        api.compare_holdout_evals(small_case, **arguments)
    compared = api.compare_holdout_evals(small_case, allow_config_change=True, **arguments)
    (change,) = compared.changed_besides_variant
    assert change.what == "plug-in" and change.baseline == pinned
    assert change.candidate["sha256"] != pinned["sha256"]
    # Two knn-vote baselines of the same two evaluations still compare without a flag.
    arguments |= {"baseline_variant": "baseline", "candidate_variant": "baseline"}
    assert api.compare_holdout_evals(small_case, **arguments).changed_besides_variant == ()


# The example package (examples/eval_pipelines_example), installed by `make install`.
EXAMPLE_CLASSIFIER = "eval_pipelines_example.classifiers:most_similar"


def test_example_classifier_by_entry_point_and_by_import_path(small_case: str) -> None:
    from importlib import metadata

    from eval_pipelines import api

    variants = [
        {"name": "nearest", "config": {"strategy": "nearest"}},
        {"name": "by-name", "config": {"classifier": "most-similar"}},
        {"name": "by-path", "config": {"classifier": EXAMPLE_CLASSIFIER}},
    ]
    launched = api.start_holdout_eval(
        small_case, variants, api.HoldoutOptions(sample_size=60, seed=2), wait=True
    )
    report = api.get_holdout_eval(small_case, launched.eval_id).report
    nearest, by_name, by_path = report["variants"]
    version = metadata.version("eval_pipelines_example")
    assert by_name["plugin"] == {
        "name": "most-similar",
        "source": "entry point",
        "target": EXAMPLE_CLASSIFIER,
        "distribution": "eval_pipelines_example",
        "version": version,
    }
    assert by_path["plugin"] == {
        "name": EXAMPLE_CLASSIFIER,
        "source": "import path",
        "target": EXAMPLE_CLASSIFIER,
        "distribution": "eval_pipelines_example",
        "version": version,
    }
    assert by_name["score"] == by_path["score"]  # one function, two ways of naming it
    markdown = api.get_holdout_eval(small_case, launched.eval_id).report_markdown
    assert markdown is not None
    assert f"| plug-in | - | most-similar (eval_pipelines_example {version}) |" in markdown
    assert by_name["failedRows"] == 0 and by_name["score"]["n"] == 60
    # Its code is the nearest record's label, as knn-vote's `nearest` strategy decides it.
    for depth in ("3", "4"):
        assert (
            by_name["score"]["levels"][depth]["accuracy"]["k"]
            == (nearest["score"]["levels"][depth]["accuracy"]["k"])
        )


@pytest.mark.parametrize("node_type", ["first-line", "eval_pipelines_example.nodes:FirstLine"])
def test_example_node_type_runs_in_a_workflow(workdir: Path, node_type: str) -> None:
    from eval_pipelines.api import workflows as api

    path = workdir / "workflow.yaml"
    path.write_text(
        "kind: extract\nnodes:\n"
        f"  - id: head\n    type: '{node_type}'\n    strip: true\n"
        "    schema:\n      fields:\n"
        "        - {id: title, name: Title, source: title}\n"
        "        - {id: lines, name: Lines, source: lines, type: number}\n"
    )
    api.save_workflow("heads", path)
    document = workdir / "invoice.txt"
    document.write_text("\n  ACME invoice 7  \nTotal: 3 EUR\n")
    run = api.run_workflow("heads", document)
    assert run.error is None and run.outputs == {"head": {"title": "ACME invoice 7", "lines": 2}}


def test_the_plugins_page_documents_the_groups_and_the_arguments() -> None:
    from eval_pipelines.core import plugins

    page = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")
    for name in (
        plugins.CLASSIFIER_GROUP,
        plugins.NODE_GROUP,
        *plugins.CLASSIFIER_ARGUMENTS,
        *plugins.CLASSIFIER_KEYWORDS,
        *(f"{method}({', '.join(args)})" for method, args in plugins.NODE_METHODS.items()),
    ):
        assert name in page, name
    assert "docs/plugins.md" in (REPO / "README.md").read_text(encoding="utf-8")
    assert "plugins.md" in (REPO / "mkdocs.yml").read_text(encoding="utf-8")


def test_an_edited_plugin_module_is_imported_again_and_a_stale_pin_refused(
    plugin_path: Path,
) -> None:
    from eval_pipelines.core.plugins import PluginError, check_pinned, find, identity_of

    module_file = plugin_path / "my_edited_plugin.py"
    module_file.write_text("def answer(records, evidence, memo, config, *, tree):\n    return 1\n")
    found = find("my_edited_plugin:answer", "eval_pipelines.classifiers")
    pinned = identity_of("my_edited_plugin:answer", found)
    assert found.value(None, None, None, None, tree=None) == 1
    check_pinned("my_edited_plugin:answer", pinned)  # unchanged: runs

    module_file.write_text("def answer(records, evidence, memo, config, *, tree):\n    return 22\n")
    # The run uses the code on disk (the code whose hash it would pin), not the stale import,
    again = find("my_edited_plugin:answer", "eval_pipelines.classifiers")
    assert again.value(None, None, None, None, tree=None) == 22
    # and refuses to run it under the identity pinned before the edit.
    with pytest.raises(PluginError, match="changed since the evaluation was registered"):
        check_pinned("my_edited_plugin:answer", pinned)


def test_the_grouping_sweep_takes_a_plugin_classifier(small_case: str, plugin_path: Path) -> None:
    from eval_pipelines.api.grouping import grouping_sweep
    from eval_pipelines.core.errors import InputError

    swept = grouping_sweep(
        small_case, thresholds=[0.9], sample_size=30, seed=3, config={"classifier": "most-similar"}
    )
    assert len(swept.to_json()["rows"]) == 2  # ungrouped, then the threshold
    with pytest.raises(InputError) as refused:
        grouping_sweep(
            small_case, thresholds=[0.9], config={"classifier": f"{PLUGIN_MODULE}:wrong_arguments"}
        )
    assert refused.value.field == "config.classifier"
    assert "does not take the classifier arguments" in refused.value.rule


def test_a_plugin_declares_its_tokens_per_record_for_the_cost_confirmation(
    small_case: str, plugin_path: Path
) -> None:
    from eval_pipelines import api
    from eval_pipelines.core.holdout.token_policy import TokenConfirmationNeeded

    (plugin_path / "my_wordy_plugin.py").write_text(
        PLUGIN_SOURCE + "\neverything_declines.tokens_per_record = 5000\n"
    )
    variants = [{"name": "wordy", "config": {"classifier": "my_wordy_plugin:everything_declines"}}]
    with pytest.raises(TokenConfirmationNeeded) as refused:
        api.start_holdout_eval(
            small_case, variants, api.HoldoutOptions(sample_size=100), register_only=True
        )
    assert "500,000" in str(refused.value) or "500000" in str(refused.value), str(refused.value)
    assert api.list_evals(small_case) == []  # nothing written


def test_an_entry_point_name_two_distributions_declare_differently_is_refused(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eval_pipelines.core import plugins

    # A second installed distribution (a real .dist-info on sys.path) declaring the example
    # package's classifier name for another object: which one wins would depend on path order.
    info = workdir / "site" / "rival_plugins-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rival_plugins\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{plugins.CLASSIFIER_GROUP}]\nmost-similar = rival_plugins.classify:vote\n"
    )
    monkeypatch.syspath_prepend(str(workdir / "site"))
    with pytest.raises(plugins.PluginError) as refused:
        plugins.find("most-similar", plugins.CLASSIFIER_GROUP)
    message = str(refused.value)
    assert "rival_plugins -> rival_plugins.classify:vote" in message
    assert f"eval_pipelines_example -> {EXAMPLE_CLASSIFIER}" in message
    # The import path still names the example's classifier without ambiguity.
    assert plugins.find(EXAMPLE_CLASSIFIER, plugins.CLASSIFIER_GROUP).source == "import path"
