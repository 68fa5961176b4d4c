"""The live-lift report and ledger lines in words (spec 004): each claim with its scope,
interval and n nearby (never a bare number), its A/A check, the checks before reading, the
outcome audit and the MDE, then each scope's cells per arm (never pooled).

Everything here renders the report's JSON document (:func:`report_markdown`) or a ledger
row's (:func:`claim_line`); the rules that decide what it says live in
:mod:`eval_pipelines.core.lift.claim` and :mod:`eval_pipelines.core.lift.checks`.
"""

from __future__ import annotations

from typing import Any

from eval_pipelines.core.holdout.cost_report import relative_cost_text
from eval_pipelines.core.lift.application_ci_ledger import application_ci_section
from eval_pipelines.core.lift.check_states import NOT_RUN, UNAUDITED
from eval_pipelines.core.lift.cost_report import cost_line

__all__ = ["audit_mark", "claim_line", "cluster_size_mark", "report_markdown"]


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.3f}"


def claim_line(claim: dict[str, Any]) -> str:
    """One ledger line (of a :class:`LedgerClaim`'s document): the claim with its scope,
    interval and n nearby (never a bare number)."""
    low, high = claim["interval"] or (None, None)
    kind = (
        "always-valid 95%"
        if claim.get("intervalKind", "always_valid") == "always_valid"
        else "one-look 95%, stored before the always-valid rule"
    )
    interval = (
        f"[{low:+.3f}, {high:+.3f}] ({kind})"
        if low is not None and high is not None
        else ("no interval")
    )
    status = claim["status"] + (f" ({claim['reason']})" if claim["reason"] else "")
    status += cluster_size_mark(claim.get("checks"))
    status += f", outcome audit {audit_mark(claim.get('audit'))}"
    if claim.get("auditSinceSettled"):
        status += f"; audited since it was settled: {audit_mark(claim['auditSinceSettled'])}"
    offline = claim["offline"]
    beside = (
        f"; offline {_offline_difference(offline)} "
        f"(eval {offline['evalId']}, n {offline.get('n')})"
        + (
            f", cost per record {relative_cost_text(offline['cost'])}"
            if offline.get("cost")
            else ""
        )
        if offline
        else "; no offline screening of this candidate"
        + (f" ({claim['offlineNote']})" if claim.get("offlineNote") else "")
    )
    return (
        f"{claim['claimId']}: treated − lever_holdout {_signed(claim['difference'])} "
        f"{interval}, n {claim['nTreated']} vs {claim['nControl']} "
        f"({claim['clustersTreated']} vs {claim['clustersControl']} clusters), "
        f"verdict {claim['verdict']}, {status}{beside}"
    )


def _offline_difference(offline: dict[str, Any]) -> str:
    """``L4 -0.004 [-0.020, +0.010]``: the offline accuracy difference at its target level,
    with its interval when it has one."""
    interval = offline.get("interval")
    text = _signed(offline.get("difference"))
    if interval:
        text += f" [{interval[0]:+.3f}, {interval[1]:+.3f}]"
    return f"L{offline['level']} {text}" if offline.get("level") else text


def _cluster_size_words(size: dict[str, Any]) -> str:
    """The cluster-size check of a report document in words (a claim stored before the check
    read marked later requests has only its trace clusters)."""
    if "words" in size:
        return str(size["words"])
    if size.get("traceClusters"):
        return (
            f"{size['singleRequestClusters']} of {size['traceClusters']} trace clusters are "
            "one request"
        )
    return "no trace-keyed rows"


def cluster_size_mark(checks: dict[str, Any] | None) -> str:
    """What a ledger line adds for the cluster-size check: that it could not run and for which
    key source, else nothing (a failed check parks the claim, and the reason says so)."""
    size = (checks or {}).get("clusterSize") or {}
    unknown = [s for s in size.get("bySource", []) if s.get("state") == NOT_RUN]
    if not unknown:
        return ""
    counts = ", ".join(
        f"{s['singleRequestClusters']} of {s['clusters']} {s['keySource']}-keyed clusters "
        "hold one request"
        for s in unknown
    )
    return (
        f", cluster-size check could not run ({counts} and too few requests are logged as a "
        "later turn or child span to tell a key logged per request from single-request "
        "traffic)"
    )


def audit_mark(audit: dict[str, Any] | None) -> str:
    """The outcome audit of a ledger line in a few words: ``unaudited`` (what it leaves
    unseen is in the report), ``insufficient``, ``passed`` or ``failed``, with its n."""
    if not audit or audit.get("state", UNAUDITED) == UNAUDITED:
        return UNAUDITED
    treated, control = audit["treated"], audit["control"]
    return (
        f"{audit['state']} ({treated['disagreements']} of {treated['audited']} treated vs "
        f"{control['disagreements']} of {control['audited']} lever_holdout audited outcomes "
        "disagree with the logged ones)"
    )


def _audit_line(audit: dict[str, Any] | None, *, settled: bool = False) -> str:
    state = (audit or {}).get("state", UNAUDITED)
    if state == UNAUDITED:
        return (
            "  - Outcome audit: none. A bias in one arm's outcome logging (a treated failure "
            "logged as a success) leaves arms, keys and counts intact and cannot be seen "
            "without one: it reads as a lift (`lift audit-sample`, then `lift audit FILE`)"
        )
    assert audit is not None
    treated, control = audit["treated"], audit["control"]
    counts = (
        f"treated {treated['disagreements']} of {treated['audited']} audited outcomes disagree "
        f"with the logged one, lever_holdout {control['disagreements']} of {control['audited']}"
    )
    if state == "insufficient":
        return (
            f"  - Outcome audit: insufficient ({counts}; each arm needs {audit['minPerArm']}): "
            "a bias in one arm's outcome logging is not checked yet"
        )
    failed = (
        "FAILED: the claim was settled on biased outcome logging (it stays as it was settled)"
        if settled
        else "FAILED: the instrument is parked"
    )
    outcome = "passed" if state == "passed" else failed
    head = "Outcome audit since the claim was settled unaudited" if settled else "Outcome audit"
    return (
        f"  - {head}: {counts}; the logging adds {audit['liftBias']:+.3f} to the lift; "
        f"Fisher exact p = {audit['pValue']:.3g} (parks below {audit['alpha']}): {outcome}"
    )


# The checks of the logs themselves (the outcome audit has its own line).
_LOG_CHECKS = ("sampleRatio", "assignment", "clusterSize")


def report_markdown(report: dict[str, Any]) -> str:
    """The report: each claim (scope, interval, n, verdict, A/A, MDE, offline beside), then
    each scope's cells (counts and censored share per arm, never pooled)."""
    lines = ["### Live lift", ""]
    if not report["claims"]:
        lines.append("No scope has treated or lever_holdout traffic yet: no lift is claimed.")
    for claim in report["claims"]:
        lines.append(f"- {claim_line(claim)}")
        cost = cost_line(claim.get("cost"))
        if cost is not None:
            lines.append(f"  - {cost}")
        aa = claim["aa"] or {}
        if aa:
            outcome = "passed" if aa.get("passed") else "FAILED: the instrument is parked"
            lines.append(
                f"  - A/A: {aa.get('falsePositives')} of {aa.get('splits')} seeded halves of "
                f"the control arm read a difference (at most "
                f"{float(aa.get('maxFalsePositiveRate') or 0):.0%} may): {outcome}"
            )
        checks = claim.get("checks") or {}
        if checks:
            ratio, assignment, size = (
                checks["sampleRatio"],
                checks["assignment"],
                checks["clusterSize"],
            )
            srm = (
                f"p = {ratio['pValue']:.3g} (parks below {ratio['alpha']})"
                if ratio["ran"]
                else "not run (no split of this epoch)"
            )
            derived = (
                f"{assignment['mismatchedRows']} of {assignment['checkedRows']} rows disagree"
                if assignment["ran"]
                else "not run (no split of this epoch)"
            )
            single = _cluster_size_words(size)
            lines.append(
                f"  - Checks before reading: sample ratio {srm}; assignment re-derived from the "
                f"logged keys: {derived}; cluster size: {single}: "
                + (
                    "FAILED: the instrument is parked"
                    if not all(checks[k]["passed"] for k in _LOG_CHECKS)
                    else "passed, but the cluster-size check could not run (not parked)"
                    if size.get("state") == NOT_RUN
                    else "passed"
                )
            )
        lines.append(_audit_line(claim.get("audit")))
        if claim.get("auditSinceSettled"):
            lines.append(_audit_line(claim["auditSinceSettled"], settled=True))
        if claim["mde"] is not None:
            lines.append(
                f"  - MDE {claim['mde']:.3f} at 80% power (a power diagnostic, not the verdict)"
            )
    if report.get("mixedArtifacts"):
        lines.append(
            f"\n{report['mixedArtifacts']} mixed artifacts ({report['rowsLeftOutAsMixed']} rows) "
            "left out: their requests disagree on their arm."
        )
    if report.get("conflictingRequests"):
        lines.append(
            f"\n{report['conflictingRequests']} request ids stored more than once with different "
            f"content ({report['rowsLeftOutAsConflicting']} rows, stored before ingest was "
            "idempotent per request id) left out: which copy is true is unknown."
        )
    lines += application_ci_section(
        report.get("applicationCi") or [],
        {f"{c['workspaceId']}/{c['candidate']}" for c in report["claims"]},
    )
    for scope in report.get("scopes", []):
        lines += ["", f"#### Cells of {scope['scope']}", ""]
        lines += [
            "| situation | arm | source | resolved | successes | rate | censored share |",
            "|---|---|---|---|---|---|---|",
        ]
        for cell in scope["cells"]:
            lines.append(
                f"| {cell['situationClass']} | {cell['exposureArm']} | {cell['source']} | "
                f"{cell['resolved']} | {cell['successes']} | {_rate(cell['rate'])} | "
                f"{cell['censoredShare']:.3f} |"
            )
    lines += [
        "",
        "_A lift is claimed only when the always-valid interval's lower bound is above zero "
        "(valid however often this report is read), within one epoch, after the A/A check and "
        "the checks before reading passed; collecting or insufficient_evidence does not imply "
        "a lift. A claim confirmed unaudited is marked so: the logs alone cannot show a bias "
        "in one arm's outcome logging._",
    ]
    return "\n".join(lines)


def _rate(rate: Any) -> str:
    if isinstance(rate, dict):
        value, interval = rate.get("value"), rate.get("interval")
        if isinstance(value, int | float) and isinstance(interval, list):
            return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"
        return str(value)
    return str(rate)
