"""Classify workflows: a case's setup as a workflow revision, labelled records as golden
cases scored at the target depth, and a new revision for every approved memo entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipelines import api
from eval_pipelines.api import golden, workflows


def _workflow(folder: Path, *, strategy: str, grouping: str) -> Path:
    path = folder / f"coding-{strategy}-{grouping}.yaml"
    path.write_text(
        "kind: classify\n"
        "nodes:\n"
        "  - id: classify\n"
        "    type: classify\n"
        "    case: small\n"
        f"    config: {{strategy: {strategy}, candidates: 10, targetDepth: [3]}}\n"
        f"    grouping: {{mode: {grouping}}}\n"
    )
    return path


@pytest.fixture
def coding(small_case: str, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("EVAL_PIPELINES_WORKFLOWS_DIR", str(workdir / "workflows"))
    saved = workflows.save_workflow(
        "coding", _workflow(workdir, strategy="nearest", grouping="none")
    )
    golden.create_set("coding-gate", workflow="coding", threshold=0.5, gate=True)
    added = golden.add_golden_cases_from_records("coding-gate", sample_size=30, seed=3)
    assert len(added.added) == 30
    return str(saved.revision)


def test_the_revision_pins_the_case_versions_and_memo(coding: str) -> None:
    shown = workflows.show_workflow("coding")
    pinned = shown.content["nodes"][0]["config"]["pinned"]
    assert pinned["memoVersion"] == "empty"
    assert pinned["targetDepth"] == [3]
    assert set(pinned) == {
        "recordsVersion",
        "treeVersion",
        "targetDepth",
        "memoVersion",
        "memoEntries",
    }


def test_records_are_scored_at_the_target_depth_with_their_own_record_held_out(
    coding: str,
) -> None:
    report = golden.run_and_report("coding-gate")
    accuracy = report.score.to_json()["fieldAccuracy"]
    assert accuracy["n"] == 30  # one `code` value per record
    # Each label is a category (3 characters); were a record its own evidence, `nearest`
    # would return its own label and score 30/30.
    labels = [case.items[0].expected for case in report.cases.values()]
    assert all(len(label) == 3 for label in labels)
    assert accuracy["correct"] < 30
    again = golden.run_and_report("coding-gate")
    assert again.charged.to_json() == {"executedSteps": 0, "cachedSteps": 30, "costUnits": 0.0}
    assert again.score == report.score


def test_approving_a_memo_entry_makes_a_new_revision_the_gate_has_not_seen(
    coding: str, workdir: Path
) -> None:
    entry = workdir / "memo.yaml"
    entry.write_text(
        "id: m-flu\ninstruction: influenza is J11\n"
        "when: {keywords: [influenza]}\nthen: {assign: J11}\n"
    )
    api.add_memo_entry("small", entry)
    approved = api.approve_memo_entry("small", "m-flu", by="ana")
    new_revision = approved.new_workflow_revisions["coding"]
    assert new_revision != coding
    status = workflows.workflow_status("coding")
    assert status.newest_revision.revision == new_revision
    assert status.newest_revision.source == "memo-approval:m-flu"
    assert status.gate.state == "blocked"
    assert "has not been run against revision" in status.gate.reason
