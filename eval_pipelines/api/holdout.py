"""Holdout evaluations: start, status, wait, per-record rows (000's SDK calls)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from eval_pipelines import settings
from eval_pipelines.api._shared import EvalFailed, resolve_warehouse
from eval_pipelines.core.classify import known_classifiers
from eval_pipelines.core.errors import ConflictError, InputError, NotFoundError
from eval_pipelines.core.memo import memo_version
from eval_pipelines.core.specs import (
    DEFAULT_SEED,
    SAMPLE_SIZE_DEFAULT,
    HoldoutSpec,
    make_eval_id,
    parse_config,
    parse_grouping,
    parse_variants,
    validate_sample_size,
    validate_seed,
)
from eval_pipelines.storage import cases, evaluations, memo
from eval_pipelines.storage.warehouse import WarehouseBusy, connect, transaction

TERMINAL_FAILURES = {"FAILURE", "CANCELED"}
FINISHED = TERMINAL_FAILURES | {"SUCCESS"}
LAUNCH_MODES = ("background", "inline", "none")


def _build_spec(
    conn: Any,
    case_id: str,
    variants: Any,
    *,
    sample_size: Any,
    seed: Any,
    grouping: dict[str, Any] | None,
    group_field: str | None,
    config: Any,
    sequence_for_id: int,
) -> HoldoutSpec:
    validate_sample_size(sample_size)
    validate_seed(seed)
    info = cases.load_case(conn, case_id)
    tree = cases.load_tree(conn, info)
    grouping = dict(grouping or {})
    unknown = set(grouping) - {"mode", "threshold", "field"}
    if unknown:
        key = sorted(unknown)[0]
        raise InputError(f"grouping.{key}", grouping[key], "unknown; use mode, threshold")
    if "field" in grouping and group_field is None:
        group_field = grouping["field"]
    resolved = parse_grouping(grouping.get("mode"), grouping.get("threshold"), group_field)
    if resolved.field is not None and resolved.field not in info.metadata_columns:
        raise InputError(
            "groupField",
            resolved.field,
            f"is not a metadata column of case {case_id} (columns: {list(info.metadata_columns)})",
        )
    shared = parse_config(config, where="config", max_depth=tree.max_depth)
    pinned = shared.target_depth or info.target_depth
    entries = memo.load_entries(conn, case_id, tree)
    parsed = parse_variants(
        variants,
        shared_config=shared,
        pinned_target_depth=pinned,
        known_memo_ids={e.entry_id for e in entries},
        max_depth=tree.max_depth,
    )
    for index, variant in enumerate(parsed):
        if variant.config.classifier not in known_classifiers():
            raise InputError(
                f"variants[{index}].config.classifier",
                variant.config.classifier,
                f"unknown classifier; known: {known_classifiers()}",
            )
    return HoldoutSpec(
        eval_id=make_eval_id(case_id, sequence_for_id, seed),
        case_id=case_id,
        seed=seed,
        sample_size=sample_size,
        grouping=resolved,
        config=shared,
        target_depth=pinned,
        variants=parsed,
        records_version=info.records_version,
        tree_version=info.tree_version,
        memo_version=memo_version([e for e in entries if e.status == "active"]),
    )


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
    launch: str = "background",
) -> dict[str, Any]:
    """Register an evaluation (a dynamic partition keyed by its id) and launch its run.

    ``launch`` is ``background`` (a detached process; returns at once), ``inline`` (runs in
    this process before returning) or ``none`` (register only; materialise it from the UI or
    with ``dagster asset materialize``). Returns ``{evalId, runId, status}``.
    """
    from eval_pipelines.instance import dagster_instance

    if launch not in LAUNCH_MODES:
        raise InputError("launch", launch, f"must be one of {LAUNCH_MODES}")
    path = resolve_warehouse(warehouse)
    with connect(path) as conn:
        # Any validation error below rolls the transaction back: no sequence number is used
        # and nothing is written.
        run_id = str(uuid.uuid4()) if launch != "none" else None
        with transaction(conn):
            sequence = cases.next_eval_sequence(conn, case_id)
            spec = _build_spec(
                conn,
                case_id,
                variants,
                sample_size=sample_size,
                seed=seed,
                grouping=grouping,
                group_field=group_field,
                config=config,
                sequence_for_id=sequence,
            )
            evaluations.insert_evaluation(conn, spec, sequence)
            if run_id is not None:
                evaluations.set_run_id(conn, spec.eval_id, run_id)
    instance = dagster_instance()
    from eval_pipelines.defs.partitions import EVALUATIONS

    instance.add_dynamic_partitions(EVALUATIONS, [spec.eval_id])
    status = "REGISTERED"
    if launch == "inline":
        from eval_pipelines.launch import run_evaluation

        os.environ.setdefault(settings.WAREHOUSE_ENV, str(path))
        result = run_evaluation(instance, spec.eval_id, run_id)
        status = "SUCCESS" if result.success else "FAILURE"
    elif launch == "background":
        log_path = _launch_log(spec.eval_id)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, **{settings.WAREHOUSE_ENV: str(path)})
        with open(log_path, "ab") as log:
            subprocess.Popen(
                [sys.executable, "-m", "eval_pipelines.launch", spec.eval_id, str(run_id)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        status = "QUEUED"
    return {"evalId": spec.eval_id, "runId": run_id, "status": status}


LAUNCH_GRACE_SECONDS = 120


def _launch_log(eval_id: str) -> Path:
    return Path(os.environ["DAGSTER_HOME"]) / "eval_pipelines_launches" / f"{eval_id}.log"


def _launch_overdue(created_at: Any) -> bool:
    from datetime import UTC, datetime

    created = created_at.replace(tzinfo=UTC) if created_at.tzinfo is None else created_at
    return (datetime.now(UTC) - created).total_seconds() > LAUNCH_GRACE_SECONDS


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


def _latest_run(instance: Any, eval_id: str, launched_run_id: str | None) -> Any:
    """The newest run of this evaluation's partition (launched here, from the UI or the
    dagster CLI), else the run the API launched (it may not have started yet)."""
    from dagster import RunsFilter

    runs = instance.get_runs(filters=RunsFilter(tags={"dagster/partition": eval_id}), limit=1)
    if runs:
        return runs[0]
    return instance.get_run_by_id(launched_run_id) if launched_run_id else None


def get_holdout_eval(
    case_id: str, eval_id: str, *, warehouse: Path | str | None = None
) -> dict[str, Any]:
    """Status, each variant's step and status, sample hash, versions and (once complete) the
    report. Raises :class:`WarehouseBusy` when a run holds the warehouse for over 15 s."""
    from eval_pipelines.instance import dagster_instance

    with connect(resolve_warehouse(warehouse), read_only=True, wait_seconds=15) as conn:
        row = evaluations.evaluation_row(conn, eval_id)
        if row["case_id"] != case_id:
            raise NotFoundError(f"evalId={eval_id!r}: belongs to case {row['case_id']!r}")
        report = evaluations.load_report(conn, eval_id)
        sample_hash = evaluations.sample_hash(conn, eval_id)
    spec = json.loads(row["spec_json"])
    instance = dagster_instance()
    run = _latest_run(instance, eval_id, row["run_id"])
    run_id = run.run_id if run is not None else row["run_id"]
    run_status = run.status.value if run is not None else None
    steps = (
        _step_statuses(instance, run_id, [v["stepKey"] for v in spec["variants"]]) if run else {}
    )
    # The newest run decides: a report written by a run that is still finishing (or by an
    # earlier run while a re-run is under way) is not yet "complete".
    if run_status is not None and run_status not in FINISHED:
        status = "running"
    elif run_status in TERMINAL_FAILURES:
        status = "failed"
    elif report is not None:
        status = "complete"
    elif run_status == "SUCCESS":
        status = "failed"  # a successful run always writes the report
    elif run is None and row["run_id"] is None:
        status = "registered"
    elif run is None and _launch_overdue(row["created_at"]):
        # The background launcher creates the run within seconds; if it never did, it died
        # (bad environment, killed): say so instead of waiting forever.
        status = "failed"
    else:
        status = "running"
    result: dict[str, Any] = {
        "evalId": eval_id,
        "caseId": case_id,
        "runId": run_id,
        "status": status,
        "runStatus": run_status,
        "variants": [
            {
                "name": v["name"],
                "step": f"classify_variant[{v['stepKey']}]",
                "status": steps.get(v["stepKey"], "pending"),
            }
            for v in spec["variants"]
        ],
        "sampleHash": sample_hash,
        "recordsVersion": spec["recordsVersion"],
        "treeVersion": spec["treeVersion"],
        "memoVersion": spec["memoVersion"],
        "spec": spec,
    }
    if run is None and row["run_id"] is not None:
        result["launchLog"] = str(_launch_log(eval_id))
    if report is not None:
        result["report"] = report
    return result


def wait_for_eval(
    case_id: str,
    eval_id: str,
    *,
    timeout: float = 3600,
    poll_seconds: float = 0.5,
    warehouse: Path | str | None = None,
    progress: Any = None,
) -> dict[str, Any]:
    """Block until the report exists. Raises :class:`EvalFailed` or ``TimeoutError``."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            status = get_holdout_eval(case_id, eval_id, warehouse=warehouse)
        except WarehouseBusy:
            status = None
        if status is not None:
            summary = (status["status"], tuple(v["status"] for v in status["variants"]))
            if progress is not None and summary != last:
                progress(status)
                last = summary
            if status["status"] == "complete":
                return status
            if status["status"] == "failed":
                where = (
                    f"launcher log {status['launchLog']}"
                    if "launchLog" in status
                    else "the run in the Dagster UI"
                )
                raise EvalFailed(
                    f"evaluation {eval_id} failed (run {status['runId']}, "
                    f"{status['runStatus']}); see {where}"
                )
        if time.monotonic() > deadline:
            raise TimeoutError(f"evaluation {eval_id} still running after {timeout} s")
        time.sleep(poll_seconds)


def eval_rows(
    case_id: str,
    eval_id: str,
    *,
    variant: str | None = None,
    errors_only: bool = False,
    warehouse: Path | str | None = None,
) -> list[dict[str, Any]]:
    """One row per sampled record and variant, with correctness per level."""
    from eval_pipelines.stages.holdout import variant_outcomes

    with connect(resolve_warehouse(warehouse), read_only=True, wait_seconds=15) as conn:
        row = evaluations.evaluation_row(conn, eval_id)
        if row["case_id"] != case_id:
            raise NotFoundError(f"evalId={eval_id!r}: belongs to case {row['case_id']!r}")
        if evaluations.load_report(conn, eval_id) is None:
            raise ConflictError(
                f"evalId={eval_id!r}: not complete yet; rows exist once the report does "
                f"(eval-pipelines eval status {case_id} {eval_id} --wait)"
            )
        spec, tree, outcomes = variant_outcomes(conn, eval_id)
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


def list_evals(case_id: str, *, warehouse: Path | str | None = None) -> list[dict[str, Any]]:
    """The case's evaluations, oldest first: id, seed, sample size, grouping, report or not."""
    with connect(resolve_warehouse(warehouse), read_only=True, wait_seconds=15) as conn:
        cases.load_case(conn, case_id)
        frame = evaluations.list_evaluations(conn, case_id)
    listed = []
    for row in frame.iter_rows(named=True):
        spec = json.loads(row["spec_json"])
        listed.append(
            {
                "evalId": row["eval_id"],
                "createdAt": str(row["created_at"]),
                "seed": row["seed"],
                "sampleSize": spec["sampleSize"],
                "grouping": spec["grouping"],
                "variants": [v["name"] for v in spec["variants"]],
                "complete": bool(row["has_report"]),
            }
        )
    return listed
