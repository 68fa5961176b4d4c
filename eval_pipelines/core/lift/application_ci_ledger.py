"""Application-CI results in the lift ledger and report: their own kind, beside a live claim.

Each recorded :class:`~eval_pipelines.core.lift.evidence.ApplicationCI` is shown with the
live claims of its workspace and candidate (``applicationCi`` of a ledger row), and a
candidate with results but no live claim yet still has a ledger entry of its own
(:class:`LedgerApplicationCI`, evidence ``application_ci``, status ``no live claim``). Nothing
here reads a result into a claim's status or verdict: a passed CI check is not a live
confirmation, and every line that shows one says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.lift.evidence import ApplicationCI, evidence_name
from eval_pipelines.core.lift.ledger import LedgerClaim
from eval_pipelines.core.results import JsonResult

__all__ = [
    "NO_LIVE_CLAIM",
    "NOT_A_CONFIRMATION",
    "LedgerApplicationCI",
    "application_ci_entry_lines",
    "application_ci_line",
    "application_ci_section",
    "claim_application_ci_lines",
    "ledger_with_application_ci",
]

NO_LIVE_CLAIM = "no live claim"
NOT_A_CONFIRMATION = "a passed CI check is not a live confirmation"


@dataclass(frozen=True)
class LedgerApplicationCI(JsonResult):
    """A ledger entry of a candidate with application-CI results and no live claim yet: its
    evidence is ``application_ci`` and its status ``no live claim``, never a confirmation.
    ``application_ci`` holds each result's document (:meth:`ApplicationCI.to_json`)."""

    workspace_id: str
    candidate: str
    evidence: str
    status: str
    application_ci: tuple[dict[str, Any], ...]
    note: str


def ledger_with_application_ci(
    claims: Sequence[LedgerClaim], results: Sequence[ApplicationCI]
) -> tuple[LedgerClaim | LedgerApplicationCI, ...]:
    """The ledger: each claim with the CI results of its workspace and candidate (oldest
    first; its status and verdict as they were), then one entry per candidate with results
    and no claim, by workspace and candidate."""
    by_candidate: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for result in sorted(results, key=lambda r: r.recorded_at):
        by_candidate.setdefault((result.workspace_id, result.candidate), []).append(
            result.to_json()
        )
    rows: list[LedgerClaim | LedgerApplicationCI] = [
        dataclasses.replace(
            claim,
            application_ci=tuple(by_candidate.get((claim.workspace_id, claim.candidate or ""), [])),
        )
        for claim in claims
    ]
    claimed = {(c.workspace_id, c.candidate) for c in claims}
    for (workspace_id, candidate), documents in sorted(by_candidate.items()):
        if (workspace_id, candidate) not in claimed:
            rows.append(
                LedgerApplicationCI(
                    workspace_id=workspace_id,
                    candidate=candidate,
                    evidence=evidence_name(ApplicationCI),
                    status=NO_LIVE_CLAIM,
                    application_ci=tuple(documents),
                    note=NOT_A_CONFIRMATION,
                )
            )
    return tuple(rows)


def application_ci_line(result: dict[str, Any]) -> str:
    """One CI result (its document) in words: what ran, on which commit, with its counts."""
    source = (
        f"golden gate of workflow {result['suite']} at revision {result['commit']} (golden runs "
        f"{', '.join(result['goldenRunIds'])})"
        if result["source"] == "golden_gate"
        else f"harness suite {result['suite']} at commit {result['commit']}"
    )
    skipped = f", {result['skipped']} skipped" if result["skipped"] else ""
    return (
        f"application CI ({result['binds']}): {source}: {result['check']} ({result['passed']} "
        f"passed, {result['failed']} failed{skipped}), recorded {result['recordedAt']}"
    )


def claim_application_ci_lines(claim: dict[str, Any]) -> list[str]:
    """The lines a ledger claim (its document) adds for the CI results beside it."""
    return [
        f"  - {application_ci_line(result)} ({NOT_A_CONFIRMATION})"
        for result in claim.get("applicationCi") or ()
    ]


def application_ci_entry_lines(entry: dict[str, Any]) -> list[str]:
    """The ledger lines of a candidate with CI results and no live claim (its document): the
    candidate and its status, then one line per result."""
    return [
        f"{entry['workspaceId']}/{entry['candidate']}: {entry['status']}, application CI only "
        f"({NOT_A_CONFIRMATION})",
        *(f"  - {application_ci_line(r)}" for r in entry["applicationCi"]),
    ]


def application_ci_section(results: Sequence[dict[str, Any]], claimed: set[str]) -> list[str]:
    """The report's section of application-CI results (their documents; none: no section).
    ``claimed`` holds the ``workspace/candidate`` of the report's claims: a result of another
    candidate says it has no live claim yet."""
    if not results:
        return []
    lines = ["", "#### Application CI", ""]
    for result in results:
        key = f"{result['workspaceId']}/{result['candidate']}"
        beside = "" if key in claimed else f" ({NO_LIVE_CLAIM} of this candidate yet)"
        lines.append(f"- {key}: {application_ci_line(result)}{beside}")
    lines += ["", f"_Application CI is its own kind of evidence: {NOT_A_CONFIRMATION}._"]
    return lines
