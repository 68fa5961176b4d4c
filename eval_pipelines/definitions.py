"""The one Definitions object: every asset, job and resource of eval_pipelines."""

import dagster as dg

from eval_pipelines.defs.holdout_assets import holdout_assets
from eval_pipelines.defs.jobs import holdout_eval_job
from eval_pipelines.defs.resources import WarehouseResource

defs = dg.Definitions(
    assets=holdout_assets,
    jobs=[holdout_eval_job],
    resources={"warehouse": WarehouseResource()},
)
