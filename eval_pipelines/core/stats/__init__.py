"""Statistics with scipy-like signatures: data positional, options keyword-only, frozen results."""

from eval_pipelines.core.stats.bootstrap import PairedDifference, paired_difference
from eval_pipelines.core.stats.intervals import Interval, wilson_interval
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
    "INSUFFICIENT",
    "MIN_N",
    "Interval",
    "McNemarResult",
    "Proportion",
    "estimate_proportion",
    "is_sufficient",
    "mcnemar_exact",
    "wilson_interval",
    "BETTER",
    "NO_DETECTABLE_DIFFERENCE",
    "PairedDifference",
    "WORSE",
    "holm",
    "minimum_detectable_effect",
    "paired_difference",
    "paired_power",
    "paired_sample_size",
    "verdict",
]

from eval_pipelines.core.stats.aa import (  # noqa: E402
    AACheck,
    UnpairedDifference,
    aa_check,
    unpaired_difference,
    unpaired_verdict,
)

__all__ += [
    "AACheck",
    "UnpairedDifference",
    "aa_check",
    "unpaired_difference",
    "unpaired_verdict",
]
