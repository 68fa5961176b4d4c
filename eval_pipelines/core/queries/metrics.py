"""Evaluate metrics: per-row outcomes in, the report's scalar metrics out (spec 003).

Two families. :func:`classification_metrics` aggregates what a predict said about each test
row's truth — discrimination (accuracy, rank), proper scoring rules (log loss, Brier) and
calibration (ECE) — next to the same figures for the no-evidence baseline.
:func:`regression_metrics` does the same for an estimate: error sizes, their percentiles and
the gain over estimating every row as the training mean.

Every value is a plain ``int``, ``float`` or ``None`` (JSON-ready); a metric that has no value
on the rows given (no rows, a constant truth, no non-zero truth) is ``None``, never NaN.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "EPS",
    "CalibrationBin",
    "PredictOutcomes",
    "calibration_bins",
    "classification_metrics",
    "expected_calibration_error",
    "regression_metrics",
]

#: Probabilities are clipped to ``[EPS, 1 - EPS]`` before the logarithm, as scikit-learn's
#: ``log_loss`` does, so a truth the model rated 0 costs ``-ln(EPS)`` (about 36 nats).
EPS = float(np.finfo(np.float64).eps)

#: How far above 1 a probability may be before it is refused: room for rounding in the sums
#: that produce it, nothing more.
_P_SLACK = 1e-9

#: Percentiles of the absolute error reported as ``p50`` ... ``p99``.
_PERCENTILES = (50, 75, 90, 95, 99)

Metrics = dict[str, float | int | None]


@dataclass(frozen=True, eq=False)
class PredictOutcomes:
    """Per scored test row: what the model and the no-evidence baseline said about the truth.

    The arrays are copied, converted to the dtypes below and made read-only; all have the same
    length ``n`` (the rows scored).

    Attributes
    ----------
    truth_p
        float64, the model's probability of the true value (for a set-valued target: of the
        best-ranked true member); 0.0 when the model never saw that value.
    truth_rank
        int64, 0-based rank of the true value in the model's ordering (0 = the top
        prediction); an unseen value ranks after every known value.
    top_p
        float64, the probability of the model's top value (its confidence).
    accurate
        bool, the top prediction is the truth (set-valued: is any member).
    sum_sq_p
        float64, ``sum_c p_c**2`` over the model's whole distribution (for the Brier score).
    base_truth_p, base_truth_rank, base_accurate, base_sum_sq_p
        The same four for the baseline: the training rows' class frequencies, no evidence.

    Raises
    ------
    ValueError
        If an array is not one-dimensional, the lengths differ, a probability is not finite or
        outside ``[0, 1]``, a rank is negative or not an integer, or a flag is not boolean.

    Notes
    -----
    Equality is identity (``eq=False``): comparing arrays field by field has no single truth
    value.
    """

    truth_p: np.ndarray
    truth_rank: np.ndarray
    top_p: np.ndarray
    accurate: np.ndarray
    sum_sq_p: np.ndarray
    base_truth_p: np.ndarray
    base_truth_rank: np.ndarray
    base_accurate: np.ndarray
    base_sum_sq_p: np.ndarray

    def __post_init__(self) -> None:
        kinds = {
            "truth_p": _probabilities,
            "truth_rank": _ranks,
            "top_p": _probabilities,
            "accurate": _flags,
            "sum_sq_p": _probabilities,
            "base_truth_p": _probabilities,
            "base_truth_rank": _ranks,
            "base_accurate": _flags,
            "base_sum_sq_p": _probabilities,
        }
        lengths: dict[str, int] = {}
        for name, convert in kinds.items():
            array = convert(name, getattr(self, name))
            array.setflags(write=False)
            object.__setattr__(self, name, array)
            lengths[name] = len(array)
        if len(set(lengths.values())) > 1:
            detail = ", ".join(f"{name}={length}" for name, length in lengths.items())
            raise ValueError(f"PredictOutcomes arrays must have one length, got {detail}")

    @property
    def n(self) -> int:
        """Rows scored."""
        return len(self.truth_p)


@dataclass(frozen=True)
class CalibrationBin:
    """One confidence bin of a reliability diagram.

    Attributes
    ----------
    lower, upper
        The bin is ``(lower, upper]`` (the first bin also holds confidence 0).
    n
        Rows whose confidence falls in the bin.
    mean_confidence
        Mean confidence of those rows, None when the bin is empty.
    accuracy
        Share of those rows that were accurate, None when the bin is empty.
    """

    lower: float
    upper: float
    n: int
    mean_confidence: float | None
    accuracy: float | None


def classification_metrics(
    outcomes: PredictOutcomes, *, train_samples: int, test_samples: int, bins: int = 10
) -> Metrics:
    """Discrimination, probability-quality and calibration metrics of a predict evaluation.

    Parameters
    ----------
    outcomes
        One entry per scored test row, for the model and the baseline.
    train_samples
        Rows the model was trained on (reported as ``trainSamples``).
    test_samples
        Test rows selected (``testSamples``); at least ``outcomes.n``, more when rows were
        skipped (an empty set-valued cell) or the run was truncated.
    bins
        Equal-width confidence bins for ``ece``.

    Returns
    -------
    dict
        Keys, with ``n`` the rows scored and every metric None when ``n == 0``:

        - ``n``, ``testSamples``, ``trainSamples`` (ints).
        - ``accuracy``, ``baseAccuracy``; ``accuracyGain = accuracy - baseAccuracy``.
        - ``meanRank``, ``baseMeanRank`` (0-based, as in Aito's responses);
          ``rankGain = baseMeanRank - meanRank``.
        - ``logLoss = mean(-ln(clip(truth_p, EPS, 1 - EPS)))`` in nats; a truth rated 0 is
          penalised (``-ln(EPS)``), not skipped. ``baseLogLoss`` likewise.
        - ``geomMeanLikelihood = exp(-logLoss)``, ``baseGeomMeanLikelihood = exp(-baseLogLoss)``:
          the geometric mean of the (clipped) probability given to the truth.
        - ``brier = mean(sum_sq_p - 2 truth_p + 1)``: the multi-class Brier score
          ``sum_c (p_c - y_c)**2`` against the one-hot truth (range ``[0, 2]``, not halved);
          for a set-valued target the one-hot is the best-ranked true member. ``baseBrier``
          likewise.
        - ``ece``: top-label expected calibration error, see
          :func:`expected_calibration_error`.

        Legacy information-theoretic names, kept as exact aliases or derived from the above:

        - ``geomMeanP`` is ``geomMeanLikelihood``; ``baseGmp`` is ``baseGeomMeanLikelihood``.
        - ``geomMeanLift = geomMeanP / baseGmp`` (never a division by zero: clipping keeps
          ``baseGmp >= EPS``).
        - ``mxe`` (mean cross-entropy) is ``logLoss``; ``h`` (the baseline's entropy on the
          test rows) is ``baseLogLoss``.
        - ``informationGain = baseLogLoss - logLoss`` in nats: positive when the evidence
          helps; equal to ``ln(geomMeanLift)``.

    Raises
    ------
    ValueError
        If ``train_samples`` or ``test_samples`` is not a non-negative integer,
        ``test_samples < outcomes.n``, or ``bins < 1``.

    References
    ----------
    .. [1] G. W. Brier, "Verification of forecasts expressed in terms of probability",
           Monthly Weather Review 78 (1950), 1-3.
    .. [2] I. J. Good, "Rational decisions", J. R. Stat. Soc. B 14 (1952), 107-114.
    .. [3] I. Kononenko and I. Bratko, "Information-based evaluation criterion for
           classifier's performance", Machine Learning 6 (1991), 67-80.
    .. [4] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On calibration of modern neural
           networks", ICML 2017.
    """
    if not isinstance(outcomes, PredictOutcomes):
        raise ValueError(f"outcomes: expected PredictOutcomes, got {type(outcomes).__name__}")
    train_samples = _count("train_samples", train_samples)
    test_samples = _count("test_samples", test_samples)
    bins = _bins(bins)
    n = outcomes.n
    if test_samples < n:
        raise ValueError(
            f"test_samples={test_samples}: fewer than the {n} rows scored; "
            "the rows scored are a subset of the test rows"
        )
    metrics: Metrics = {"n": n, "testSamples": test_samples, "trainSamples": train_samples}
    names = (
        "accuracy baseAccuracy accuracyGain meanRank baseMeanRank rankGain logLoss baseLogLoss "
        "geomMeanLikelihood baseGeomMeanLikelihood brier baseBrier ece geomMeanP baseGmp "
        "geomMeanLift mxe h informationGain"
    ).split()
    if n == 0:
        return metrics | dict.fromkeys(names, None)

    accuracy = _mean(outcomes.accurate)
    base_accuracy = _mean(outcomes.base_accurate)
    mean_rank = _mean(outcomes.truth_rank)
    base_mean_rank = _mean(outcomes.base_truth_rank)
    log_loss = _log_loss(outcomes.truth_p)
    base_log_loss = _log_loss(outcomes.base_truth_p)
    gmp = math.exp(-log_loss)
    base_gmp = math.exp(-base_log_loss)
    values: dict[str, float] = {
        "accuracy": accuracy,
        "baseAccuracy": base_accuracy,
        "accuracyGain": accuracy - base_accuracy,
        "meanRank": mean_rank,
        "baseMeanRank": base_mean_rank,
        "rankGain": base_mean_rank - mean_rank,
        "logLoss": log_loss,
        "baseLogLoss": base_log_loss,
        "geomMeanLikelihood": gmp,
        "baseGeomMeanLikelihood": base_gmp,
        "brier": _brier(outcomes.sum_sq_p, outcomes.truth_p),
        "baseBrier": _brier(outcomes.base_sum_sq_p, outcomes.base_truth_p),
        "ece": _ece(outcomes.top_p, outcomes.accurate, bins),
        "geomMeanP": gmp,
        "baseGmp": base_gmp,
        "geomMeanLift": gmp / base_gmp,
        "mxe": log_loss,
        "h": base_log_loss,
        "informationGain": base_log_loss - log_loss,
    }
    return metrics | {name: values[name] for name in names}


def expected_calibration_error(
    confidence: npt.ArrayLike, accurate: npt.ArrayLike, *, bins: int = 10
) -> float:
    """Top-label expected calibration error over equal-width, right-closed bins.

    Parameters
    ----------
    confidence
        Per row, the probability of the model's top value, in ``[0, 1]``.
    accurate
        Per row, whether the top value was right.
    bins
        Number of bins; bin ``i`` is ``(i/bins, (i+1)/bins]`` with the edges computed as
        float64 ``i / bins`` (so the literal ``0.3`` lies on an edge), and confidence 0 goes
        to the first bin.

    Returns
    -------
    float
        ``sum_b (n_b / n) * |accuracy_b - mean confidence_b|`` over the non-empty bins; 0 for
        perfectly calibrated bins, at most 1.

    Raises
    ------
    ValueError
        If there are no rows, the lengths differ, a confidence is not a finite probability,
        a flag is not boolean, or ``bins < 1``.

    References
    ----------
    .. [1] M. P. Naeini, G. F. Cooper and M. Hauskrecht, "Obtaining well calibrated
           probabilities using Bayesian binning", AAAI 2015.
    .. [2] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On calibration of modern neural
           networks", ICML 2017.
    """
    conf, hits, bins = _calibration_inputs(confidence, accurate, bins)
    if len(conf) == 0:
        raise ValueError("confidence is empty: the calibration error of no rows is undefined")
    return _ece(conf, hits, bins)


def calibration_bins(
    confidence: npt.ArrayLike, accurate: npt.ArrayLike, *, bins: int = 10
) -> tuple[CalibrationBin, ...]:
    """Every bin of a reliability diagram, empty ones included.

    Parameters
    ----------
    confidence, accurate, bins
        As for :func:`expected_calibration_error`; no rows gives ``bins`` empty bins.

    Returns
    -------
    tuple of CalibrationBin
        ``bins`` entries in increasing confidence; an empty bin has ``n == 0`` and None for
        its mean confidence and accuracy.
    """
    conf, hits, bins = _calibration_inputs(confidence, accurate, bins)
    edges = _edges(bins)
    counts, conf_sums, hit_sums = _binned(conf, hits, bins)
    result = []
    for i in range(bins):
        count = int(counts[i])
        result.append(
            CalibrationBin(
                lower=float(edges[i]),
                upper=float(edges[i + 1]),
                n=count,
                mean_confidence=float(conf_sums[i] / count) if count else None,
                accuracy=float(hit_sums[i] / count) if count else None,
            )
        )
    return tuple(result)


def regression_metrics(
    truth: npt.ArrayLike, estimate: npt.ArrayLike, *, train_mean: float
) -> Metrics:
    """Error metrics of an estimate evaluation and its gain over the training mean.

    Parameters
    ----------
    truth
        Per scored row, the value it actually has.
    estimate
        Per scored row, the model's estimate.
    train_mean
        Mean of the target over the training rows: the baseline estimates every row as this.

    Returns
    -------
    dict
        With ``e = estimate - truth`` and every key but ``n`` None when ``n == 0``:

        - ``n``: rows scored.
        - ``mae = mean|e|``, ``mse = mean(e**2)``, ``rmse = sqrt(mse)``.
        - ``r2 = 1 - sum(e**2) / sum((truth - mean(truth))**2)`` (scikit-learn's ``r2_score``
          on these rows); None when ``n < 2`` or the truth is constant, where it is undefined.
        - ``mape = mean(|e| / |truth|)`` over the rows with ``truth != 0``, a fraction (0.1 is
          10 %), as scikit-learn's ``mean_absolute_percentage_error`` restricted to those
          rows; None when there is no such row. ``mapeRows`` counts them (0 then).
        - ``medianAbsoluteError`` and ``p50``, ``p75``, ``p90``, ``p95``, ``p99``: percentiles
          of ``|e|`` by numpy's ``linear`` method (Hyndman & Fan type 7).
        - ``baselineMae``, ``baselineRmse``: the same errors with every row estimated as
          ``train_mean``.
        - ``maeGain = baselineMae - mae``, ``rmseGain = baselineRmse - rmse``: positive when
          the model helps.
        - ``maeImprovement = maeGain / baselineMae``, ``rmseImprovement = rmseGain /
          baselineRmse``; None when the baseline error is 0.

    Raises
    ------
    ValueError
        If ``truth`` and ``estimate`` are not one-dimensional, differ in length or hold a
        non-finite value, or ``train_mean`` is not finite.

    References
    ----------
    .. [1] R. J. Hyndman and A. B. Koehler, "Another look at measures of forecast accuracy",
           International Journal of Forecasting 22 (2006), 679-688.
    .. [2] R. J. Hyndman and Y. Fan, "Sample quantiles in statistical packages",
           The American Statistician 50 (1996), 361-365.
    """
    y = _finite("truth", truth)
    y_hat = _finite("estimate", estimate)
    if len(y) != len(y_hat):
        raise ValueError(
            f"truth has {len(y)} rows and estimate {len(y_hat)}: need one estimate per row"
        )
    try:
        mean = float(train_mean)
    except (TypeError, ValueError):
        raise ValueError(f"train_mean={train_mean!r}: must be a number") from None
    if not math.isfinite(mean):
        raise ValueError(f"train_mean={train_mean!r}: must be finite")

    n = len(y)
    names = (
        "mae mse rmse r2 mape mapeRows medianAbsoluteError p50 p75 p90 p95 p99 baselineMae "
        "baselineRmse maeGain rmseGain maeImprovement rmseImprovement"
    ).split()
    if n == 0:
        return {"n": 0} | dict.fromkeys(names, None)

    error = y_hat - y
    absolute = np.abs(error)
    mae = _mean(absolute)
    mse = _mean(error * error)
    rmse = math.sqrt(mse)
    r2: float | None = None
    if n >= 2 and not np.all(y == y[0]):
        centred = y - np.mean(y)
        r2 = 1.0 - float(np.sum(error * error)) / float(np.sum(centred * centred))
    nonzero = y != 0
    mape_rows = int(np.count_nonzero(nonzero))
    mape = _mean(absolute[nonzero] / np.abs(y[nonzero])) if mape_rows else None
    percentiles = np.percentile(absolute, _PERCENTILES, method="linear")
    baseline_error = mean - y
    baseline_mae = _mean(np.abs(baseline_error))
    baseline_rmse = math.sqrt(_mean(baseline_error * baseline_error))
    mae_gain = baseline_mae - mae
    rmse_gain = baseline_rmse - rmse
    values: dict[str, float | int | None] = {
        "mae": mae,
        "mse": mse,
        "rmse": rmse,
        "r2": r2,
        "mape": mape,
        "mapeRows": mape_rows,
        "medianAbsoluteError": float(np.median(absolute)),
        **{f"p{q}": float(value) for q, value in zip(_PERCENTILES, percentiles, strict=True)},
        "baselineMae": baseline_mae,
        "baselineRmse": baseline_rmse,
        "maeGain": mae_gain,
        "rmseGain": rmse_gain,
        "maeImprovement": mae_gain / baseline_mae if baseline_mae > 0 else None,
        "rmseImprovement": rmse_gain / baseline_rmse if baseline_rmse > 0 else None,
    }
    return {"n": n} | {name: values[name] for name in names}


# --- computation -------------------------------------------------------------------------


def _mean(values: np.ndarray) -> float:
    return float(np.mean(values, dtype=np.float64))


def _log_loss(truth_p: np.ndarray) -> float:
    return _mean(-np.log(np.clip(truth_p, EPS, 1.0 - EPS)))


def _brier(sum_sq_p: np.ndarray, truth_p: np.ndarray) -> float:
    # sum_c (p_c - y_c)^2 = sum_c p_c^2 - 2 p_truth + 1 for a one-hot y.
    return _mean(sum_sq_p - 2.0 * truth_p + 1.0)


def _edges(bins: int) -> np.ndarray:
    # i / bins, not np.linspace: linspace(0, 1, 11)[3] is 0.30000000000000004, which would
    # put a confidence of exactly 0.3 in the bin above the one the definition names.
    return np.arange(bins + 1, dtype=np.float64) / bins


def _bin_index(confidence: np.ndarray, bins: int) -> np.ndarray:
    # side="left" finds the first edge >= c, so c == edge i+1 lands in bin i: right-closed.
    # c == 0 gives -1 and a rounding excess above 1 gives `bins`; both are clipped inwards.
    index = np.searchsorted(_edges(bins), confidence, side="left") - 1
    return np.clip(index, 0, bins - 1)


def _binned(
    confidence: np.ndarray, accurate: np.ndarray, bins: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    index = _bin_index(confidence, bins)
    counts = np.bincount(index, minlength=bins)
    conf_sums = np.bincount(index, weights=confidence, minlength=bins)
    hit_sums = np.bincount(index, weights=accurate.astype(np.float64), minlength=bins)
    return counts, conf_sums, hit_sums


def _ece(confidence: np.ndarray, accurate: np.ndarray, bins: int) -> float:
    counts, conf_sums, hit_sums = _binned(confidence, accurate, bins)
    filled = counts > 0
    n_b = counts[filled].astype(np.float64)
    gaps = np.abs(hit_sums[filled] / n_b - conf_sums[filled] / n_b)
    return float(np.sum(n_b / len(confidence) * gaps))


# --- validation --------------------------------------------------------------------------


def _vector(name: str, values: Any) -> np.ndarray:
    array = np.array(values, copy=True)
    if array.ndim != 1:
        raise ValueError(f"{name}: expected a one-dimensional array, got shape {array.shape}")
    return array


def _finite(name: str, values: Any) -> np.ndarray:
    array = _vector(name, values)
    if array.dtype == np.bool_ or not (np.issubdtype(array.dtype, np.number) or array.size == 0):
        raise ValueError(f"{name}: expected numbers, got dtype {array.dtype}")
    array = array.astype(np.float64)
    bad = ~np.isfinite(array)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name}: {int(bad.sum())} non-finite value(s), first {array[first]} at row {first}"
        )
    return array


def _probabilities(name: str, values: Any) -> np.ndarray:
    array = _finite(name, values)
    outside = (array < 0.0) | (array > 1.0 + _P_SLACK)
    if outside.any():
        first = int(np.flatnonzero(outside)[0])
        raise ValueError(
            f"{name}: {int(outside.sum())} value(s) outside [0, 1], "
            f"first {array[first]!r} at row {first}"
        )
    return array


def _ranks(name: str, values: Any) -> np.ndarray:
    array = _vector(name, values)
    if array.size and (array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"{name}: expected integer ranks, got dtype {array.dtype}")
    array = array.astype(np.int64)
    if array.size and array.min() < 0:
        first = int(np.flatnonzero(array < 0)[0])
        raise ValueError(f"{name}: ranks are 0-based, got {array[first]} at row {first}")
    return array


def _flags(name: str, values: Any) -> np.ndarray:
    array = _vector(name, values)
    if array.dtype == np.bool_ or array.size == 0:
        return array.astype(np.bool_)
    if np.issubdtype(array.dtype, np.integer) and np.isin(array, (0, 1)).all():
        return array.astype(np.bool_)
    raise ValueError(f"{name}: expected booleans (or 0/1), got dtype {array.dtype}")


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool | np.bool_):
        raise ValueError(f"{name}={value!r}: expected a row count, not a boolean")
    try:
        count = operator.index(value)
    except TypeError:
        raise ValueError(f"{name}={value!r}: expected an integer row count") from None
    if count < 0:
        raise ValueError(f"{name}={count}: a row count cannot be negative")
    return count


def _bins(bins: Any) -> int:
    count = _count("bins", bins)
    if count < 1:
        raise ValueError(f"bins={count}: need at least one bin")
    return count


def _calibration_inputs(
    confidence: npt.ArrayLike, accurate: npt.ArrayLike, bins: int
) -> tuple[np.ndarray, np.ndarray, int]:
    conf = _probabilities("confidence", confidence)
    hits = _flags("accurate", accurate)
    if len(conf) != len(hits):
        raise ValueError(
            f"confidence has {len(conf)} rows and accurate {len(hits)}: need one flag per row"
        )
    return conf, hits, _bins(bins)
