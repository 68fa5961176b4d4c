"""Adjusting p-values when one baseline is compared with several candidates."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def holm(pvalues: Sequence[float] | np.ndarray) -> tuple[float, ...]:
    """Holm step-down adjusted p-values, in the order given.

    Parameters
    ----------
    pvalues
        1-d sequence of p-values in [0, 1], one per comparison (e.g. the McNemar p of each
        candidate against the baseline). May be empty.

    Returns
    -------
    tuple of float
        With the p-values sorted ascending as ``p_(1) <= ... <= p_(m)``, the adjusted value of
        ``p_(i)`` is ``max_{j <= i} min(1, (m - j + 1) p_(j))``: monotone in the raw p-values
        and capped at 1. Rejecting where the adjusted value is at most ``alpha`` controls the
        family-wise error rate at ``alpha`` under any dependence between the comparisons.

    Raises
    ------
    ValueError
        If ``pvalues`` is not 1-d or a value is outside [0, 1] (NaN included).

    References
    ----------
    .. [1] S. Holm, "A simple sequentially rejective multiple test procedure", Scandinavian
           Journal of Statistics 6 (1979), 65-70.
    .. [2] P. H. Westfall and S. S. Young, "Resampling-Based Multiple Testing", Wiley
           (1993), section 2.4 (adjusted p-values).

    Examples
    --------
    >>> from eval_pipelines.core.stats import holm
    >>> holm([0.01, 0.04, 0.03])
    (0.03, 0.06, 0.06)
    """
    values = np.asarray(pvalues, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"pvalues: must be 1-d, got shape {values.shape}")
    if not np.all((values >= 0.0) & (values <= 1.0)):
        bad = next(float(v) for v in values if not 0.0 <= v <= 1.0 or math.isnan(v))
        raise ValueError(f"pvalues: {bad} is not a p-value (must be in [0, 1])")
    m = values.size
    order = np.argsort(values, kind="stable")
    scaled = (m - np.arange(m)) * values[order]
    adjusted_sorted = np.minimum(np.maximum.accumulate(scaled), 1.0)
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = adjusted_sorted
    return tuple(float(v) for v in adjusted)
