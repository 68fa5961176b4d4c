"""Which offline screening is set beside a live claim (spec 004, "How a lift is proven"):
the newest holdout evaluation of the workspace's declared case that screened the claim's
candidate, and only when that identifies one candidate; its accuracy difference at the target
level and, beside it, its difference in cost per record. Offline screening is its own stage
of evidence (:class:`~eval_pipelines.core.lift.evidence.OfflineScreening`): shown beside the
live lift, never counted as one.
"""

from __future__ import annotations

import json
from typing import Any

from eval_pipelines.core.lift.evidence import EvidenceKind, OfflineScreening, require_kind

__all__ = ["offline_screening"]


def _variant_identity(report: dict[str, Any], name: str) -> str:
    """What identifies a screened candidate within a case: its name, configuration and memo
    (two variants of one name with different settings are two candidates)."""
    for variant in report.get("variants", []):
        if variant.get("name") == name:
            keys = ("name", "config", "memoInclude", "memoVersion")
            return json.dumps({key: variant.get(key) for key in keys}, sort_keys=True)
    return json.dumps({"name": name})


def offline_screening(
    reports: list[tuple[str, dict[str, Any]]], candidate: str | None, case_id: str | None
) -> tuple[OfflineScreening | None, str]:
    """The newest holdout evaluation in ``reports`` (newest first) of the workspace's case
    ``case_id`` that screened ``candidate`` (the lever the claim's treated arm was served),
    to set beside the live lift; or None, with the reason in words.

    A variant name alone identifies nothing: the workspace must name its case (``lift
    settings --case``), and when the case's evaluations screened more than one candidate
    under that name (different configurations or memos), which one is live is ambiguous and
    none is shown."""
    if not candidate:
        return None, "the claim names no candidate"
    if case_id is None:
        return None, (
            "the workspace names no case (`eval-pipelines lift settings --case`): a variant name "
            "alone does "
            "not identify the candidate"
        )
    found: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for eval_id, report in reports:
        if report.get("caseId") != case_id:
            continue
        for comparison in report.get("comparisons", []):
            if comparison.get("candidate") == candidate:
                found.append((eval_id, report, comparison))
    if not found:
        return None, f"no holdout evaluation of case {case_id} screened {candidate}"
    identities = {_variant_identity(report, candidate) for _, report, _ in found}
    if len(identities) > 1:
        return None, (
            f"ambiguous: the holdout evaluations of case {case_id} screened {len(identities)} "
            f"different candidates named {candidate} (configurations or memos differ)"
        )
    for eval_id, report, comparison in found:
        depth = str((report.get("targetDepth") or [None])[0])
        level = comparison.get("levels", {}).get(depth)
        if level is None:
            continue
        interval = level.get("interval")
        difference = level.get("difference")
        screening = OfflineScreening(
            eval_id=eval_id,
            candidate=candidate,
            baseline=str(comparison.get("baseline")),
            level=level.get("verdict"),
            difference=difference if isinstance(difference, int | float) else None,
            interval=tuple(interval) if isinstance(interval, list) else None,  # type: ignore[arg-type]
            n=int(level.get("pairs") or 0),
            case_id=case_id,
            depth=depth,
            cost=comparison.get("cost"),
        )
        require_kind(screening, EvidenceKind.OFFLINE_SCREENING)
        return screening, f"holdout evaluation {eval_id} of case {case_id}"
    return None, f"no holdout evaluation of case {case_id} read {candidate} at its target level"
