"""The sample ratio check (SRM) of a live experiment's logs, before its lift is read.

The clusters of the ``treated`` and ``lever_holdout`` arms against the configured
``lever_holdout_share`` (clusters, not requests: the cluster is what is randomised). An
exact two-sided binomial test (:func:`scipy.stats.binomtest`); p below
:data:`SRM_ALPHA` = 0.001 fails, the strict threshold Microsoft ExP and Optimizely use,
so a healthy experiment fails it one time in a thousand. Trusted experimentation platforms
run it before reading a result [1]_ [2]_.

References
----------
.. [1] R. Kohavi, D. Tang and Y. Xu, "Trustworthy Online Controlled Experiments", Cambridge
       University Press (2020), chapter 21 (sample ratio mismatch and other guardrails).
.. [2] A. Fabijan et al., "Diagnosing Sample Ratio Mismatch in Online Controlled
       Experiments", KDD 2019 (p < 0.0005 used at Microsoft; 0.001 here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines.core.lift.check_states import CONTROL, TREATED

__all__ = ["SRM_ALPHA", "SampleRatioCheck", "sample_ratio_check"]

#: A sample-ratio p-value below this fails the check.
SRM_ALPHA = 0.001


@dataclass(frozen=True)
class SampleRatioCheck:
    """Clusters per arm against the configured share (None fields: not run)."""

    treated_clusters: int
    control_clusters: int
    expected_control_share: float | None
    p_value: float | None

    @property
    def ran(self) -> bool:
        return self.p_value is not None

    @property
    def passed(self) -> bool:
        return self.p_value is None or self.p_value >= SRM_ALPHA

    def to_json(self) -> dict[str, Any]:
        return {
            "treatedClusters": self.treated_clusters,
            "controlClusters": self.control_clusters,
            "expectedControlShare": self.expected_control_share,
            "pValue": None if self.p_value is None else float(f"{self.p_value:.6g}"),
            "alpha": SRM_ALPHA,
            "ran": self.ran,
            "passed": self.passed,
        }


def sample_ratio_check(contrast: pl.DataFrame, *, config: LiftConfig | None) -> SampleRatioCheck:
    """The sample ratio check of one scope's ``treated`` and ``lever_holdout`` rows (with
    ``exposure_arm`` and ``cluster``) under the split ``config`` (None: not known, not run)."""
    clusters = contrast.group_by("exposure_arm").agg(pl.col("cluster").n_unique().alias("n"))
    counts = dict(clusters.iter_rows())
    treated, control = int(counts.get(TREATED, 0)), int(counts.get(CONTROL, 0))
    share = p_value = None
    if config is not None and config.lever is not None and treated + control > 0:
        share = config.lever_holdout_share
        # Imported here: scipy.stats is slow to import (docs/benchmarks.md), and every process
        # that loads the definitions would pay for it.
        from scipy import stats

        p_value = float(stats.binomtest(control, treated + control, share).pvalue)
    return SampleRatioCheck(treated, control, share, p_value)
