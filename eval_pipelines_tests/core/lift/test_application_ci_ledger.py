"""Application-CI results in the ledger and the report: their own kind beside the claim of
their candidate, an entry of their own without one, and never read into a status or verdict."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from eval_pipelines.core.lift.application_ci import application_ci_result
from eval_pipelines.core.lift.application_ci_ledger import (
    LedgerApplicationCI,
    application_ci_entry_lines,
    application_ci_section,
    claim_application_ci_lines,
    ledger_with_application_ci,
)
from eval_pipelines.core.lift.evidence import ApplicationCI
from eval_pipelines.core.lift.ledger import Claim, LedgerClaim, ledger_claim
from eval_pipelines.core.lift.lift import NOT_ESTABLISHED
from eval_pipelines.core.lift.report import report_markdown

WHEN = datetime(2026, 12, 6, 21, 0)


def _claim(candidate: str | None, *, workspace_id: str = "acme") -> LedgerClaim:
    return ledger_claim(
        Claim(
            claim_id=f"{workspace_id}/fact/e2/{candidate}",
            workspace_id=workspace_id,
            claim_type="fact",
            epoch="e2",
            candidate=candidate,
            status="open",
            reason=None,
            verdict=NOT_ESTABLISHED,
            estimate=0.01,
            low=-0.03,
            high=0.05,
            mde=0.04,
            n_treated=400,
            n_control=380,
            clusters_treated=200,
            clusters_control=190,
            aa={},
            baseline_head=None,
            app_config=None,
            offline=None,
            lift={"sequence": True},
            opened_at=WHEN,
            updated_at=WHEN,
        )
    )


def _ci(candidate: str, *, workspace_id: str = "acme", **changes: Any) -> ApplicationCI:
    options: dict[str, Any] = {
        "workspace_id": workspace_id,
        "candidate": candidate,
        "source": "harness",
        "commit": "9f1c2ab",
        "suite": "replay smoke",
        "passed": 48,
        "failed": 0,
        "recorded_at": WHEN,
    }
    return application_ci_result(**{**options, **changes})


def test_a_passed_ci_sits_beside_its_claim_and_changes_nothing_of_it() -> None:
    claim = _claim("memo-v2")
    passed = _ci("memo-v2")
    (row,) = ledger_with_application_ci([claim], [passed])
    assert isinstance(row, LedgerClaim)
    # Status, verdict, interval and evidence kind as they were: a passed CI is no confirmation.
    assert dataclasses.replace(row, application_ci=()) == claim
    assert (row.status, row.verdict, row.evidence) == ("open", NOT_ESTABLISHED, "live_confirmation")
    assert row.application_ci == (passed.to_json(),)
    assert row.to_json()["applicationCi"][0]["kind"] == "application_ci"
    (line,) = claim_application_ci_lines(row.to_json())
    assert line == (
        "  - application CI (application): harness suite replay smoke at commit 9f1c2ab: passed "
        "(48 passed, 0 failed), recorded 2026-12-06T21:00:00 (a passed CI check is not a live "
        "confirmation)"
    )


def test_results_match_their_workspace_and_candidate_only() -> None:
    claims = [_claim("memo-v2"), _claim(None), _claim("memo-v2", workspace_id="other")]
    later = _ci("memo-v2", commit="a1b2c3d", recorded_at=datetime(2026, 12, 7))
    rows = ledger_with_application_ci(claims, [later, _ci("memo-v2")])
    assert [len(r.application_ci) for r in rows] == [2, 0, 0]
    # Oldest first.
    assert [r["commit"] for r in rows[0].application_ci] == ["9f1c2ab", "a1b2c3d"]


def test_a_candidate_without_a_live_claim_is_listed_as_application_ci() -> None:
    gate = _ci(
        "tier-small",
        source="golden_gate",
        commit="1650c7d40fc1",
        suite="supplier_invoices",
        passed=1,
        golden_run_ids=("g-77e6cdbb8a2d",),
    )
    rows = ledger_with_application_ci([_claim("memo-v2")], [gate])
    entry = rows[1]
    assert isinstance(entry, LedgerApplicationCI)
    document = entry.to_json()
    assert (document["evidence"], document["status"]) == ("application_ci", "no live claim")
    assert "verdict" not in document and "confirmed" not in str(document)
    assert application_ci_entry_lines(document) == [
        "acme/tier-small: no live claim, application CI only (a passed CI check is not a live "
        "confirmation)",
        "  - application CI (application): golden gate of workflow supplier_invoices at revision "
        "1650c7d40fc1 (golden runs g-77e6cdbb8a2d): passed (1 passed, 0 failed), recorded "
        "2026-12-06T21:00:00",
    ]


def test_the_report_lists_results_in_their_own_section_or_not_at_all() -> None:
    claim = _claim("memo-v2").to_json()
    report: dict[str, Any] = {"claims": [claim], "scopes": []}
    before = report_markdown(report)
    assert "Application CI" not in before  # no result: the report reads as it always did
    failed = _ci("memo-v2", failed=2, skipped=1).to_json()
    other = _ci("tier-small").to_json()
    markdown = report_markdown({**report, "applicationCi": [failed, other]})
    section = application_ci_section([failed, other], {"acme/memo-v2"})
    assert "\n".join(section) in markdown
    assert section[1:3] == ["#### Application CI", ""]
    assert section[3] == (
        "- acme/memo-v2: application CI (application): harness suite replay smoke at commit "
        "9f1c2ab: failed (48 passed, 2 failed, 1 skipped), recorded 2026-12-06T21:00:00"
    )
    assert section[4].endswith("(no live claim of this candidate yet)")
    assert "a passed CI check is not a live confirmation" in section[-1]
