"""Multinomial naive Bayes over evidence counts, fitted once and held out by subtraction.

The counts of the whole table are taken once; the model for a hold-out is those counts minus
the test rows' counts, which is exactly the model fitted on the training rows alone (tested
against a refit). So every test row of a fold is predicted by one model that never saw any
test row, without refitting per row.

Score of class c for a row with (weighted) feature counts w_t, Laplace smoothing alpha = 1::

    log P(c) + sum_t w_t * log((N_ct + alpha) / (N_c + alpha * V))

with N_ct the training count of feature t in class c, N_c its total, V the features seen in
training and P(c) = (n_c + 1) / (n + C) over the classes seen in training. Classes only the
test rows carry are not candidates (probability 0). The sum splits into a sparse part,
sum_t w_t * log1p(N_ct / alpha), and a dense part, (sum_t w_t) * log(alpha / (N_c + alpha V)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

ALPHA = 1.0
TAU_BOUNDS = (0.05, 20.0)


@dataclass(frozen=True)
class ClassCounts:
    """Feature counts per class (classes x features), rows per class, rows with a target."""

    feature_counts: sparse.csr_matrix
    class_rows: np.ndarray
    n_rows: int

    def minus(self, other: ClassCounts) -> ClassCounts:
        difference = (self.feature_counts - other.feature_counts).tocsr()
        difference.eliminate_zeros()
        return ClassCounts(
            difference, self.class_rows - other.class_rows, self.n_rows - other.n_rows
        )


def class_counts(targets: sparse.csr_matrix, counts: sparse.csr_matrix) -> ClassCounts:
    """Counts of the rows of ``targets`` (rows x classes, 1 where the row has the class) and
    ``counts`` (rows x features)."""
    per_class = (targets.T @ counts).tocsr()
    per_class.eliminate_zeros()
    class_rows = np.asarray(targets.sum(axis=0)).ravel()
    return ClassCounts(per_class, class_rows, int((targets.getnnz(axis=1) > 0).sum()))


def softmax(scores: np.ndarray, tau: float = 1.0) -> np.ndarray:
    """Row-wise softmax of ``scores / tau``; ``-inf`` scores get probability 0."""
    scaled = scores / tau
    top = np.max(scaled, axis=1, keepdims=True)
    weights = np.exp(scaled - np.where(np.isfinite(top), top, 0.0))
    return weights / weights.sum(axis=1, keepdims=True)


class NaiveBayes:
    """The model of one set of training counts."""

    def __init__(self, counts: ClassCounts) -> None:
        self.counts = counts
        fc = counts.feature_counts
        self.seen = counts.class_rows > 0
        self.n_seen = int(self.seen.sum())
        self.feature_totals = np.asarray(fc.sum(axis=0)).ravel()
        self.vocabulary = max(int((self.feature_totals > 0).sum()), 1)
        self._known = sparse.diags((self.feature_totals > 0).astype(np.float64), format="csr")
        self.class_totals = np.asarray(fc.sum(axis=1)).ravel()
        prior = (counts.class_rows + 1.0) / (counts.class_rows.sum() + self.n_seen)
        with np.errstate(divide="ignore"):
            self.log_prior = np.where(self.seen, np.log(prior), -np.inf)
        self.log_smooth = np.log(ALPHA / (self.class_totals + ALPHA * self.vocabulary))
        evidence = fc.astype(np.float64, copy=True)
        evidence.data = np.log1p(evidence.data / ALPHA)
        self.evidence = evidence.T.tocsr()

    def log_scores(
        self, weighted: sparse.csr_matrix, counts: sparse.csr_matrix | None = None
    ) -> np.ndarray:
        """Unnormalised log posteriors, rows x classes (``-inf`` for unseen classes).

        With group weights, ``counts`` (the same rows unweighted) scales each row's prior by
        the share of evidence its weights kept, so a row with one field is the plain model at
        a lower temperature: the same ranking, less confidence.
        """
        # Features no training row has are no evidence (as if unseen), whatever the vocabulary.
        weighted = (weighted @ self._known).tocsr()
        counts = None if counts is None else (counts @ self._known).tocsr()
        scores = np.asarray((weighted @ self.evidence).todense())
        mass = np.asarray(weighted.sum(axis=1)).ravel()
        scores += mass[:, None] * self.log_smooth[None, :]
        prior_scale = np.ones(len(mass))
        if counts is not None:
            raw = np.asarray(counts.sum(axis=1)).ravel()
            np.divide(mass, raw, out=prior_scale, where=raw > 0)
        with np.errstate(invalid="ignore"):
            scores += prior_scale[:, None] * self.log_prior[None, :]
        return scores

    def leave_one_out_scores(
        self,
        counts: sparse.csr_matrix,
        weighted: sparse.csr_matrix,
        classes: np.ndarray,
    ) -> np.ndarray:
        """Scores of training rows as if each had not been in training (exactly the model
        refitted without it, up to a constant per row): its own counts come out of its own
        class, and the features only it had leave the vocabulary and its evidence."""
        sparse_part = np.asarray((weighted @ self.evidence).todense())
        mass = np.asarray(weighted.sum(axis=1)).ravel()
        raw = np.asarray(counts.sum(axis=1)).ravel()
        fc = self.counts.feature_counts.tocsr()
        scores = np.empty_like(sparse_part)
        for i in range(counts.shape[0]):
            start, end = counts.indptr[i], counts.indptr[i + 1]
            features = counts.indices[start:end]
            own = counts.data[start:end]
            w_start, w_end = weighted.indptr[i], weighted.indptr[i + 1]
            w_by_feature = dict(
                zip(weighted.indices[w_start:w_end], weighted.data[w_start:w_end], strict=True)
            )
            weights = np.array([w_by_feature.get(f, 0.0) for f in features])
            lost = self.feature_totals[features] - own <= 0
            vocabulary = max(self.vocabulary - int(lost.sum()), 1)
            row_mass = mass[i] - float(weights[lost].sum())
            row_raw = raw[i] - float(own[lost].sum())
            scale = row_mass / row_raw if row_raw > 0 else 1.0
            c = int(classes[i])
            totals = self.class_totals.copy()
            totals[c] -= own.sum()
            smooth = np.log(ALPHA / (totals + ALPHA * vocabulary))
            with np.errstate(invalid="ignore"):
                row = sparse_part[i] + row_mass * smooth + scale * self.log_prior
            remaining = self.counts.class_rows[c] - 1
            if remaining <= 0:
                row[c] = -np.inf
            else:
                before = np.asarray(fc[c, features].todense()).ravel()
                change = np.log1p((before - own) / ALPHA) - np.log1p(before / ALPHA)
                row[c] += float(weights @ change)
                row[c] += scale * np.log((remaining + 1.0) / (self.counts.class_rows[c] + 1.0))
            scores[i] = row
        return scores


def fit_temperature(scores: np.ndarray, truth: np.ndarray) -> float:
    """The temperature tau minimising the mean negative log likelihood of ``truth`` under
    ``softmax(scores / tau)`` (bounded search in [0.05, 20])."""
    # Imported here: scipy.optimize is slow to import (docs/benchmarks.md), and every process
    # that loads the definitions imports this module, holdout runs included, which never fit
    # a temperature.
    from scipy import optimize

    eps = float(np.finfo(np.float64).eps)
    rows = np.arange(len(truth))

    def loss(tau: float) -> float:
        p = softmax(scores, tau)[rows, truth]
        return float(-np.mean(np.log(np.clip(p, eps, 1.0))))

    result = optimize.minimize_scalar(loss, bounds=TAU_BOUNDS, method="bounded")
    return float(result.x)
