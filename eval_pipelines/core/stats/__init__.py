"""Statistics with scipy-like signatures: data positional, options keyword-only, frozen results."""

from eval_pipelines.core.stats.intervals import Interval, wilson_interval
from eval_pipelines.core.stats.paired import McNemarResult, mcnemar_exact

__all__ = ["Interval", "McNemarResult", "mcnemar_exact", "wilson_interval"]
