"""Holdout evaluations: start, re-run, status, wait, per-record rows (000's SDK calls)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipelines.api._shared import EvalFailed, resolve_warehouse
from eval_pipelines.core.errors import ConflictError, InputError, NotFoundError
from eval_pipelines.core.holdout.classify import known_classifiers
from eval_pipelines.core.holdout.spec import (
    DEFAULT_SEED,
    SAMPLE_SIZE_DEFAULT,
    CaseContext,
    parse_holdout_request,
)
from eval_pipelines.storage import cases, evaluations, holdout, memo
from eval_pipelines.storage.warehouse import (
    CLI_WAIT_SECONDS,
    WarehouseBusy,
    connect,
    transaction,
)

KIND = "holdout"
LAUNCH_MODES = ("submit", "inline", "none")


def _case_context(conn: Any, case_id: str) -> CaseContext:
    """What the spec parser needs; cheap, because it is read while holding the write lock."""
    info = cases.load_case(conn, case_id)
    return CaseContext(
        case_id=case_id,
        records_version=info.records_version,
        tree_version=info.tree_version,
        max_depth=cases.tree_depth(conn, case_id, info.tree_version),
        target_depth=info.target_depth,
        metadata_columns=info.metadata_columns,
        memo=memo.entry_contents(conn, case_id),
        classifiers=tuple(known_classifiers()),
    )


def _launch(eval_id: str, launch: str, run_id: str | None) -> dict[str, Any]:
    """Start run ``run_id`` of the evaluation's partition; returns ``{runId, status}``."""
    from eval_pipelines import runs
    from eval_pipelines.instance import dagster_instance

    instance = dagster_instance()
    kind = runs.kind_of(KIND)
    runs.register_partition(instance, kind, eval_id)
    if launch == "none":
        return {"runId": None, "status": "registered"}
    if launch == "inline":
        ran, success = runs.execute_inline(instance, kind, eval_id, run_id=run_id)
        return {"runId": ran, "status": "complete" if success else "failed"}
    state = runs.submit(instance, kind, eval_id, run_id=run_id)
    return {"runId": state.run_id, "status": state.state}


# Above this many estimated tokens an evaluation needs an explicit yes (issue 7).
TOKEN_CONFIRMATION_LIMIT = 400_000


class TokenConfirmationNeeded(ConflictError):
    """The evaluation would spend more tokens than the limit; nothing has been written."""

    def __init__(self, estimate: dict[str, Any]) -> None:
        self.estimate = estimate
        super().__init__(
            f"tokens={estimate['totalTokens']:,}: the estimate is above the limit of "
            f"{TOKEN_CONFIRMATION_LIMIT:,} tokens ({_per_variant(estimate)}); confirm with --yes"
        )


def _per_variant(estimate: dict[str, Any]) -> str:
    return ", ".join(
        f"{v['name']}: {v['records']} x {v['tokensPerRecord']:,}" for v in estimate["variants"]
    )


def estimate_tokens(spec: Any) -> dict[str, Any]:
    """Tokens the evaluation is expected to spend: per variant, the sample size times its
    classifier's declared tokens per record (the built-in knn-vote declares 0)."""
    from eval_pipelines.core.holdout.classify import tokens_per_record

    variants = [
        {
            "name": v.name,
            "classifier": v.config.classifier,
            "records": spec.sample_size,
            "tokensPerRecord": tokens_per_record(v.config.classifier, v.config),
        }
        for v in spec.variants
    ]
    for v in variants:
        v["tokens"] = v["records"] * v["tokensPerRecord"]
    return {"variants": variants, "totalTokens": sum(v["tokens"] for v in variants)}


def start_holdout_eval(
    case_id: str,
    variants: Any,
    *,
    sample_size: Any = SAMPLE_SIZE_DEFAULT,
    seed: Any = DEFAULT_SEED,
    grouping: dict[str, Any] | None = None,
    group_field: str | None = None,
    config: Any = None,
    warehouse: Path | str | None = None,
    launch: str = "submit",
    confirm_tokens: bool = False,
    aa: bool = False,
    leakage_check: bool = False,
) -> dict[str, Any]:
    """Register an evaluation (a dynamic partition keyed by its id) and launch its run.

    ``aa`` adds the A/A arm (the baseline classified twice; the report gives the flip rate
    and the false-positive rate of 20 seeded half splits); ``leakage_check`` also scores the
    baseline ungrouped on the same sample and reports how much grouping moved each level.

    Before anything is written the tokens the variants' classifiers expect to spend are
    estimated (sample size x each classifier's declared tokens per record); above
    :data:`TOKEN_CONFIRMATION_LIMIT` the evaluation is refused with
    :class:`TokenConfirmationNeeded` unless ``confirm_tokens``.

    ``launch`` is ``submit`` (an ordinary Dagster run through the instance's run queue;
    returns at once), ``inline`` (runs in this process before returning) or ``none``
    (register only; materialise it from the UI or with ``dagster asset materialize``).
    Returns ``{evalId, runId, status}``.
    """
    if launch not in LAUNCH_MODES:
        raise InputError("launch", launch, f"must be one of {LAUNCH_MODES}")
    # The run id is written before the run exists: a warehouse that cannot take the write
    # refuses the evaluation before anything runs.
    run_id = str(uuid.uuid4()) if launch != "none" else None
    with connect(resolve_warehouse(warehouse)) as conn:
        # Any validation error below rolls the transaction back: no sequence number is used
        # and nothing is written.
        with transaction(conn):
            context = _case_context(conn, case_id)
            sequence = cases.next_eval_sequence(conn, case_id)
            spec = parse_holdout_request(
                variants,
                case=context,
                sequence=sequence,
                sample_size=sample_size,
                seed=seed,
                grouping=grouping,
                group_field=group_field,
                config=config,
                aa=aa,
                leakage_check=leakage_check,
            )
            estimate = estimate_tokens(spec)
            if estimate["totalTokens"] > TOKEN_CONFIRMATION_LIMIT and not confirm_tokens:
                raise TokenConfirmationNeeded(estimate)
            evaluations.insert_evaluation(
                conn,
                eval_id=spec.eval_id,
                kind=KIND,
                case_id=case_id,
                sequence=sequence,
                seed=spec.seed,
                spec=spec.to_json(),
                run_id=run_id,
            )
    return {
        "evalId": spec.eval_id,
        **_launch(spec.eval_id, launch, run_id),
        "estimatedTokens": estimate["totalTokens"],
    }


def rerun_holdout_eval(
    case_id: str,
    eval_id: str,
    *,
    warehouse: Path | str | None = None,
    launch: str = "submit",
) -> dict[str, Any]:
    """Run an existing evaluation again from its stored spec (same sample, same pinned
    versions and memo): the report it writes is identical unless a classifier changed."""
    if launch not in ("submit", "inline"):
        raise InputError("launch", launch, "must be submit or inline")
    run_id = str(uuid.uuid4())
    with connect(resolve_warehouse(warehouse)) as conn, transaction(conn):
        _own_evaluation(conn, case_id, eval_id)
        evaluations.set_run_id(conn, eval_id, run_id)
    return {"evalId": eval_id, **_launch(eval_id, launch, run_id)}


def _own_evaluation(conn: Any, case_id: str, eval_id: str) -> evaluations.EvaluationRow:
    row = evaluations.evaluation_row(conn, eval_id)
    if row.case_id != case_id:
        raise NotFoundError(f"evalId={eval_id!r}: belongs to case {row.case_id!r}")
    if row.kind != KIND:
        raise ConflictError(f"evalId={eval_id!r}: is a {row.kind} evaluation, not {KIND}")
    return row


def _step_statuses(instance: Any, run_id: str, step_keys: list[str]) -> dict[str, str]:
    from dagster import DagsterEventType

    statuses = {key: "pending" for key in step_keys}
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


def evaluation_status(report_run_id: str | None, has_report: bool, run: Any) -> str:
    """The evaluation's status from its stored report and the newest run's state.

    ``complete`` once a report exists and the run that wrote it has finished (a re-run in
    progress or failed leaves the earlier report complete; the run says what it is doing);
    without a report, the newest run's state (``incomplete`` when it succeeded without
    writing the report), or ``registered`` when none was launched.
    """
    if has_report:
        closing = run is not None and not run.finished and run.run_id == report_run_id
        return "running" if closing else "complete"
    if run is None:
        return "registered"
    # A run that succeeded without writing the report materialised only part of the chain.
    return {"succeeded": "incomplete"}.get(run.state, run.state)


@dataclass(frozen=True)
class _Stored:
    """What the warehouse says about an evaluation."""

    row: evaluations.EvaluationRow
    report: evaluations.StoredReport | None
    sample_hash: str | None


def _read_stored(case_id: str, eval_id: str, warehouse: Path | str | None) -> _Stored:
    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        row = _own_evaluation(conn, case_id, eval_id)
        return _Stored(
            row, evaluations.load_report(conn, eval_id), holdout.sample_hash(conn, eval_id)
        )


def _status(instance: Any, stored: _Stored, run: Any) -> dict[str, Any]:
    """The status document from the stored evaluation and its newest run's state."""
    spec, report = stored.row.spec, stored.report
    steps = (
        _step_statuses(instance, run.run_id, [v["stepKey"] for v in spec["variants"]])
        if run is not None
        else {}
    )
    result: dict[str, Any] = {
        "evalId": stored.row.eval_id,
        "caseId": stored.row.case_id,
        "kind": KIND,
        "status": evaluation_status(report.run_id if report else None, report is not None, run),
        "runId": run.run_id if run else stored.row.run_id,
        "run": run.to_json() if run else None,
        "variants": [
            {
                "name": v["name"],
                "step": f"classify_variant[{v['stepKey']}]",
                "status": steps.get(v["stepKey"], "pending"),
            }
            for v in spec["variants"]
        ],
        "sampleHash": stored.sample_hash,
        "recordsVersion": spec["recordsVersion"],
        "treeVersion": spec["treeVersion"],
        "memoVersion": spec["memoVersion"],
        "spec": spec,
    }
    if report is not None:
        result["report"] = report.report
        result["reportMarkdown"] = report.markdown
        result["reportRunId"] = report.run_id
    return result


def _newest_run_state(instance: Any, eval_id: str) -> Any:
    from eval_pipelines import runs

    newest = runs.newest_run(instance, eval_id)
    return runs.run_state(instance, newest) if newest is not None else None


def get_holdout_eval(
    case_id: str, eval_id: str, *, warehouse: Path | str | None = None
) -> dict[str, Any]:
    """Status, the newest run and its state (with the reason when it failed), each variant's
    step, the versions and, once complete, the report. Raises :class:`WarehouseBusy` when
    another process holds the warehouse for over 15 s."""
    from eval_pipelines import runs
    from eval_pipelines.instance import dagster_instance

    stored = _read_stored(case_id, eval_id, warehouse)
    instance = dagster_instance()
    runs.reap_dead_runs(instance)
    run = _newest_run_state(instance, eval_id)
    if run is not None and run.state == "queued":
        runs.dispatch_if_needed(instance)  # e.g. the daemon stopped after the run was queued
    return _status(instance, stored, run)


# While waiting, the run's state is read from the Dagster instance every second (cheap); the
# warehouse is read once it has finished, and dead runs and the queue are looked after every
# 10 s, so many waiting clients do not take CPU or the DuckDB lock from the runs they wait for.
POLL_SECONDS = 1.0
HOUSEKEEPING_SECONDS = 10.0


def wait_for_eval(
    case_id: str,
    eval_id: str,
    *,
    timeout: float = 3600,
    poll_seconds: float = POLL_SECONDS,
    warehouse: Path | str | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """Block until the newest run (or ``run_id``) has finished and return the status.

    Raises :class:`EvalFailed` with the reason when there is no report once it has finished
    (the run failed, was canceled, materialised only part of the chain, or none was launched),
    and when the run waited for (``run_id``) failed even though an earlier report stands;
    ``TimeoutError`` after ``timeout`` seconds.
    """
    from eval_pipelines import runs
    from eval_pipelines.instance import dagster_instance

    deadline = time.monotonic() + timeout
    instance = dagster_instance()
    stored = _read_stored(case_id, eval_id, warehouse)
    last_progress = None
    housekeeping_due = 0.0
    while True:
        if time.monotonic() >= housekeeping_due:
            runs.reap_dead_runs(instance)
            runs.dispatch_if_needed(instance)
            housekeeping_due = time.monotonic() + HOUSEKEEPING_SECONDS
        run = _newest_run_state(instance, eval_id)
        waiting_for_other = run_id is not None and (run is None or run.run_id != run_id)
        if not waiting_for_other and (run is None or run.finished):
            fresh: _Stored | None
            try:
                fresh = _read_stored(case_id, eval_id, warehouse)
            except WarehouseBusy:
                fresh = None  # ask again on the next poll
            if fresh is not None:
                stored = fresh
                status = _status(instance, stored, run)
                if progress is not None:
                    progress(status)
                if status["status"] != "running":
                    return _finished(case_id, status, waited_for_run=run_id is not None)
        elif progress is not None:
            status = _status(instance, stored, run)
            summary = (status["status"], tuple(v["status"] for v in status["variants"]))
            if summary != last_progress:
                progress(status)
                last_progress = summary
        if time.monotonic() > deadline:
            raise TimeoutError(f"evaluation {eval_id} still running after {timeout:g} s")
        time.sleep(poll_seconds)


def _finished(case_id: str, status: dict[str, Any], *, waited_for_run: bool) -> dict[str, Any]:
    """The status of a finished wait, or :class:`EvalFailed` saying why there is no report
    (or, when the caller waited for one run, why that run did not write it)."""
    eval_id, run = status["evalId"], status["run"]
    failed = run is not None and run["state"] in ("failed", "canceled")
    if status["status"] == "complete" and not (waited_for_run and failed):
        return status
    if failed:
        stands = (
            f"; the report of run {status['reportRunId']} still stands"
            if status["status"] == "complete"
            else ""
        )
        raise EvalFailed(
            f"evaluation {eval_id}: run {run['runId']} {run['state']}: "
            f"{run['reason'] or 'see the run in the Dagster UI'}{stands}",
            status,
        )
    if status["status"] == "registered":
        raise EvalFailed(
            f"evaluation {eval_id} has no run: start one with "
            f"'eval-pipelines eval rerun {case_id} {eval_id}'",
            status,
        )
    raise EvalFailed(
        f"evaluation {eval_id}: run {run['runId']} finished without writing the report (it "
        f"materialised only some assets); run the whole evaluation with "
        f"'eval-pipelines eval rerun {case_id} {eval_id}'",
        status,
    )


def eval_rows(
    case_id: str,
    eval_id: str,
    *,
    variant: str | None = None,
    errors_only: bool = False,
    warehouse: Path | str | None = None,
) -> list[dict[str, Any]]:
    """One row per sampled record and variant, with correctness per level and the record's
    cluster (records held out together share one; the paired intervals resample clusters),
    so every figure of the report can be recomputed from the rows.

    ``errors_only`` keeps the rows that are not right at every target depth (wrong, declined
    or failed).
    """
    from eval_pipelines.stages.holdout import evaluation_clusters, variant_outcomes

    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        _own_evaluation(conn, case_id, eval_id)
        if not evaluations.has_report(conn, eval_id):
            raise ConflictError(
                f"evalId={eval_id!r}: not complete yet; rows exist once the report does "
                f"(eval-pipelines eval status {case_id} {eval_id} --wait)"
            )
        spec, tree, outcomes = variant_outcomes(conn, eval_id)
        clusters = evaluation_clusters(conn, eval_id)
    names = [v.name for v in spec.variants]
    if variant is not None and variant not in names:
        raise InputError("--variant", variant, f"is not a variant of {eval_id}: {names}")
    rows = []
    for name in names:
        if variant is not None and name != variant:
            continue
        for record in outcomes[name].iter_rows(named=True):
            correct = {
                str(level.depth): record[f"right_{level.depth}"]
                for level in tree.levels
                if record[f"right_{level.depth}"] is not None
            }
            if errors_only and all(correct.get(str(d), True) for d in spec.target_depth):
                continue
            rows.append(
                {
                    "recordKey": record["record_key"],
                    "cluster": clusters[record["record_key"]],
                    "variant": name,
                    "label": record["label"],
                    "prediction": record["code"],
                    "confidence": record["confidence"],
                    "route": record["route"],
                    "correct": correct,
                    "candidates": json.loads(record["candidates"]),
                    "effectiveCandidates": record["effective_candidates"],
                    "memoApplied": json.loads(record["memo_applied"]),
                    "error": record["error"],
                }
            )
    return rows


def prune_partitions(*, warehouse: Path | str | None = None) -> list[str]:
    """Delete partition keys of ``holdout_evaluations`` that name no registered evaluation (a
    key added in the UI's Materialize dialog has no spec, and its failed runs turn the asset
    graph red until the key is gone). Returns the keys deleted."""
    from eval_pipelines import runs
    from eval_pipelines.instance import dagster_instance

    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        registered = set(evaluations.all_evaluation_ids(conn, KIND))
    return runs.prune_partitions(dagster_instance(), runs.kind_of(KIND), registered)


def list_evals(case_id: str, *, warehouse: Path | str | None = None) -> list[dict[str, Any]]:
    """The case's evaluations, oldest first: id, kind, seed, sample size, grouping, versions,
    whether a report exists."""
    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        cases.load_case(conn, case_id)
        frame = evaluations.list_evaluations(conn, case_id)
    listed = []
    for row in frame.iter_rows(named=True):
        spec = json.loads(row["spec_json"])
        listed.append(
            {
                "evalId": row["eval_id"],
                "kind": row["kind"] or KIND,
                "createdAt": str(row["created_at"]),
                "seed": row["seed"],
                "sampleSize": spec["sampleSize"],
                "grouping": spec["grouping"],
                "variants": [v["name"] for v in spec["variants"]],
                "recordsVersion": spec["recordsVersion"],
                "memoVersion": spec["memoVersion"],
                "complete": bool(row["has_report"]),
            }
        )
    return listed
