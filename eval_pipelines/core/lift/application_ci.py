"""Application CI (stage 2 of specification 004's evidence): a CI result validated once, here.

004 keeps three kinds of evidence apart: offline screening, application CI ("your own
test/replay harness, in your own CI, binding real application code") and live confirmation.
:func:`application_ci_result` is the one public boundary where a recorded CI result is
checked and becomes an :class:`~eval_pipelines.core.lift.evidence.ApplicationCI`: a result
of the team's own harness (``harness``: commit, suite, pass counts) or of the activation
gate's runs of the workflow revision a lever changes (``golden_gate``: the golden run ids).

What the check exercised (``binds``) must be the application: a comparison of raw model
calls is refused as application coverage, whatever it passed. A recorded result never
changes a live claim's status or verdict (:func:`~eval_pipelines.core.lift.evidence.\
confirmed_improvement` is false for it): a passed CI check is not a live confirmation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.inputs import check_name
from eval_pipelines.core.lift.evidence import (
    BINDS_APPLICATION,
    MODEL_CALLS_REFUSAL,
    ApplicationCI,
)

__all__ = [
    "BINDS",
    "BINDS_MODEL_CALLS",
    "GOLDEN_GATE",
    "HARNESS",
    "SOURCES",
    "application_ci_result",
    "check_binds",
]

GOLDEN_GATE = "golden_gate"
HARNESS = "harness"
#: Where a CI result comes from: the activation gate's runs, or the team's own harness.
SOURCES = (GOLDEN_GATE, HARNESS)

BINDS_MODEL_CALLS = "model_calls"
#: What a check may say it exercised; only the application is accepted as application CI.
BINDS = (BINDS_APPLICATION, BINDS_MODEL_CALLS)

LABEL_MAX = 200
# A commit is one token (a SHA, a tag, a branch@sha): no whitespace, no control character.
_COMMIT = re.compile(rf"[^\s\x00-\x1f\x7f]{{1,{LABEL_MAX}}}")
# A suite may hold spaces ("replay smoke"), never a line break or a control character (it is
# printed on the ledger's one line per result).
_SUITE = re.compile(
    rf"[^\s\x00-\x1f\x7f](?:[^\x00-\x1f\x7f]{{0,{LABEL_MAX - 2}}}[^\s\x00-\x1f\x7f])?"
)


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(field, value, "must be a whole number >= 0")
    return value


def _recorded_at(value: Any) -> datetime:
    if not isinstance(value, datetime):
        raise InputError("recorded_at", value, "must be a datetime (UTC when it has no offset)")
    # Stored naive in UTC, as every timestamp of the warehouse.
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo is not None else value


def check_binds(binds: Any) -> str:
    """``binds`` if it is ``application``; a raw model-call comparison (``model_calls``) is
    refused as application coverage, anything else as unknown (:class:`InputError`)."""
    if binds == BINDS_MODEL_CALLS:
        raise InputError("binds", binds, MODEL_CALLS_REFUSAL)
    if binds != BINDS_APPLICATION:
        raise InputError(
            "binds",
            binds,
            f"must be {BINDS_APPLICATION} (the check exercised real application code)",
        )
    return binds


def application_ci_result(
    *,
    workspace_id: Any,
    candidate: Any,
    source: Any,
    commit: Any,
    suite: Any,
    passed: Any,
    failed: Any,
    skipped: Any = 0,
    binds: Any = BINDS_APPLICATION,
    golden_run_ids: Sequence[Any] = (),
    recorded_at: Any,
    detail: str | None = None,
) -> ApplicationCI:
    """A CI result of ``candidate`` in ``workspace_id``, checked, as application-CI evidence.

    Parameters
    ----------
    workspace_id, candidate
        The workspace and the candidate (the lever its live claim will name); each follows the
        one name rule.
    source
        ``golden_gate`` or ``harness``.
    commit
        The application revision the check ran on: 1-200 characters, no whitespace.
    suite
        What ran: 1-200 characters, no line break, no leading or trailing space.
    passed, failed, skipped
        Whole numbers >= 0; ``passed + failed`` at least 1 (a check that ran nothing is no
        evidence).
    binds
        What the check exercised: ``application``. ``model_calls`` (a comparison of raw model
        calls) is refused: it cannot claim application coverage.
    golden_run_ids
        The golden runs of a ``golden_gate`` result (at least one, each a name); none for a
        ``harness``.
    recorded_at
        When it was recorded (naive: UTC).
    detail
        The gate's reason, for ``golden_gate``.

    Returns
    -------
    ApplicationCI

    Raises
    ------
    InputError
        Naming the first field that breaks its rule, the value and the rule.
    """
    check_binds(binds)
    check_name(workspace_id, "workspace_id", "a workspace id")
    check_name(candidate, "candidate", "a candidate (its lever)")
    if source not in SOURCES:
        raise InputError("source", source, f"must be one of {', '.join(SOURCES)}")
    if not isinstance(commit, str) or _COMMIT.fullmatch(commit) is None:
        raise InputError(
            "commit",
            commit,
            f"the application revision is 1-{LABEL_MAX} characters without whitespace",
        )
    if not isinstance(suite, str) or _SUITE.fullmatch(suite) is None:
        raise InputError(
            "suite",
            suite,
            f"a suite is 1-{LABEL_MAX} characters, no line break, no leading or trailing space",
        )
    counts = [_count(value, name) for value, name in ((passed, "passed"), (failed, "failed"))]
    skips = _count(skipped, "skipped")
    if sum(counts) == 0:
        raise InputError(
            "passed", passed, "the check ran no test (passed + failed = 0): nothing to record"
        )
    runs = tuple(golden_run_ids)
    if source == GOLDEN_GATE:
        if not runs:
            raise InputError("golden_run_ids", runs, "a golden_gate result names its golden runs")
        for run_id in runs:
            check_name(run_id, "golden_run_ids", "a golden run id")
    elif runs:
        raise InputError(
            "golden_run_ids", runs, "golden runs belong to a golden_gate result, not a harness"
        )
    if detail is not None and not isinstance(detail, str):
        raise InputError("detail", detail, "must be text or None")
    return ApplicationCI(
        workspace_id=workspace_id,
        candidate=candidate,
        source=source,
        commit=commit,
        suite=suite,
        passed_count=counts[0],
        failed_count=counts[1],
        skipped_count=skips,
        golden_run_ids=runs,
        recorded_at=_recorded_at(recorded_at),
        binds=BINDS_APPLICATION,
        detail=detail,
    )
