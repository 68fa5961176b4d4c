"""Evaluate metrics against independent oracles, with stated tolerances.

Oracles: scikit-learn's log_loss, brier_score_loss, accuracy_score, top_k_accuracy_score,
calibration_curve and regression metrics; scipy's gmean and mquantiles; and small examples
worked by hand. Per-row outcomes are derived from random probability matrices the way the
evaluate pipeline derives them from a predict's distribution.
"""

import json
import math

import numpy as np
import pytest
from scipy import stats
from scipy.stats.mstats import mquantiles
from sklearn.calibration import calibration_curve
from sklearn.metrics import (
    accuracy_score,
    brier_score_loss,
    log_loss,
    mean_absolute_error,
    mean_absolute_percentage_error,
    mean_squared_error,
    median_absolute_error,
    r2_score,
    root_mean_squared_error,
    top_k_accuracy_score,
)

from eval_pipelines.core.queries.metrics import (
    EPS,
    CalibrationBin,
    PredictOutcomes,
    calibration_bins,
    classification_metrics,
    expected_calibration_error,
    regression_metrics,
)

# Both sides evaluate the same closed form in float64 over at most a few thousand rows;
# 1e-12 absorbs a different order of summation (pairwise vs sequential).
TOL = 1e-12

CLASSIFICATION_KEYS = [
    "n",
    "testSamples",
    "trainSamples",
    "accuracy",
    "baseAccuracy",
    "accuracyGain",
    "meanRank",
    "baseMeanRank",
    "rankGain",
    "logLoss",
    "baseLogLoss",
    "geomMeanLikelihood",
    "baseGeomMeanLikelihood",
    "brier",
    "baseBrier",
    "ece",
    "geomMeanP",
    "baseGmp",
    "geomMeanLift",
    "mxe",
    "h",
    "informationGain",
]

REGRESSION_KEYS = [
    "n",
    "mae",
    "mse",
    "rmse",
    "r2",
    "mape",
    "mapeRows",
    "medianAbsoluteError",
    "p50",
    "p75",
    "p90",
    "p95",
    "p99",
    "baselineMae",
    "baselineRmse",
    "maeGain",
    "rmseGain",
    "maeImprovement",
    "rmseImprovement",
]


def rank_of(probabilities: np.ndarray, y: np.ndarray) -> np.ndarray:
    """0-based position of each row's true class in its descending-probability ordering."""
    order = np.argsort(-probabilities, axis=1, kind="stable")
    return np.argmax(order == y[:, None], axis=1)


def outcomes_from(probabilities: np.ndarray, y: np.ndarray, base: np.ndarray) -> PredictOutcomes:
    """Per-row outcomes of a model (rows of ``probabilities``) and a baseline (``base``)."""
    rows = np.arange(len(y))
    base_matrix = np.tile(base, (len(y), 1))
    return PredictOutcomes(
        truth_p=probabilities[rows, y],
        truth_rank=rank_of(probabilities, y),
        top_p=probabilities.max(axis=1),
        accurate=probabilities.argmax(axis=1) == y,
        sum_sq_p=(probabilities**2).sum(axis=1),
        base_truth_p=base[y],
        base_truth_rank=rank_of(base_matrix, y),
        base_accurate=np.full(len(y), base.argmax()) == y,
        base_sum_sq_p=np.full(len(y), float((base**2).sum())),
    )


def random_case(seed: int, n: int, k: int, *, unseen: bool):
    """A model's probability matrix, truths drawn from it (so roughly calibrated) with a few
    random ones mixed in, and a baseline class-frequency vector. With ``unseen`` the last
    class has probability 0 everywhere (the model never saw it) yet is the truth of some
    rows."""
    rng = np.random.default_rng(seed)
    probabilities = rng.dirichlet(np.full(k, 0.7), size=n)
    if unseen:
        probabilities[:, -1] = 0.0
        probabilities /= probabilities.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(k, p=row) for row in probabilities])
    noisy = rng.random(n) < 0.2
    y[noisy] = rng.integers(0, k, size=int(noisy.sum()))
    base = rng.dirichlet(np.full(k, 2.0))
    return probabilities, y, base


def mean_rank_oracle(scores: np.ndarray, y: np.ndarray) -> float:
    """mean rank = sum_{k=1}^{K-1} P(rank >= k) = sum_{k=1}^{K-1} (1 - top-k accuracy)."""
    n_classes = scores.shape[1]
    labels = np.arange(n_classes)
    return sum(
        1.0 - top_k_accuracy_score(y, scores, k=k, labels=labels) for k in range(1, n_classes)
    )


CASES = [(1, 400, 3, False), (2, 1_000, 5, False), (3, 250, 8, True), (4, 37, 4, True)]


@pytest.mark.parametrize(("seed", "n", "k", "unseen"), CASES)
def test_probability_metrics_match_sklearn(seed, n, k, unseen):
    probabilities, y, base = random_case(seed, n, k, unseen=unseen)
    base_matrix = np.tile(base, (n, 1))
    labels = np.arange(k)
    m = classification_metrics(
        outcomes_from(probabilities, y, base), train_samples=4 * n, test_samples=n
    )
    # expected from sklearn.metrics.log_loss(y, P, labels=...): it clips to
    # [eps, 1 - eps] with eps = finfo(float64).eps and does not renormalise, as we do;
    # tolerance TOL (same formula, float64). An unseen truth costs -ln(eps) on both sides.
    assert m["logLoss"] == pytest.approx(log_loss(y, probabilities, labels=labels), abs=TOL)
    assert m["baseLogLoss"] == pytest.approx(log_loss(y, base_matrix, labels=labels), abs=TOL)
    # expected from sklearn.metrics.brier_score_loss(y, P, labels=..., scale_by_half=False):
    # sklearn >= 1.7 scores multiclass as sum_c (p_c - y_c)^2 (range [0, 2]); scale_by_half
    # is pinned off because "auto" would halve it for 2-column inputs. Tolerance TOL.
    expected_brier = brier_score_loss(y, probabilities, labels=labels, scale_by_half=False)
    expected_base_brier = brier_score_loss(y, base_matrix, labels=labels, scale_by_half=False)
    assert m["brier"] == pytest.approx(expected_brier, abs=TOL)
    assert m["baseBrier"] == pytest.approx(expected_base_brier, abs=TOL)
    # expected from scipy.stats.gmean of the clipped truth probabilities; relative 1e-12
    # (exp of a mean of logs either way).
    clipped = np.clip(probabilities[np.arange(n), y], EPS, 1 - EPS)
    assert m["geomMeanLikelihood"] == pytest.approx(stats.gmean(clipped), rel=TOL)
    assert m["baseGeomMeanLikelihood"] == pytest.approx(
        stats.gmean(np.clip(base[y], EPS, 1 - EPS)), rel=TOL
    )


@pytest.mark.parametrize(("seed", "n", "k", "unseen"), CASES)
def test_discrimination_metrics_match_sklearn(seed, n, k, unseen):
    probabilities, y, base = random_case(seed, n, k, unseen=unseen)
    base_matrix = np.tile(base, (n, 1))
    m = classification_metrics(
        outcomes_from(probabilities, y, base), train_samples=4 * n, test_samples=n
    )
    # expected from sklearn.metrics.accuracy_score(y, argmax P); exact (a count over n).
    expected = accuracy_score(y, probabilities.argmax(axis=1))
    expected_base = accuracy_score(y, np.full(n, base.argmax()))
    assert m["accuracy"] == pytest.approx(expected, abs=TOL)
    assert m["baseAccuracy"] == pytest.approx(expected_base, abs=TOL)
    assert m["accuracyGain"] == pytest.approx(expected - expected_base, abs=TOL)
    # expected from sklearn.metrics.top_k_accuracy_score: a 0-based rank r is the number of
    # k in 1..K-1 with r >= k, so mean rank = sum_k (1 - top-k accuracy). The random scores
    # have no ties (the one zero column of an unseen class is last either way). Tolerance
    # 1e-9: K-1 accumulated differences of proportions.
    mean_rank = mean_rank_oracle(probabilities, y)
    base_mean_rank = mean_rank_oracle(base_matrix, y)
    assert m["meanRank"] == pytest.approx(mean_rank, abs=1e-9)
    assert m["baseMeanRank"] == pytest.approx(base_mean_rank, abs=1e-9)
    assert m["rankGain"] == pytest.approx(base_mean_rank - mean_rank, abs=1e-9)
    assert (m["n"], m["testSamples"], m["trainSamples"]) == (n, n, 4 * n)


@pytest.mark.parametrize(("seed", "n", "k", "unseen"), CASES)
def test_legacy_names_are_aliases(seed, n, k, unseen):
    probabilities, y, base = random_case(seed, n, k, unseen=unseen)
    m = classification_metrics(
        outcomes_from(probabilities, y, base), train_samples=n, test_samples=n
    )
    # Exact aliases: the same float, not a recomputation.
    assert m["geomMeanP"] == m["geomMeanLikelihood"]
    assert m["baseGmp"] == m["baseGeomMeanLikelihood"]
    assert m["mxe"] == m["logLoss"]
    assert m["h"] == m["baseLogLoss"]
    assert m["geomMeanLift"] == m["geomMeanP"] / m["baseGmp"]
    assert m["informationGain"] == m["baseLogLoss"] - m["logLoss"]
    # informationGain = ln(geomMeanLift); 1e-12 for exp/log round trips.
    assert m["informationGain"] == pytest.approx(math.log(m["geomMeanLift"]), abs=TOL)


@pytest.mark.parametrize(("seed", "n", "bins"), [(5, 500, 10), (6, 2_000, 15), (7, 60, 4)])
def test_ece_matches_calibration_curve(seed, n, bins):
    rng = np.random.default_rng(seed)
    confidence = rng.beta(5, 2, size=n)
    accurate = rng.random(n) < confidence**1.3  # somewhat over-confident
    edges = np.linspace(0.0, 1.0, bins + 1)
    # calibration_curve(strategy="uniform") bins with searchsorted(linspace edges[1:-1], p),
    # i.e. right-closed like ours, but reports only non-empty bins and no counts; the counts
    # come from np.histogram, which is left-closed. The two conventions (and linspace vs
    # i/bins edges) agree away from the edges, which continuous random draws never hit:
    assert not np.isin(confidence, np.concatenate([edges, np.arange(bins + 1) / bins])).any()
    prob_true, prob_pred = calibration_curve(
        accurate.astype(int), confidence, n_bins=bins, strategy="uniform"
    )
    counts = np.histogram(confidence, bins=edges)[0]
    filled = counts[counts > 0]
    expected = float(np.sum(filled / n * np.abs(prob_true - prob_pred)))
    # Tolerance TOL: same per-bin means, summed in a different order.
    assert expected_calibration_error(confidence, accurate, bins=bins) == pytest.approx(
        expected, abs=TOL
    )
    table = calibration_bins(confidence, accurate, bins=bins)
    assert [b.n for b in table] == counts.tolist()
    assert [b.accuracy for b in table if b.n] == pytest.approx(prob_true, abs=TOL)
    assert [b.mean_confidence for b in table if b.n] == pytest.approx(prob_pred, abs=TOL)
    assert all(b.accuracy is None and b.mean_confidence is None for b in table if b.n == 0)


def test_classification_ece_is_top_label_ece():
    probabilities, y, base = random_case(8, 300, 4, unseen=False)
    outcomes = outcomes_from(probabilities, y, base)
    for bins in (5, 10, 20):
        m = classification_metrics(outcomes, train_samples=1, test_samples=300, bins=bins)
        assert m["ece"] == expected_calibration_error(
            probabilities.max(axis=1), probabilities.argmax(axis=1) == y, bins=bins
        )


def test_ece_hand_computed_example():
    # bins = 10. (0.9, 1]: two rows at 0.95, one right -> (2/4) * |0.5 - 0.95| = 0.225
    #            (0.8, 0.9]: one row at 0.85, right   -> (1/4) * |1.0 - 0.85| = 0.0375
    #            (0.3, 0.4]: one row at 0.35, wrong   -> (1/4) * |0.0 - 0.35| = 0.0875
    # ECE = 0.225 + 0.0375 + 0.0875 = 0.35; tolerance TOL for the decimal literals.
    confidence = [0.95, 0.95, 0.85, 0.35]
    accurate = [True, False, True, False]
    assert expected_calibration_error(confidence, accurate) == pytest.approx(0.35, abs=TOL)


def test_ece_of_perfectly_calibrated_bins_is_zero():
    # 0.75 x4 with 3 right, 0.25 x4 with 1 right, 1.0 x2 both right, 0.5 x2 with 1 right:
    # every bin's accuracy equals its mean confidence, in exactly representable numbers.
    confidence = [0.75] * 4 + [0.25] * 4 + [1.0] * 2 + [0.5] * 2
    accurate = [1, 1, 1, 0] + [0, 0, 1, 0] + [1, 1] + [1, 0]
    assert expected_calibration_error(confidence, accurate) == 0.0


def test_ece_bins_are_right_closed():
    table = calibration_bins([0.1, 0.0, np.nextafter(0.1, 1.0), 1.0, 0.3], [True] * 5)
    counts = [b.n for b in table]
    # 0.1 and 0.0 in (0, 0.1] (first bin); the next float after 0.1 in (0.1, 0.2];
    # 1.0 in (0.9, 1]; 0.3 in (0.2, 0.3] (edges are i/bins: linspace's 0.30000000000000004
    # would not move it, but 3 * 0.1 would).
    assert counts == [2, 1, 1, 0, 0, 0, 0, 0, 0, 1]
    assert table[0] == CalibrationBin(lower=0.0, upper=0.1, n=2, mean_confidence=0.05, accuracy=1.0)
    assert table[2].upper == 0.3 and table[3].lower == 0.3
    # A confidence on an edge scores with the bin below: one row at 0.1, wrong -> |0 - 0.1|.
    assert expected_calibration_error([0.1], [False]) == pytest.approx(0.1, abs=TOL)
    assert calibration_bins([], [], bins=3) == tuple(
        CalibrationBin(lower=i / 3, upper=(i + 1) / 3, n=0, mean_confidence=None, accuracy=None)
        for i in range(3)
    )


def test_unseen_truth_is_penalised_not_skipped():
    # One row, model [0.7, 0.3] over known values, truth unseen: p = 0, rank 2 (after both).
    outcomes = PredictOutcomes(
        truth_p=[0.0],
        truth_rank=[2],
        top_p=[0.7],
        accurate=[False],
        sum_sq_p=[0.7**2 + 0.3**2],
        base_truth_p=[1.0],
        base_truth_rank=[0],
        base_accurate=[True],
        base_sum_sq_p=[1.0],
    )
    m = classification_metrics(outcomes, train_samples=10, test_samples=1)
    # logLoss = -ln(EPS) = 52 ln 2 (EPS = 2**-52), the clip floor; exact.
    assert m["logLoss"] == -math.log(EPS) == pytest.approx(52 * math.log(2), abs=TOL)
    # A truth given probability 1 still costs -ln(1 - EPS) ~ 2.2e-16, as in sklearn.
    assert m["baseLogLoss"] == pytest.approx(-math.log1p(-EPS), rel=TOL) and m["baseLogLoss"] > 0
    assert m["geomMeanLikelihood"] == pytest.approx(EPS, rel=TOL)
    # Brier by hand: (0.7 - 0)^2 + (0.3 - 0)^2 + (0 - 1)^2 = 1.58; baseline (1 - 1)^2 = 0.
    assert m["brier"] == pytest.approx(1.58, abs=TOL)
    assert m["baseBrier"] == pytest.approx(0.0, abs=TOL)
    assert (m["meanRank"], m["baseMeanRank"], m["rankGain"]) == (2.0, 0.0, -2.0)
    # Cross-check with sklearn, the unseen value as a third all-zero column.
    assert m["logLoss"] == pytest.approx(log_loss([2], [[0.7, 0.3, 0.0]], labels=[0, 1, 2]))


def test_no_rows_gives_no_metrics():
    empty = PredictOutcomes(*([[]] * 9))
    m = classification_metrics(empty, train_samples=120, test_samples=3)
    assert list(m) == CLASSIFICATION_KEYS
    assert (m["n"], m["testSamples"], m["trainSamples"]) == (0, 3, 120)
    assert all(m[key] is None for key in CLASSIFICATION_KEYS[3:])


def test_metrics_are_json_ready():
    probabilities, y, base = random_case(9, 50, 3, unseen=True)
    m = classification_metrics(
        outcomes_from(probabilities, y, base), train_samples=np.int64(200), test_samples=50
    )
    assert list(m) == CLASSIFICATION_KEYS
    assert all(
        type(value) is (int if key in CLASSIFICATION_KEYS[:3] else float)
        for key, value in m.items()
    )
    r = regression_metrics(np.arange(10), np.arange(10) + 0.5, train_mean=3)
    assert list(r) == REGRESSION_KEYS
    assert all(type(value) in (int, float) for value in r.values())
    json.dumps(m, allow_nan=False)
    json.dumps(r, allow_nan=False)


def test_outcomes_are_frozen_copies():
    truth_p = np.array([0.5, 0.25])
    outcomes = PredictOutcomes(
        truth_p,
        [0, 1],
        [0.5, 0.5],
        [True, False],
        [0.5, 0.5],
        [0.5, 0.5],
        [0, 0],
        [1, 0],
        [0.5, 0.5],
    )
    truth_p[0] = 0.0
    assert outcomes.truth_p[0] == 0.5
    assert outcomes.truth_rank.dtype == np.int64 and outcomes.accurate.dtype == np.bool_
    with pytest.raises(ValueError):
        outcomes.truth_p[0] = 1.0
    assert outcomes.n == 2


def _fields(**changes):
    fields = {
        "truth_p": [0.5, 0.25],
        "truth_rank": [0, 1],
        "top_p": [0.5, 0.5],
        "accurate": [True, False],
        "sum_sq_p": [0.5, 0.5],
        "base_truth_p": [0.5, 0.5],
        "base_truth_rank": [0, 0],
        "base_accurate": [True, True],
        "base_sum_sq_p": [0.5, 0.5],
    }
    return fields | changes


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"top_p": [0.5]}, "one length"),
        ({"truth_p": [0.5, float("nan")]}, "non-finite"),
        ({"base_truth_p": [0.5, 1.5]}, "outside"),
        ({"sum_sq_p": [-0.1, 0.5]}, "outside"),
        ({"truth_rank": [0, -1]}, "0-based"),
        ({"truth_rank": [0.0, 1.0]}, "integer"),
        ({"accurate": [0.0, 1.0]}, "booleans"),
        ({"base_accurate": [2, 0]}, "booleans"),
        ({"truth_p": [[0.5, 0.25]]}, "one-dimensional"),
        ({"top_p": ["a", "b"]}, "numbers"),
    ],
)
def test_outcomes_reject_bad_input(changes, message):
    with pytest.raises(ValueError, match=message):
        PredictOutcomes(**_fields(**changes))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"train_samples": -1, "test_samples": 2}, "negative"),
        ({"train_samples": 1.5, "test_samples": 2}, "integer"),
        ({"train_samples": True, "test_samples": 2}, "boolean"),
        ({"train_samples": 5, "test_samples": 1}, "fewer than the 2 rows"),
        ({"train_samples": 5, "test_samples": 2, "bins": 0}, "at least one bin"),
    ],
)
def test_classification_metrics_reject_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        classification_metrics(PredictOutcomes(**_fields()), **options)


def test_calibration_rejects_bad_input():
    with pytest.raises(ValueError, match="empty"):
        expected_calibration_error([], [])
    with pytest.raises(ValueError, match="one flag per row"):
        expected_calibration_error([0.5, 0.6], [True])
    with pytest.raises(ValueError, match="outside"):
        calibration_bins([1.2], [True])


# --- regression ------------------------------------------------------------------------


@pytest.mark.parametrize(("seed", "n"), [(11, 500), (12, 2_000), (13, 7)])
def test_regression_metrics_match_sklearn(seed, n):
    rng = np.random.default_rng(seed)
    truth = rng.integers(-3, 20, size=n).astype(float)  # integer-valued: some exact zeros
    truth[0] = 0.0
    estimate = truth + rng.normal(0, 2.5, size=n)
    train_mean = 7.25
    m = regression_metrics(truth, estimate, train_mean=train_mean)
    # expected from sklearn.metrics on the same rows; tolerance TOL (same formulas, float64).
    assert m["n"] == n
    assert m["mae"] == pytest.approx(mean_absolute_error(truth, estimate), abs=TOL)
    assert m["mse"] == pytest.approx(mean_squared_error(truth, estimate), abs=TOL)
    assert m["rmse"] == pytest.approx(root_mean_squared_error(truth, estimate), abs=TOL)
    assert m["r2"] == pytest.approx(r2_score(truth, estimate), abs=TOL)
    assert m["medianAbsoluteError"] == pytest.approx(
        median_absolute_error(truth, estimate), abs=TOL
    )
    # expected from mean_absolute_percentage_error on the rows with truth != 0 (sklearn would
    # divide the zero rows by its float eps instead); a fraction, not per cent.
    nonzero = truth != 0
    assert m["mapeRows"] == int(nonzero.sum()) < n
    assert m["mape"] == pytest.approx(
        mean_absolute_percentage_error(truth[nonzero], estimate[nonzero]), abs=TOL
    )
    # expected from scipy mquantiles(alphap=1, betap=1): Hyndman & Fan type 7, numpy's
    # "linear" method computed independently; tolerance TOL.
    absolute = np.abs(estimate - truth)
    expected = mquantiles(absolute, prob=[0.5, 0.75, 0.9, 0.95, 0.99], alphap=1, betap=1)
    actual = [m["p50"], m["p75"], m["p90"], m["p95"], m["p99"]]
    assert actual == pytest.approx(expected.tolist(), abs=TOL)
    assert m["p50"] == pytest.approx(m["medianAbsoluteError"], abs=TOL)
    # Baseline: every row estimated as the training mean, scored by sklearn; TOL.
    constant = np.full(n, train_mean)
    baseline_mae = mean_absolute_error(truth, constant)
    baseline_rmse = root_mean_squared_error(truth, constant)
    assert m["baselineMae"] == pytest.approx(baseline_mae, abs=TOL)
    assert m["baselineRmse"] == pytest.approx(baseline_rmse, abs=TOL)
    assert m["maeGain"] == pytest.approx(baseline_mae - m["mae"], abs=TOL)
    assert m["rmseGain"] == pytest.approx(baseline_rmse - m["rmse"], abs=TOL)
    assert m["maeImprovement"] == pytest.approx(m["maeGain"] / baseline_mae, abs=TOL)
    assert m["rmseImprovement"] == pytest.approx(m["rmseGain"] / baseline_rmse, abs=TOL)


def test_gain_is_positive_when_the_model_helps():
    truth = np.array([1.0, 2.0, 3.0, 10.0])
    # Exact model: mae 0, baseline mae with train_mean 4: (3 + 2 + 1 + 6) / 4 = 3.
    exact = regression_metrics(truth, truth, train_mean=4.0)
    assert (exact["mae"], exact["baselineMae"], exact["maeGain"]) == (0.0, 3.0, 3.0)
    assert exact["maeImprovement"] == 1.0 and exact["rmseImprovement"] == 1.0
    assert exact["r2"] == 1.0
    # A model worse than the mean: estimates 10 off every row -> mae 10, gain 3 - 10 = -7.
    worse = regression_metrics(truth, truth + 10.0, train_mean=4.0)
    assert worse["maeGain"] == -7.0 and worse["rmseGain"] < 0
    assert worse["maeImprovement"] == pytest.approx(-7.0 / 3.0, abs=TOL)


def test_r2_is_none_when_undefined():
    # Constant truth: 0.1 three times also checks that the test is "all equal", not a
    # variance that rounding leaves at ~1e-33 (mean([0.1] * 3) != 0.1 in float64).
    assert regression_metrics([0.1, 0.1, 0.1], [0.1, 0.2, 0.0], train_mean=0.0)["r2"] is None
    assert regression_metrics([5.0], [4.0], train_mean=0.0)["r2"] is None
    assert regression_metrics([1.0, 2.0], [1.0, 2.0], train_mean=0.0)["r2"] == 1.0


def test_mape_skips_zero_truths():
    # Rows (y, e): (0, 5) skipped; (2, 3) -> 1/2; (-4, -3) -> 1/4. mape = (0.5 + 0.25) / 2.
    m = regression_metrics([0.0, 2.0, -4.0], [5.0, 3.0, -3.0], train_mean=0.0)
    assert m["mapeRows"] == 2
    assert m["mape"] == pytest.approx(0.375, abs=TOL)
    none = regression_metrics([0.0, 0.0], [1.0, -1.0], train_mean=0.0)
    assert none["mape"] is None and none["mapeRows"] == 0


def test_baseline_without_error_has_no_improvement():
    m = regression_metrics([3.0, 3.0], [2.0, 4.0], train_mean=3.0)
    assert m["baselineMae"] == 0.0 and m["maeGain"] == -1.0
    assert m["maeImprovement"] is None and m["rmseImprovement"] is None


def test_regression_no_rows():
    m = regression_metrics([], [], train_mean=1.0)
    assert list(m) == REGRESSION_KEYS
    assert m["n"] == 0
    assert all(m[key] is None for key in REGRESSION_KEYS[1:])


@pytest.mark.parametrize(
    ("truth", "estimate", "train_mean", "message"),
    [
        ([1.0, 2.0], [1.0], 0.0, "one estimate per row"),
        ([1.0, float("inf")], [1.0, 2.0], 0.0, "truth: 1 non-finite"),
        ([1.0, 2.0], [float("nan"), 2.0], 0.0, "estimate: 1 non-finite"),
        ([1.0, 2.0], [1.0, 2.0], float("nan"), "train_mean"),
        ([1.0, 2.0], [1.0, 2.0], "x", "train_mean"),
        ([[1.0, 2.0]], [[1.0, 2.0]], 0.0, "one-dimensional"),
    ],
)
def test_regression_rejects_bad_input(truth, estimate, train_mean, message):
    with pytest.raises(ValueError, match=message):
        regression_metrics(truth, estimate, train_mean=train_mean)
