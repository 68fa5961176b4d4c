"""The holdout job run through Dagster's own execute_job under a run config (an executor, the
warehouse's paths), and the stored reports of two runs compared without their wall times:
shared by the executor tests (in process, Dask, a process per step) and the plug-in and chat
variants run on Dask."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipelines.definitions import defs
from eval_pipelines.storage.holdout_evaluations import StoredReport, load_report
from eval_pipelines.storage.warehouse import connect


def holdout_eval() -> dg.JobDefinition:
    """The job as the code location defines it, executor binding included (module level, so
    every worker process reconstructs it)."""
    return defs.resolve_job_def("holdout_eval")


def run_holdout(
    instance: dg.DagsterInstance, eval_id: str, run_config: dict[str, Any]
) -> dg.ExecuteJobResult:
    result = dg.execute_job(
        dg.reconstructable(holdout_eval),
        instance=instance,
        run_config=run_config,
        tags={"dagster/partition": eval_id},
    )
    assert result.success
    return result


def stored_report(workdir: Path, eval_id: str) -> StoredReport:
    with connect(workdir / "warehouse.duckdb", read_only=True) as conn:
        stored = load_report(conn, eval_id)
    assert stored is not None
    return stored


def without_wall_times(report: dict[str, Any]) -> dict[str, Any]:
    """The report minus the only fields that depend on the machine and the moment: each
    variant's classification time (``variants[].usage.seconds``) and each retrieval's time
    (``retrievals[].seconds``). Run id and creation time are columns beside the report JSON,
    not in it, so they are never compared."""
    report = copy.deepcopy(report)
    for variant in report["variants"]:
        variant["usage"].pop("seconds")
    for retrieval in report.get("retrievals", []):
        retrieval.pop("seconds")
    return report


def assert_same_report(first: StoredReport, second: StoredReport) -> None:
    assert without_wall_times(second.report) == without_wall_times(first.report)
    assert second.markdown == first.markdown  # it shows no wall times
    assert second.run_id != first.run_id  # the second run replaced the first run's report
