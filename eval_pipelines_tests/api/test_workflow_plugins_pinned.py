"""A workflow revision runs the plug-in code it pinned when it was saved, or refuses: a node
type or a classify node's classifier edited since is refused at run time, and saving again
makes a new revision whose steps are not served from the old code's cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eval_pipelines.api import golden, workflows
from eval_pipelines.api._shared import EvalFailed
from eval_pipelines.core.errors import ConflictError, InputError

NODE_MODULE = "my_pinned_nodes"


def _node_source(word: str) -> str:
    return (
        "class Shout:\n"
        "    def prepare(self, config, where, base_dir):\n"
        "        return dict(config)\n"
        "    def run(self, config, document, upstream):\n"
        f"        return {{'title': {word!r}}}\n"
    )


CLASSIFIER_MODULE = "my_pinned_classifiers"
CLASSIFIER_SOURCE = """
from eval_pipelines.core.holdout.classify import Prediction


def decline(records, evidence, memo, config, *, tree):
    return [Prediction(r.record_key, None, 0.0, "declined") for r in records]


def too_few(records):
    return []
"""


@pytest.fixture
def user_code(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = workdir / "user_code"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p)
    )
    monkeypatch.setenv("EVAL_PIPELINES_WORKFLOWS_DIR", str(workdir / "workflows"))
    return folder


def _extract_workflow(folder: Path) -> Path:
    path = folder / "shout.yaml"
    path.write_text(
        "kind: extract\nnodes:\n"
        f"  - id: head\n    type: '{NODE_MODULE}:Shout'\n"
        "    schema:\n      fields:\n        - {id: title, name: Title, source: title}\n"
    )
    return path


def test_an_edited_node_plugin_is_refused_and_a_new_revision_runs_the_new_code(
    user_code: Path,
) -> None:
    module = user_code / f"{NODE_MODULE}.py"
    module.write_text(_node_source("first"))
    first = workflows.save_workflow("shout", _extract_workflow(user_code))
    document = user_code / "doc.txt"
    document.write_text("anything\n")
    assert workflows.run_workflow("shout", document).outputs == {"head": {"title": "first"}}

    module.write_text(_node_source("second"))
    with pytest.raises(ConflictError) as refused:
        workflows.run_workflow("shout", document, revision=first.revision)
    message = str(refused.value)
    assert "node head" in message and f"plug-in {NODE_MODULE}:Shout changed" in message
    assert f"since revision {first.revision} was saved" in message

    second = workflows.save_workflow("shout", _extract_workflow(user_code))
    assert second.revision != first.revision
    # The step cache is keyed by the pinned identity too: the first code's output, cached
    # for the same document, is not served to the revision pinning the second.
    assert workflows.run_workflow("shout", document).outputs == {"head": {"title": "second"}}


def _classify_workflow(folder: Path, classifier: str) -> Path:
    path = folder / "coding.yaml"
    path.write_text(
        "kind: classify\nnodes:\n  - id: classify\n    type: classify\n    case: small\n"
        f"    config: {{classifier: '{classifier}', candidates: 5, targetDepth: [3]}}\n"
        "    grouping: {mode: none}\n"
    )
    return path


def test_a_classify_node_refuses_an_unusable_classifier_when_saved(
    small_case: str, user_code: Path
) -> None:
    (user_code / f"{CLASSIFIER_MODULE}.py").write_text(CLASSIFIER_SOURCE)
    with pytest.raises(InputError) as refused:
        workflows.save_workflow(
            "coding", _classify_workflow(user_code, f"{CLASSIFIER_MODULE}:too_few")
        )
    assert refused.value.field == "nodes[0].config.classifier"
    assert "does not take the classifier arguments" in refused.value.rule
    with pytest.raises(InputError, match="not an import path"):
        workflows.save_workflow("coding", _classify_workflow(user_code, "no-such-classifier"))
    with pytest.raises(InputError, match="runs in holdout evaluations only"):
        workflows.save_workflow("coding", _classify_workflow(user_code, "chat"))
    assert [w.name for w in workflows.list_workflows()] == []  # nothing saved


def test_a_classify_node_pins_its_plugin_classifier_and_refuses_it_once_edited(
    small_case: str, user_code: Path
) -> None:
    # A module name of its own: the previous test imported CLASSIFIER_MODULE from its folder.
    module = user_code / "my_gated_classifiers.py"
    module.write_text(CLASSIFIER_SOURCE)
    name = "my_gated_classifiers:decline"
    saved = workflows.save_workflow("coding", _classify_workflow(user_code, name))
    node = workflows.show_workflow("coding").content["nodes"][0]
    assert node["config"]["classifierPlugin"]["target"] == name
    golden.create_set("coding-gate", workflow="coding", threshold=0.5, gate=True)
    golden.add_golden_cases_from_records("coding-gate", sample_size=10, seed=3)
    report = golden.run_and_report("coding-gate")
    assert report.score.to_json()["fieldAccuracy"]["n"] == 10

    module.write_text(CLASSIFIER_SOURCE + "\n# edited\n")
    # The gate's run fails, naming the node and the plug-in.
    with pytest.raises(EvalFailed) as failed:
        golden.run_and_report("coding-gate", revision=saved.revision)
    assert f"node classify: plug-in {name} changed since revision {saved.revision}" in str(
        failed.value
    )


REVERSED_SOURCE = """
from eval_pipelines.core.holdout.classify import Prediction


def nearest_reversed(records, evidence, memo, config, *, tree):
    # The nearest evidence label of each record, returned in reverse order.
    return [
        Prediction(r.record_key, evidence[r.record_key][0].label_node, 1.0, "auto")
        for r in reversed(records)
    ]
"""


def test_a_classify_node_matches_predictions_to_records_by_key_not_order(
    small_case: str, user_code: Path
) -> None:
    (user_code / "my_reversed_classifiers.py").write_text(REVERSED_SOURCE)
    for name, classifier in (
        ("reversed", "my_reversed_classifiers:nearest_reversed"),
        ("nearest", "knn-vote"),
    ):
        path = _classify_workflow(user_code, classifier)
        path.write_text(
            path.read_text().replace("candidates: 5", "candidates: 5, strategy: nearest")
        )
        workflows.save_workflow(name, path)
        golden.create_set(f"{name}-set", workflow=name, threshold=0.5)
        golden.add_golden_cases_from_records(f"{name}-set", sample_size=20, seed=4)
    mine = golden.run_and_report("reversed-set").score.to_json()["fieldAccuracy"]
    nearest = golden.run_and_report("nearest-set").score.to_json()["fieldAccuracy"]
    # The same decisions as knn-vote's `nearest`: a reversed order must not shuffle codes.
    assert mine["n"] == nearest["n"] == 20
    assert mine["correct"] == nearest["correct"] > 0
