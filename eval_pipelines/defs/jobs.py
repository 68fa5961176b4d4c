"""Jobs: the whole holdout chain for one evaluation partition."""

import dagster as dg

from eval_pipelines.defs.partitions import evaluations_partitions

HOLDOUT_JOB = "holdout_eval"

holdout_eval_job = dg.define_asset_job(
    HOLDOUT_JOB,
    selection=dg.AssetSelection.groups("holdout"),
    partitions_def=evaluations_partitions,
    description="Sample, leave out, classify per variant, score and report one evaluation.",
)
