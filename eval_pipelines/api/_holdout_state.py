"""A holdout evaluation's status document (:class:`HoldoutStatus`), assembled from what the
warehouse stores and the evaluation's newest Dagster run: shared by starting, following and
reading evaluations (:mod:`eval_pipelines.api.holdout`, :mod:`eval_pipelines.api.holdout_status`,
:mod:`eval_pipelines.api.holdout_results`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipelines.api._shared import resolve_warehouse, stored_by_a_succeeded_step
from eval_pipelines.core.errors import ConflictError, NotFoundError
from eval_pipelines.core.results import JsonResult, json_field
from eval_pipelines.storage import holdout as holdout_store
from eval_pipelines.storage import holdout_evaluations as holdout_evaluations_store
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, connect

KIND = "holdout"


@dataclass(frozen=True)
class RunInfo(JsonResult):
    """A Dagster run of the evaluation: its id, state (``queued``, ``running``,
    ``succeeded``, ``failed``, ``canceled``), Dagster's own status and, when it did not
    succeed, the reason."""

    run_id: str
    state: str
    dagster_status: str
    reason: str | None

    @property
    def finished(self) -> bool:
        # runs.model.FINISHED_STATES, not imported here: that module imports dagster.
        return self.state in ("succeeded", "failed", "canceled")


# A variant's step when the newest run was launched without it (a partial run from the UI).
NOT_IN_RUN = "not in this run"
# The asset whose materialisation is the evaluation's report, and the one whose steps
# classify (one per variant).
REPORT_ASSET = "eval_report"
_CLASSIFY_ASSET = "variant_predictions"


@dataclass(frozen=True)
class VariantStep(JsonResult):
    """A variant's classify step in the newest run: ``pending``, ``running``, ``retrying``,
    ``succeeded``, ``failed``, or ``not in this run`` when the run did not select it."""

    name: str
    step: str
    status: str


@dataclass(frozen=True)
class HoldoutStatus(JsonResult):
    """The status document of a holdout evaluation
    (:func:`~eval_pipelines.api.holdout_status.get_holdout_eval`).

    ``status`` is ``registered``, ``queued``, ``running``, ``complete``, ``incomplete``,
    ``failed``, ``canceled`` or ``unverified`` (a report, but no run of the evaluation in this
    Dagster instance); ``run`` is the newest run (None before any); ``spec`` is the
    stored spec document; ``report`` is the 000 report document, present with
    ``report_markdown`` and ``report_run_id`` (the run that wrote it) once one is stored.
    ``run_assets`` (``runAssets``, left out otherwise) lists the assets the newest run
    selected when it was launched for only part of the chain, without ``eval_report``: the
    status is then that run's, never ``complete``."""

    eval_id: str
    case_id: str
    kind: str
    status: str
    run_id: str | None
    run: RunInfo | None
    variants: tuple[VariantStep, ...]
    sample_hash: str | None
    records_version: str
    tree_version: str
    memo_version: str
    spec: dict[str, Any]
    report: dict[str, Any] | None = None
    report_markdown: str | None = None
    report_run_id: str | None = None
    run_assets: tuple[str, ...] | None = json_field(omit_none=True, default=None)

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        if self.report is None:
            # Before a report exists the document has none of its three keys.
            for key in ("report", "reportMarkdown", "reportRunId"):
                del document[key]
        return document


def own_evaluation(
    conn: Any, case_id: str, eval_id: str
) -> holdout_evaluations_store.EvaluationRow:
    row = holdout_evaluations_store.evaluation_row(conn, eval_id)
    if row.case_id != case_id:
        raise NotFoundError(f"evalId={eval_id!r}: belongs to case {row.case_id!r}")
    if row.kind != KIND:
        raise ConflictError(f"evalId={eval_id!r}: is a {row.kind} evaluation, not {KIND}")
    return row


@dataclass(frozen=True)
class _Selection:
    """What a run was launched to materialise: ``assets`` (asset names) and ``step_keys``,
    each None when the run selected the whole job (as every run the CLI starts does)."""

    assets: frozenset[str] | None
    step_keys: tuple[str, ...] | None

    @classmethod
    def of(cls, run: Any) -> _Selection:
        assets = run.asset_selection
        steps = run.step_keys_to_execute
        return cls(
            None if assets is None else frozenset(key.to_user_string() for key in assets),
            None if steps is None else tuple(steps),
        )

    def selects(self, asset: str) -> bool:
        return (self.assets is None or asset in self.assets) and (
            self.step_keys is None
            or any(key == asset or key.startswith(f"{asset}.") for key in self.step_keys)
        )

    def selects_variant(self, step_key: str) -> bool:
        if not self.selects(_CLASSIFY_ASSET):
            return False
        # Classify steps are mapped at run time: a run that names none of them runs them all.
        named = [key for key in self.step_keys or () if "classify_variant[" in key]
        return not named or any(
            key.endswith((f"classify_variant[{step_key}]", "classify_variant[?]")) for key in named
        )

    def names(self) -> tuple[str, ...]:
        """The assets selected, sorted (from the step keys when the run named only steps)."""
        if self.assets is not None:
            return tuple(sorted(self.assets))
        return tuple(sorted({key.split(".")[0] for key in self.step_keys or ()}))


def _step_statuses(
    instance: Any, run_id: str, step_keys: list[str], selection: _Selection
) -> dict[str, str]:
    from dagster import DagsterEventType

    statuses = {
        key: "pending" if selection.selects_variant(key) else NOT_IN_RUN for key in step_keys
    }
    events = {
        DagsterEventType.STEP_START: "running",
        DagsterEventType.STEP_SUCCESS: "succeeded",
        DagsterEventType.STEP_FAILURE: "failed",
        DagsterEventType.STEP_UP_FOR_RETRY: "retrying",
    }
    for record in instance.all_logs(run_id, of_type=set(events)):
        event = record.dagster_event
        if event is None or event.step_key is None:
            continue
        for key in step_keys:
            if event.step_key.endswith(f"classify_variant[{key}]"):
                statuses[key] = events[event.event_type]
    return statuses


def _evaluation_status(
    report_run_id: str | None, has_report: bool, run: RunInfo | None, *, writes_report: bool
) -> str:
    """The evaluation's status from its stored report and the newest run's state.

    ``has_report`` is true only for a report whose ``eval_report`` step succeeded
    (:func:`stored_by_a_succeeded_step`), or that its run, still running, has just written.
    ``complete`` once a report exists that matches the newest run: the run wrote it and has
    finished, or the run was launched for the whole chain (``writes_report``: a re-run in
    progress or failed leaves the earlier report complete; the run says what it is doing).
    Otherwise the newest run's state (``incomplete`` when it succeeded without writing the
    report: it materialised only part of the chain, e.g. a partial run from the UI, which
    may have replaced rows the earlier report was computed from), or ``registered`` when none
    was launched. A report with no run of the evaluation in this Dagster instance is
    ``unverified``, never ``complete``: it was written from another instance (another
    ``DAGSTER_HOME``), or its runs were deleted, so nothing here says no newer run replaced
    part of what it was computed from.
    """
    if run is None:
        return "unverified" if has_report else "registered"
    if has_report and (run.run_id == report_run_id or writes_report):
        closing = not run.finished and run.run_id == report_run_id
        return "running" if closing else "complete"
    # A run that succeeded without writing the report materialised only part of the chain.
    return {"succeeded": "incomplete"}.get(run.state, run.state)


@dataclass(frozen=True)
class StoredEvaluation:
    """What the warehouse says about an evaluation."""

    row: holdout_evaluations_store.EvaluationRow
    report: holdout_evaluations_store.StoredReport | None
    sample_hash: str | None


def read_stored(case_id: str, eval_id: str, warehouse: Path | str | None) -> StoredEvaluation:
    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        row = own_evaluation(conn, case_id, eval_id)
        return StoredEvaluation(
            row,
            holdout_evaluations_store.load_report(conn, eval_id),
            holdout_store.sample_hash(conn, eval_id),
        )


def _run_info(instance: Any, run: Any) -> RunInfo:
    from eval_pipelines import runs

    state = runs.run_state(instance, run)
    return RunInfo(state.run_id, state.state, state.dagster_status, state.reason)


def status_document(instance: Any, stored: StoredEvaluation, dagster_run: Any) -> HoldoutStatus:
    """The status document from the stored evaluation and its newest Dagster run."""
    spec, report = stored.row.spec, stored.report
    run = _run_info(instance, dagster_run) if dagster_run is not None else None
    selection = _Selection.of(dagster_run) if dagster_run is not None else _Selection(None, None)
    steps = (
        _step_statuses(instance, run.run_id, [v["stepKey"] for v in spec["variants"]], selection)
        if run is not None
        else {}
    )
    writes_report = selection.selects(REPORT_ASSET)
    if report is not None and not (
        run is not None and not run.finished and run.run_id == report.run_id
    ):
        if not stored_by_a_succeeded_step(instance, report.run_id, REPORT_ASSET):
            report = None  # written by a step that did not succeed: it does not count
    return HoldoutStatus(
        eval_id=stored.row.eval_id,
        case_id=stored.row.case_id,
        kind=KIND,
        status=_evaluation_status(
            report.run_id if report else None,
            report is not None,
            run,
            writes_report=writes_report,
        ),
        run_id=run.run_id if run else stored.row.run_id,
        run=run,
        variants=tuple(
            VariantStep(
                v["name"],
                f"classify_variant[{v['stepKey']}]",
                steps.get(v["stepKey"], "pending"),
            )
            for v in spec["variants"]
        ),
        sample_hash=stored.sample_hash,
        records_version=spec["recordsVersion"],
        tree_version=spec["treeVersion"],
        memo_version=spec["memoVersion"],
        spec=spec,
        report=report.report if report is not None else None,
        report_markdown=report.markdown if report is not None else None,
        report_run_id=report.run_id if report is not None else None,
        run_assets=None if run is None or writes_report else selection.names(),
    )


# The events that change what a progress line says: the run's start and end, the classify
# steps' starts, ends and retries.
PROGRESS_EVENTS = (
    "RUN_START",
    "RUN_SUCCESS",
    "RUN_FAILURE",
    "RUN_CANCELED",
    "STEP_START",
    "STEP_SUCCESS",
    "STEP_FAILURE",
    "STEP_UP_FOR_RETRY",
)


def progress_events(
    instance: Any,
    stored: StoredEvaluation,
    progress: Callable[[HoldoutStatus], None],
    run_id: str | None,
) -> Callable[[Any], None]:
    """An ``on_event`` that calls ``progress`` with the status document at the run's first
    event and whenever the run's state or a variant step's changes (the lines a waiting
    client prints)."""

    told: list[tuple[Any, ...]] = []

    def tell() -> None:
        current = instance.get_run_by_id(run_id)
        status = status_document(instance, stored, current)
        summary = (status.status, tuple(v.status for v in status.variants))
        if not told or summary != told[-1]:
            told.append(summary)
            progress(status)

    def on_event(event: Any) -> None:
        if not told or (
            event.event_type.value in PROGRESS_EVENTS
            and (event.step_key is None or "classify_variant[" in event.step_key)
        ):
            tell()

    return on_event
