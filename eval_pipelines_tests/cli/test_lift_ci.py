"""``eval-pipelines lift ci`` as a user types it: a harness result and the golden gate's runs of
a workflow revision recorded as application CI, shown in the ledger and the report as their own
kind, never as a live confirmation; a raw model-call comparison refused with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipelines import settings
from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines.storage import application_ci as application_ci_store
from eval_pipelines.storage.warehouse import connect, exists
from eval_pipelines_tests.helpers.cli_calls import refused, succeeded
from eval_pipelines_tests.helpers.golden_demo import WORKFLOW, broken_variant, seed
from eval_pipelines_tests.helpers.lift_traffic import write_log

NOT_A_CONFIRMATION = "a passed CI check is not a live confirmation"
HARNESS = (
    "lift",
    "ci",
    "--workspace",
    "ws",
    "--candidate",
    "memo-v2",
    "--commit",
    "9f1c2ab",
    "--suite",
    "replay smoke",
    "--passed",
    "48",
    "--failed",
    "0",
)


def _recorded() -> int | None:
    """How many results the warehouse holds (either backend); None when there is none."""
    location = settings.warehouse_location()
    if not exists(location):
        return None
    with connect(location, read_only=True) as conn:
        return len(application_ci_store.results(conn))


def test_a_harness_result_is_recorded_once_and_listed_without_a_live_claim(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded = json.loads(succeeded(capsys, *HARNESS, "--json"))
    assert recorded["kind"] == "application_ci" and recorded["new"] is True
    assert (recorded["source"], recorded["check"], recorded["passed"]) == ("harness", "passed", 48)
    assert (recorded["binds"], recorded["goldenRunIds"]) == ("application", [])
    again = succeeded(capsys, *HARNESS)
    assert again.startswith("ws/memo-v2: already recorded (same result): unchanged: ")
    assert again.rstrip().endswith(f"({NOT_A_CONFIRMATION})")
    assert _recorded() == 1
    # The same commit and suite with other counts is refused: a result is never replaced.
    flaky = [*HARNESS[:-1], "1"]
    line = refused(capsys, *flaky)
    assert line.startswith("--commit='9f1c2ab', --suite='replay smoke': a harness result of ")
    assert _recorded() == 1

    (entry,) = json.loads(succeeded(capsys, "lift", "ledger", "--json"))
    assert (entry["evidence"], entry["status"]) == ("application_ci", "no live claim")
    assert [r["commit"] for r in entry["applicationCi"]] == ["9f1c2ab"]
    text = succeeded(capsys, "lift", "ledger")
    assert text.splitlines() == [
        f"ws/memo-v2: no live claim, application CI only ({NOT_A_CONFIRMATION})",
        "  - application CI (application): harness suite replay smoke at commit 9f1c2ab: passed "
        f"(48 passed, 0 failed), recorded {recorded['recordedAt']}",
    ]
    assert NOT_A_CONFIRMATION in text and "confirmed" not in text.replace(NOT_A_CONFIRMATION, "")


def test_a_raw_model_call_comparison_is_refused_and_nothing_is_written(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused(capsys, *HARNESS, "--binds", "model_calls")
    assert line.startswith("--binds='model_calls': a raw model-call comparison cannot claim ")
    assert _recorded() is None  # checked before anything is opened
    succeeded(capsys, *HARNESS[:-6], "--suite", "other", "--passed", "1", "--failed", "0")
    refused(capsys, *HARNESS, "--binds", "model_calls")
    assert _recorded() == 1


@pytest.mark.parametrize(
    ("extra", "start"),
    [
        (("--workflow", "wf"), "--commit='9f1c2ab': a result is either the team's harness"),
        (("--passed", "-1"), "--passed=-1: must be a whole number >= 0"),
        (("--suite", ""), "--suite='': a suite is 1-200 characters"),
        (("--candidate", "two words"), "--candidate='two words': a candidate (its lever) is"),
    ],
)
def test_bad_input_is_one_line_naming_the_flag(
    workdir: Path, capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], start: str
) -> None:
    assert refused(capsys, *HARNESS, *extra).startswith(start)
    assert _recorded() is None


def test_a_harness_result_needs_its_counts(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused(capsys, *HARNESS[:-2])
    assert line.startswith("--failed=None: a harness result needs --commit, --suite, --passed")


def test_the_gate_runs_of_a_workflow_revision_are_recorded(
    golden_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines.api import golden

    good = seed("inv")
    gate = ["lift", "ci", "--workspace", "ws", "--candidate", "memo-v2", "--workflow", WORKFLOW]
    line = refused(capsys, *gate, "--revision", good)
    assert line == (
        f"--revision='{good}': gating set inv has no completed run against this revision (run "
        f"it: eval-pipelines golden run inv --revision {good}); nothing was recorded"
    )
    assert _recorded() == 0

    passing = golden.run_and_report("inv").to_json()
    recorded = json.loads(succeeded(capsys, *gate, "--revision", good[:8], "--json"))
    assert (recorded["source"], recorded["commit"], recorded["suite"]) == (
        "golden_gate",
        good,
        WORKFLOW,
    )
    assert recorded["goldenRunIds"] == [passing["goldenRunId"]]
    assert (recorded["check"], recorded["passed"], recorded["failed"]) == ("passed", 1, 0)
    assert recorded["detail"] == "set inv: scored 1.000 (33/33) at or above threshold 1.0"

    (entry,) = json.loads(succeeded(capsys, "lift", "ledger", "--json"))
    assert [(r["commit"], r["check"]) for r in entry["applicationCi"]] == [(good, "passed")]


def test_a_revision_that_fails_its_gate_is_recorded_as_a_failed_check(
    golden_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines.api import golden

    seed("inv")
    # A revision that breaks a field (customer): its gate's run is recorded as a failed check.
    broken = json.loads(
        succeeded(capsys, "workflow", "save", WORKFLOW, "--file", broken_variant(golden_home))
    )["revision"]
    failing = golden.run_and_report("inv", revision=broken).to_json()
    text = succeeded(
        capsys,
        *("lift", "ci", "--workspace", "ws", "--candidate", "memo-v2"),
        *("--workflow", WORKFLOW, "--revision", broken),
    )
    assert text.startswith(
        f"ws/memo-v2: recorded: application CI (application): golden gate of workflow "
        f"{WORKFLOW} at revision {broken} (golden runs {failing['goldenRunId']}): failed "
        "(0 passed, 1 failed)"
    )
    (entry,) = json.loads(succeeded(capsys, "lift", "ledger", "--json"))
    (result,) = entry["applicationCi"]
    assert result["detail"].startswith("set inv: scored 0.909 (30/33) below threshold 1.0")


def test_a_workflow_without_a_gating_set_has_no_gate_runs_to_record(
    golden_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    revision = seed("inv", gate=False)
    line = refused(
        capsys,
        *("lift", "ci", "--workspace", "ws", "--candidate", "memo-v2"),
        *("--workflow", WORKFLOW, "--revision", revision),
    )
    assert line.startswith(f"--workflow='{WORKFLOW}': no golden set of this workflow gates")


def test_a_passed_ci_leaves_an_open_claim_open_and_is_listed_beside_it(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    succeeded(capsys, "lift", "settings", "--workspace", "ws", "--lever", "memo-v2")
    log = write_log(
        workdir / "week.jsonl",
        LiftConfig("ws", "e2", lever="memo-v2"),
        true_lift=0.0,
        seed=4,
        days=2,
    )
    succeeded(capsys, "lift", "ingest", log)
    succeeded(capsys, *HARNESS)
    report = succeeded(capsys, "lift", "report")
    assert "#### Application CI" in report and NOT_A_CONFIRMATION in report
    (claim,) = json.loads(succeeded(capsys, "lift", "ledger", "--json"))
    assert (claim["status"], claim["verdict"]) == ("open", "not_established")
    assert claim["evidence"] == "live_confirmation"
    assert [r["kind"] for r in claim["applicationCi"]] == ["application_ci"]
    text = succeeded(capsys, "lift", "ledger").splitlines()
    assert (
        text[0].startswith("ws/invoice_coding/e2/memo-v2: ")
        and "verdict not_established" in text[0]
    )
    assert text[1].startswith("  - application CI (application): harness suite replay smoke")
    assert text[1].endswith(f"({NOT_A_CONFIRMATION})")
