"""Numeric estimates from equality evidence: k nearest neighbours (default) or regression.

Evidence fields are encoded once per evaluation: a numeric (integer or float) column is a
number scaled by its training standard deviation, any other column a category code (a null
matches nothing).

- ``knn``: distance = number of category fields that differ + sum over numeric fields of
  min(1, |a - b| / sd); rows the capped distance ties are ordered by the uncapped one (the
  same sum without the cap, a null farther than any number), so a value more than 1 sd from
  every training row is still estimated from the training rows nearest to it. The estimate is
  the mean target of the k nearest training rows; rows tied with the k-th on both distances
  share the places left equally (the mean over every way of breaking the tie), so no estimate
  depends on the order of the table's rows.
- ``regression``: least squares on an intercept, one indicator per category value seen in
  training and the scaled floats (null -> the training mean), with a small ridge (1e-6 * n)
  so collinear indicators stay solvable.

A test row has an estimate only when it has evidence to compare training rows on: a category
value some training row has, or a number in a field where training rows have numbers. A row
without (every field null, only unseen values, or a query with no evidence) would otherwise be
estimated blind, from training rows chosen by table position, by either model; such rows are
left out of n and counted by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from eval_pipelines.core.errors import InputError

MAX_INDICATORS = 5_000
DISTANCE_CELLS = 4_000_000  # distances held at once: bounds memory on large tables


@dataclass(frozen=True)
class EncodedEvidence:
    """Training and test evidence as arrays: category codes (-1 = null or unseen) and scaled
    floats (NaN = null)."""

    train_codes: np.ndarray  # (n_train, n_category_fields) int64
    test_codes: np.ndarray
    train_numbers: np.ndarray  # (n_train, n_float_fields) float64
    test_numbers: np.ndarray
    n_categories: tuple[int, ...]


def as_numbers(series: pl.Series) -> np.ndarray:
    """A numeric column as float64, null and NaN as NaN."""
    return series.cast(pl.Float64).fill_nan(None).to_numpy().astype(np.float64)


def encode_evidence(
    train: list[pl.Series],
    test: list[pl.Series],
    kinds: list[str],
    *,
    n_train: int | None = None,
    n_test: int | None = None,
) -> EncodedEvidence:
    """``n_train`` / ``n_test`` give the row counts when there is no evidence field."""
    n_train = len(train[0]) if train else (n_train or 0)
    n_test = len(test[0]) if test else (n_test or 0)
    codes_train, codes_test, numbers_train, numbers_test, sizes = [], [], [], [], []
    for train_values, test_values, kind in zip(train, test, kinds, strict=True):
        if kind in ("integer", "float"):
            a, b = as_numbers(train_values), as_numbers(test_values)
            sd = float(np.nanstd(a)) if np.isfinite(a).any() else 0.0
            scale = sd if sd > 0 else 1.0
            numbers_train.append(a / scale)
            numbers_test.append(b / scale)
        else:
            values = train_values.cast(pl.String)
            known = values.drop_nulls().unique().sort()
            lookup = dict(zip(known.to_list(), range(known.len()), strict=True))
            codes_train.append(np.array([lookup.get(v, -1) for v in values.to_list()]))
            codes_test.append(
                np.array([lookup.get(v, -1) for v in test_values.cast(pl.String).to_list()])
            )
            sizes.append(known.len())

    def stack(columns: list[np.ndarray], n: int, dtype: type) -> np.ndarray:
        return np.column_stack(columns).astype(dtype) if columns else np.empty((n, 0), dtype)

    return EncodedEvidence(
        stack(codes_train, n_train, np.int64),
        stack(codes_test, n_test, np.int64),
        stack(numbers_train, n_train, np.float64),
        stack(numbers_test, n_test, np.float64),
        tuple(sizes),
    )


def has_estimate(evidence: EncodedEvidence) -> np.ndarray:
    """Test rows with a category value some training row has, or a number in a field where
    training rows have numbers (see the module's docstring)."""
    usable = (evidence.test_codes >= 0).any(axis=1)
    trained = np.isfinite(evidence.train_numbers).any(axis=0)
    usable |= (np.isfinite(evidence.test_numbers) & trained[None, :]).any(axis=1)
    return np.asarray(usable, dtype=bool)


def knn_estimates(
    evidence: EncodedEvidence, train_target: np.ndarray, rows: np.ndarray, *, k: int
) -> np.ndarray:
    """Estimates for the test rows ``rows`` (indices into the test evidence)."""
    n_train = len(train_target)
    out = np.full(len(rows), np.nan)
    if n_train == 0:
        return out
    step = max(1, DISTANCE_CELLS // n_train)
    take = min(k, n_train)
    for start in range(0, len(rows), step):
        chunk = rows[start : start + step]
        capped = np.zeros((len(chunk), n_train))
        for j in range(evidence.test_codes.shape[1]):
            a = evidence.test_codes[chunk, j][:, None]
            b = evidence.train_codes[:, j][None, :]
            capped += (a != b) | (a < 0)
        uncapped = capped.copy()
        for j in range(evidence.test_numbers.shape[1]):
            diff = np.abs(evidence.test_numbers[chunk, j][:, None] - evidence.train_numbers[:, j])
            missing = np.isnan(diff)
            capped += np.where(missing, 1.0, np.minimum(diff, 1.0))
            uncapped += np.where(missing, np.inf, diff)
        out[start : start + len(chunk)] = _mean_of_nearest(capped, uncapped, train_target, take)
    return out


def _mean_of_nearest(
    capped: np.ndarray, uncapped: np.ndarray, target: np.ndarray, take: int
) -> np.ndarray:
    """Per row, the mean target of its ``take`` nearest training rows by (capped, uncapped)
    distance; the rows tied with the ``take``-th share its remaining places equally."""
    order = np.lexsort((uncapped, capped), axis=1)
    last = order[:, take - 1 : take]
    last_capped = np.take_along_axis(capped, last, axis=1)
    last_uncapped = np.take_along_axis(uncapped, last, axis=1)
    tied = (capped == last_capped) & (uncapped == last_uncapped)
    closer = (capped < last_capped) | ((capped == last_capped) & (uncapped < last_uncapped))
    n_closer = closer.sum(axis=1)
    tied_mean = (tied * target).sum(axis=1) / tied.sum(axis=1)
    return ((closer * target).sum(axis=1) + (take - n_closer) * tied_mean) / take


def _design(codes: np.ndarray, numbers: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    blocks = [np.ones((codes.shape[0], 1))]
    for j, size in enumerate(sizes):
        indicator = np.zeros((codes.shape[0], size))
        present = codes[:, j] >= 0
        indicator[np.flatnonzero(present), codes[present, j]] = 1.0
        blocks.append(indicator)
    if numbers.shape[1]:
        blocks.append(np.nan_to_num(numbers, nan=0.0))
    return np.hstack(blocks)


@dataclass(frozen=True)
class RegressionFit:
    """Coefficients over the design of :func:`_design`, centred floats."""

    beta: np.ndarray
    numbers_mean: np.ndarray

    def estimates(self, evidence: EncodedEvidence, rows: np.ndarray) -> np.ndarray:
        design = _design(
            evidence.test_codes[rows],
            evidence.test_numbers[rows] - self.numbers_mean,
            evidence.n_categories,
        )
        return design @ self.beta


def fit_regression(evidence: EncodedEvidence, train_target: np.ndarray) -> RegressionFit:
    """Least squares on the training rows (refused above 5,000 indicator columns)."""
    indicators = sum(evidence.n_categories)
    if indicators > MAX_INDICATORS:
        raise InputError(
            "evaluate.config.model",
            "regression",
            f"the evidence has {indicators} distinct category values (limit {MAX_INDICATORS}); "
            "use the knn model or fewer high-cardinality fields",
        )
    numbers = evidence.train_numbers
    with np.errstate(invalid="ignore"):
        present = np.isfinite(numbers).any(axis=0)
        numbers_mean = np.where(present, np.nanmean(np.where(present, numbers, 0.0), axis=0), 0.0)
    design = _design(evidence.train_codes, numbers - numbers_mean, evidence.n_categories)
    gram = design.T @ design + 1e-6 * max(len(train_target), 1) * np.eye(design.shape[1])
    beta = np.linalg.solve(gram, design.T @ train_target)
    return RegressionFit(beta, numbers_mean)
