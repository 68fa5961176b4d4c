"""Application CI for ``api.lift`` (spec 004's second kind of evidence): record a CI result of a
candidate, from the team's own harness or from the activation gate's runs of a workflow
revision, and read the recorded results into the ledger. Kept out of ``api/lift.py``, which
re-exports :func:`record_ci` and :class:`RecordedCI`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from eval_pipelines.api._shared import open_warehouse, resolve_warehouse
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.inputs import check_name
from eval_pipelines.core.lift.application_ci import (
    GOLDEN_GATE,
    HARNESS,
    application_ci_result,
    check_binds,
)
from eval_pipelines.core.lift.application_ci_ledger import (
    LedgerApplicationCI,
    ledger_with_application_ci,
)
from eval_pipelines.core.lift.evidence import BINDS_APPLICATION, ApplicationCI
from eval_pipelines.core.lift.ledger import LedgerClaim, ledger_claim
from eval_pipelines.core.results import JsonResult
from eval_pipelines.storage import application_ci as application_ci_store
from eval_pipelines.storage import lift as lift_store
from eval_pipelines.storage.warehouse import exists as warehouse_exists
from eval_pipelines.storage.warehouse import transaction

if TYPE_CHECKING:
    from eval_pipelines.core.golden.gate import Gate

__all__ = ["RecordedCI", "ledger_rows", "record_ci"]


@dataclass(frozen=True)
class RecordedCI(JsonResult):
    """A recorded application-CI result; ``new`` is False when the same result was recorded
    before (nothing was written, the stored one is returned). Its JSON is the result's
    document (:meth:`ApplicationCI.to_json`, evidence kind ``application_ci``) with ``new``."""

    result: ApplicationCI
    new: bool

    def to_json(self) -> dict[str, Any]:
        return {**self.result.to_json(), "new": self.new}


_HARNESS_OPTIONS = ("commit", "suite", "passed", "failed")
_GATE_OPTIONS = ("workflow", "revision")


def record_ci(
    workspace_id: str,
    *,
    candidate: str,
    commit: str | None = None,
    suite: str | None = None,
    passed: int | None = None,
    failed: int | None = None,
    skipped: int = 0,
    binds: str = BINDS_APPLICATION,
    workflow: str | None = None,
    revision: str | None = None,
    warehouse: Path | str | None = None,
) -> RecordedCI:
    """Record an application-CI result of ``candidate`` in ``workspace_id``: either the team's
    harness (``commit``, ``suite``, ``passed``, ``failed``, optionally ``skipped``, and what it
    ``binds``) or the activation gate's runs of ``revision`` of ``workflow``. Checked whole
    before anything is written (:func:`~eval_pipelines.core.lift.application_ci.\
application_ci_result`): a result that ``binds`` ``model_calls`` is refused as application
    coverage. The same result recorded again is returned with ``new`` False; another one under
    the same workspace, candidate, source, commit, suite (and golden runs) is refused
    (ConflictError).

    A gate result is read from the gating sets' runs of exactly that revision (those the gate
    counts: completed, their ``golden_run`` step succeeded): one count per gating set, passed
    when it cleared the gate; the commit is the full revision id, the suite the workflow. A
    workflow with no gating set, or a gating set with no counted run of the revision, is
    refused (nothing to record)."""
    given: dict[str, Any] = {
        "commit": commit,
        "suite": suite,
        "passed": passed,
        "failed": failed,
        "workflow": workflow,
        "revision": revision,
    }
    harness = [name for name in _HARNESS_OPTIONS if given[name] is not None]
    if skipped:
        harness.append("skipped")
    given["skipped"] = skipped
    gate = [name for name in _GATE_OPTIONS if given[name] is not None]
    if harness and gate:
        raise InputError(
            harness[0],
            given[harness[0]],
            "a result is either the team's harness (`commit`, `suite`, `passed`, `failed`) "
            "or the golden gate's runs (`workflow`, `revision`), not both",
        )
    now = datetime.now(UTC).replace(tzinfo=None)
    if gate:
        for name in _GATE_OPTIONS:
            if given[name] is None:
                raise InputError(name, None, "a golden gate result needs `workflow` and `revision`")
        # Names checked before the warehouse is opened.
        check_name(workspace_id, "workspace_id", "a workspace id")
        check_name(candidate, "candidate", "a candidate (its lever)")
        check_binds(binds)  # the gate's runs execute the workflow: application
        assert workflow is not None and revision is not None
        return _record_gate(workspace_id, candidate, workflow, revision, now, warehouse)
    for name in _HARNESS_OPTIONS:
        if given[name] is None:
            raise InputError(
                name,
                None,
                "a harness result needs `commit`, `suite`, `passed` and `failed` (or record "
                "the golden gate's runs with `workflow` and `revision`)",
            )
    result = application_ci_result(
        workspace_id=workspace_id,
        candidate=candidate,
        source=HARNESS,
        commit=commit,
        suite=suite,
        passed=passed,
        failed=failed,
        skipped=skipped,
        binds=binds,
        recorded_at=now,
    )
    with open_warehouse(warehouse, create=True) as conn, transaction(conn):
        stored, new = application_ci_store.insert_result(conn, result)
    return RecordedCI(stored, new)


def _record_gate(
    workspace_id: str,
    candidate: str,
    workflow: str,
    revision: str,
    now: datetime,
    warehouse: Path | str | None,
) -> RecordedCI:
    # The golden modules are loaded only here: recording a harness result, or reading the
    # ledger, does not load the workflows' runners.
    from eval_pipelines.api._golden_state import close_abandoned_runs, gate_decision
    from eval_pipelines.storage import workflows as workflows_store

    if not warehouse_exists(resolve_warehouse(warehouse)):
        raise InputError("workflow", workflow, "no such workflow (there is no warehouse yet)")
    with open_warehouse(warehouse) as conn, transaction(conn):
        close_abandoned_runs(conn)  # a run left `running` by a dead process is read as failed
        full = workflows_store.revision_of_workflow(conn, workflow, revision)
        gate = gate_decision(conn, full)
        result = application_ci_result(
            workspace_id=workspace_id,
            candidate=candidate,
            source=GOLDEN_GATE,
            commit=full,
            suite=workflow,
            passed=sum(1 for s in gate.sets if s.passed),
            failed=sum(1 for s in gate.sets if not s.passed),
            golden_run_ids=_gate_runs(gate, workflow, full),
            recorded_at=now,
            detail=gate.reason,
        )
        stored, new = application_ci_store.insert_result(conn, result)
    return RecordedCI(stored, new)


def _gate_runs(gate: Gate, workflow: str, revision: str) -> tuple[str, ...]:
    """The golden runs the gate read, one per gating set; refused when a set has none (the
    gate's runs of this revision are not all there: nothing to record yet)."""
    if not gate.sets:
        raise InputError(
            "workflow",
            workflow,
            "no golden set of this workflow gates activation (create one marked as a gate): "
            "there are no gate runs to record",
        )
    for gating in gate.sets:
        if gating.golden_run_id is None:
            raise InputError(
                "revision",
                revision,
                f"gating set {gating.set_name} has no completed run against this revision "
                f"(run it: eval-pipelines golden run {gating.set_name} --revision {revision}); "
                "nothing was recorded",
            )
    return tuple(s.golden_run_id for s in gate.sets if s.golden_run_id is not None)


def ledger_rows(
    conn: duckdb.DuckDBPyConnection,
) -> tuple[LedgerClaim | LedgerApplicationCI, ...]:
    """Every claim with the CI results of its candidate beside it, then each candidate with
    CI results and no live claim."""
    claims = [ledger_claim(c) for c in lift_store.claims(conn)]
    return ledger_with_application_ci(claims, application_ci_store.results(conn))
