"""The one Definitions object: every asset, asset check, job, sensor, schedule and resource of
eval_pipelines."""

import dagster as dg

from eval_pipelines.defs.embeddings import embedding_assets, embedding_index_job
from eval_pipelines.defs.executors import engine_executor
from eval_pipelines.defs.golden import golden_assets, golden_checks, golden_gate_job
from eval_pipelines.defs.golden_automation import nightly_gating_runs, workflow_revision_sensor
from eval_pipelines.defs.holdout import holdout_assets, holdout_eval_job
from eval_pipelines.defs.holdout_checks import holdout_checks
from eval_pipelines.defs.lift import (
    daily_lift_report,
    lift_assets,
    lift_checks,
    lift_ingest_job,
    lift_log_sensor,
    lift_report_job,
)
from eval_pipelines.defs.queries import evaluate_query_job, query_assets, query_checks
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines.defs.step_payloads import StepPayloadIOManager

# The engine is run configuration (see eval_pipelines.defs.executors and docs/operations.md):
# in process unless a run asks otherwise. A process per step costs several times the steps'
# own work in start-up (docs/benchmarks.md), so only a run that asks for `multiprocess` or
# `dask` pays for processes.
# Steps stay separate either way (one per variant, each with its own logs and retries).
EXECUTOR = engine_executor

defs = dg.Definitions(
    assets=[*holdout_assets, *embedding_assets, *golden_assets, *query_assets, *lift_assets],
    asset_checks=[*holdout_checks, *golden_checks, *query_checks, *lift_checks],
    jobs=[
        holdout_eval_job,
        embedding_index_job,
        golden_gate_job,
        evaluate_query_job,
        lift_ingest_job,
        lift_report_job,
    ],
    sensors=[workflow_revision_sensor, lift_log_sensor],
    schedules=[nightly_gating_runs, daily_lift_report],
    # Both read the shared location ($EVAL_PIPELINES_SHARED_DIR) when a run starts, never here.
    resources={"warehouse": WarehouseResource(), "io_manager": StepPayloadIOManager()},
    executor=EXECUTOR,
)
