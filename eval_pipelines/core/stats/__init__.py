"""Statistics with scipy-like signatures: data positional, options keyword-only, frozen results."""

from eval_pipelines.core.stats.intervals import Interval, wilson_interval
from eval_pipelines.core.stats.paired import McNemarResult, mcnemar_exact
from eval_pipelines.core.stats.policy import INSUFFICIENT, MIN_N, is_sufficient
from eval_pipelines.core.stats.proportion import Proportion, estimate_proportion

__all__ = [
    "INSUFFICIENT",
    "MIN_N",
    "Interval",
    "McNemarResult",
    "Proportion",
    "estimate_proportion",
    "is_sufficient",
    "mcnemar_exact",
    "wilson_interval",
]
