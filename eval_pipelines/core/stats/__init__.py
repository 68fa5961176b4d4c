"""Statistics with scipy-like signatures: data positional, options keyword-only, frozen results."""

from eval_pipelines.core.stats.aa import (
    AACheck,
    UnpairedDifference,
    aa_check,
    unpaired_difference,
    unpaired_verdict,
)
from eval_pipelines.core.stats.bootstrap import PairedDifference, paired_difference
from eval_pipelines.core.stats.intervals import Interval, wilson_interval
from eval_pipelines.core.stats.mean_difference import MeanDifference, unpaired_mean_difference
from eval_pipelines.core.stats.multiple import holm
from eval_pipelines.core.stats.paired import McNemarResult, mcnemar_exact
from eval_pipelines.core.stats.policy import INSUFFICIENT, MIN_N, is_sufficient
from eval_pipelines.core.stats.power import (
    minimum_detectable_effect,
    paired_power,
    paired_sample_size,
)
from eval_pipelines.core.stats.proportion import Proportion, estimate_proportion
from eval_pipelines.core.stats.verdict import (
    BETTER,
    NO_DETECTABLE_DIFFERENCE,
    WORSE,
    verdict,
)

__all__ = [
    "AACheck",
    "BETTER",
    "INSUFFICIENT",
    "MIN_N",
    "NO_DETECTABLE_DIFFERENCE",
    "WORSE",
    "Interval",
    "McNemarResult",
    "MeanDifference",
    "PairedDifference",
    "Proportion",
    "UnpairedDifference",
    "aa_check",
    "estimate_proportion",
    "holm",
    "is_sufficient",
    "mcnemar_exact",
    "minimum_detectable_effect",
    "paired_difference",
    "paired_power",
    "paired_sample_size",
    "unpaired_difference",
    "unpaired_mean_difference",
    "unpaired_verdict",
    "verdict",
    "wilson_interval",
]
