"""Repeated trials of one variant (config ``trials`` N > 1): each sampled record classified N
times, and what the repetition says: accuracy over all trials, how well a record's trials agree,
and the A/A flip rate of the model's own non-determinism, each with an interval in which a
record's trials stay together (and with them the records held out together).

Definitions, per target level L, over the records whose label reaches L (the records the
variant's accuracy at L is scored on):

- A trial's **answer** at L is its code's ancestor at L; a code that does not reach L (or no
  code) is the answer ``declined``; a **failed trial** (its ``error`` set: a failed call or an
  answer refused by the parser) is the answer ``failed``, whatever its code.
- A trial is **right** at L when it did not fail and its answer is the label's ancestor at L;
  a failed trial counts as wrong.
- **Accuracy over all trials**: the mean over records of the share of the record's trials that
  are right.
- **Agreement**: the mean over records of the share of the record's trials that give its modal
  answer (1 when all agree, ``1/N`` at worst); **unanimous**: the share of records whose N
  trials all give the same answer.
- **Flip rate**: of the ``N(N-1)/2`` pairs of trials of each record, the share that disagree,
  pooled over records (disagreeing pairs over pairs, a ratio estimator): the chance that two
  runs of the same configuration on the same record give different answers.

Every interval is a cluster bootstrap (:func:`~eval_pipelines.core.stats.clustered.
cluster_ratio`) whose cluster is the record's cluster of the sample (records held out
together, :mod:`~eval_pipelines.core.holdout.clusters`) carrying all its records' trials: a
record's trials are never resampled independently of each other.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout.scoring import VariantScore
from eval_pipelines.core.holdout.variants import AA_TWIN
from eval_pipelines.core.holdout.warnings import ReportWarning
from eval_pipelines.core.stats.clustered import ClusterRatio, cluster_ratio
from eval_pipelines.core.stats.policy import MIN_N
from eval_pipelines.core.tree import CodeTree

#: The columns of a trials frame (``variant_trials`` without ``eval_id``).
TRIAL_COLUMNS = ("variant", "record_key", "trial", "code", "confidence", "route", "error")

#: The answers that are not codes, as the report names them.
FAILED = "failed"
DECLINED = "declined"

BOOTSTRAP_RESAMPLES = 2000

# Sentinels for the two answers that are not codes: tuples never equal a code (a string), so a
# code spelled "failed" stays a code.
_FAILED = ("failed",)
_DECLINED = ("declined",)

# Figure numbers in each interval's seed, so the four intervals of a level draw apart.
_FIGURES = {"accuracy": 0, "agreement": 1, "unanimous": 2, "flip_rate": 3}


@dataclass(frozen=True)
class TrialsLevel:
    """One target level of one variant's repeated trials.

    Attributes
    ----------
    depth
        The level.
    records
        Records scored here (their label reaches the level).
    trials
        Their trials (``records * N``).
    clusters
        Clusters of the sample those records fall in (the resampled units).
    failed_trials
        Their trials that failed.
    right_trials
        Trials right at this level (failed trials are wrong).
    accuracy
        Mean over records of the share of right trials (``right_trials / trials``).
    agreement
        Mean over records of the share of trials giving the record's modal answer.
    unanimous_records
        Records whose trials all give the same answer.
    unanimous
        ``unanimous_records / records``.
    pairs, disagreeing_pairs
        Pairs of trials of the same record (``records * N(N-1)/2``), and those that disagree.
    flip_rate
        ``disagreeing_pairs / pairs``.
    """

    depth: int
    records: int
    trials: int
    clusters: int
    failed_trials: int
    right_trials: int
    accuracy: ClusterRatio
    agreement: ClusterRatio
    unanimous_records: int
    unanimous: ClusterRatio
    pairs: int
    disagreeing_pairs: int
    flip_rate: ClusterRatio


@dataclass(frozen=True)
class TrialsSummary:
    """One variant's repeated trials.

    Attributes
    ----------
    variant
        The variant's name.
    n_trials
        N, the trials of each record.
    records
        Records with trials (the sample).
    failed_trials
        Trials that failed, over every record and trial.
    levels
        One per target level.
    """

    variant: str
    n_trials: int
    records: int
    failed_trials: int
    levels: tuple[TrialsLevel, ...]

    def level(self, depth: int) -> TrialsLevel:
        return next(level for level in self.levels if level.depth == depth)


def summarize_trials(
    trials: pl.DataFrame,
    labels: pl.DataFrame,
    tree: CodeTree,
    *,
    target_depth: Sequence[int],
    clusters: Mapping[str, int] | None = None,
    seed: int,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    confidence_level: float = 0.95,
    min_n: int = MIN_N,
) -> dict[str, TrialsSummary]:
    """Accuracy over all trials, agreement and flip rate per variant with N > 1 trials.

    Parameters
    ----------
    trials
        A trials frame (:data:`TRIAL_COLUMNS`; ``confidence`` and ``route`` are not read):
        one row per variant, sampled record and trial. Every record of a variant must have
        trials ``1..N`` exactly, for the same N, and every sampled record must have them.
    labels
        ``record_key, label_node`` of the sampled records (as
        :func:`~eval_pipelines.core.holdout.scoring.row_outcomes` takes them).
    tree
        The pinned code tree.
    target_depth
        The levels summarised.
    clusters
        Each sampled record's cluster (records held out together); None makes each record
        its own cluster.
    seed
        The evaluation's seed. Each interval is seeded by it, the variant's name, the level
        and the figure, so a report is reproducible and one variant's intervals do not
        depend on which other variants ran.
    n_resamples, confidence_level, min_n
        As :func:`~eval_pipelines.core.stats.clustered.cluster_ratio`: below ``min_n``
        records or clusters at a level its figures read ``insufficient_evidence``.

    Returns
    -------
    dict
        Variant name to :class:`TrialsSummary`, in order of name, for the variants with
        N > 1 (a variant classified once has nothing to repeat and is left out).

    Raises
    ------
    InputError
        A missing column, a duplicated ``(variant, record_key, trial)``, trial numbers that
        are not ``1..N`` for every record, a record outside ``labels`` or a sampled record
        without trials, a target level outside the tree, or a record without a cluster.
    """
    _check_frame(trials, labels, tree, target_depth, clusters)
    label_of = dict(
        zip(
            labels.get_column("record_key").to_list(),
            labels.get_column("label_node").to_list(),
            strict=True,
        )
    )
    summaries = {}
    for variant in sorted(set(trials.get_column("variant").to_list())):
        rows = trials.filter(pl.col("variant") == variant).sort("record_key", "trial")
        n_trials = max(rows.get_column("trial").to_list())
        if n_trials < 2:
            continue
        summaries[variant] = _summarize_variant(
            variant,
            rows,
            n_trials,
            label_of,
            tree,
            target_depth=tuple(target_depth),
            clusters=clusters,
            seed=seed,
            n_resamples=n_resamples,
            confidence_level=confidence_level,
            min_n=min_n,
        )
    return summaries


def _check_frame(
    trials: pl.DataFrame,
    labels: pl.DataFrame,
    tree: CodeTree,
    target_depth: Sequence[int],
    clusters: Mapping[str, int] | None,
) -> None:
    """Refuse a trials frame the statistics would misread (once, at the boundary)."""
    missing = [c for c in ("variant", "record_key", "trial", "code", "error") if c not in trials]
    if missing:
        raise InputError("trials", list(trials.columns), f"needs the columns {missing}")
    if "record_key" not in labels.columns or "label_node" not in labels.columns:
        raise InputError("labels", list(labels.columns), "needs record_key and label_node")
    for depth in target_depth:
        if not 1 <= depth <= tree.max_depth:
            raise InputError("target_depth", depth, f"must be a level 1..{tree.max_depth}")
    if not trials.get_column("trial").dtype.is_integer():
        raise InputError("trials.trial", str(trials.get_column("trial").dtype), "must be integers")
    if trials.get_column("trial").null_count() or trials.get_column("record_key").null_count():
        raise InputError("trials", "null", "record_key and trial must be set on every row")
    duplicated = trials.filter(pl.struct("variant", "record_key", "trial").is_duplicated())
    if duplicated.height:
        first = duplicated.row(0, named=True)
        raise InputError(
            "trials",
            f"{first['variant']}/{first['record_key']}/trial {first['trial']}",
            "each (variant, record_key, trial) must occur once",
        )
    sampled = set(labels.get_column("record_key").to_list())
    for variant in sorted(set(trials.get_column("variant").to_list())):
        rows = trials.filter(pl.col("variant") == variant)
        keys = set(rows.get_column("record_key").to_list())
        if keys != sampled:
            stray = sorted(keys - sampled)[:3]
            absent = sorted(sampled - keys)[:3]
            raise InputError(
                "trials",
                variant,
                f"must have trials for exactly the sampled records ({len(sampled)}); has "
                f"{len(keys)}"
                + (f", not sampled: {stray}" if stray else "")
                + (f", without trials: {absent}" if absent else ""),
            )
        n_trials = max(rows.get_column("trial").to_list())
        per_record = rows.group_by("record_key").agg(
            pl.len().alias("count"), pl.col("trial").min().alias("first")
        )
        bad = per_record.filter((pl.col("count") != n_trials) | (pl.col("first") != 1))
        if bad.height:
            key = sorted(bad.get_column("record_key").to_list())[0]
            raise InputError(
                "trials",
                f"{variant}/{key}",
                f"every record must have trials 1..{n_trials} (the variant's N), each once",
            )
    if clusters is not None:
        without = sorted(k for k in sampled if k not in clusters)
        if without:
            raise InputError("clusters", without[:3], "every sampled record needs a cluster")


def _summarize_variant(
    variant: str,
    rows: pl.DataFrame,
    n_trials: int,
    label_of: Mapping[str, str],
    tree: CodeTree,
    *,
    target_depth: tuple[int, ...],
    clusters: Mapping[str, int] | None,
    seed: int,
    n_resamples: int,
    confidence_level: float,
    min_n: int,
) -> TrialsSummary:
    # Rows are sorted by record and trial and every record has N of them: row r * N + t is
    # trial t + 1 of the r-th record.
    keys = rows.get_column("record_key").to_list()[::n_trials]
    failed = [error is not None for error in rows.get_column("error").to_list()]
    paths = tree.paths
    codes = rows.get_column("code").to_list()
    code_paths = [paths.get(code, ()) if code is not None else () for code in codes]
    label_paths = [paths.get(label_of[key], ()) for key in keys]
    name_hash = zlib.crc32(variant.encode())
    levels = []
    for depth in target_depth:
        at = depth - 1
        answers = [
            _FAILED if fail else (path[at] if len(path) >= depth else _DECLINED)
            for fail, path in zip(failed, code_paths, strict=True)
        ]
        scored = [i for i, path in enumerate(label_paths) if len(path) >= depth]
        right = np.zeros(len(scored), dtype=np.float64)
        modal = np.zeros(len(scored), dtype=np.float64)
        disagreeing = np.zeros(len(scored), dtype=np.float64)
        for j, i in enumerate(scored):
            truth = label_paths[i][at]
            own = answers[i * n_trials : (i + 1) * n_trials]
            counts = Counter(own)
            right[j] = sum(answer == truth for answer in own)
            modal[j] = max(counts.values())
            agreeing = sum(c * (c - 1) // 2 for c in counts.values())
            disagreeing[j] = n_trials * (n_trials - 1) // 2 - agreeing
        groups = [clusters[keys[i]] for i in scored] if clusters is not None else None
        pairs_each = n_trials * (n_trials - 1) // 2

        def ratio(
            figure: str,
            values: np.ndarray,
            weights: np.ndarray | None = None,
            *,
            depth: int = depth,
            groups: list[int] | None = groups,
        ) -> ClusterRatio:
            return cluster_ratio(
                values,
                weights,
                clusters=groups,
                n_resamples=n_resamples,
                confidence_level=confidence_level,
                rng=np.random.default_rng([seed, name_hash, depth, _FIGURES[figure]]),
                min_n=min_n,
            )

        accuracy = ratio("accuracy", right / n_trials)
        unanimous = modal == n_trials
        levels.append(
            TrialsLevel(
                depth=depth,
                records=len(scored),
                trials=len(scored) * n_trials,
                clusters=accuracy.n_clusters,
                failed_trials=sum(sum(failed[i * n_trials : (i + 1) * n_trials]) for i in scored),
                right_trials=int(right.sum()),
                accuracy=accuracy,
                agreement=ratio("agreement", modal / n_trials),
                unanimous_records=int(unanimous.sum()),
                unanimous=ratio("unanimous", unanimous.astype(np.float64)),
                pairs=len(scored) * pairs_each,
                disagreeing_pairs=int(disagreeing.sum()),
                flip_rate=ratio("flip_rate", disagreeing, np.full(len(scored), float(pairs_each))),
            )
        )
    return TrialsSummary(
        variant=variant,
        n_trials=n_trials,
        records=len(keys),
        failed_trials=sum(failed),
        levels=tuple(levels),
    )


def trials_warnings(
    summaries: Mapping[str, TrialsSummary], scores: Mapping[str, VariantScore]
) -> list[ReportWarning]:
    """What the repetition says about the rest of the report.

    - ``trials_within_noise``: at a target level, the flip rate's upper bound is at least the
      absolute difference of trial-1 accuracy between this variant and another (``scores``:
      each variant's score, trial 1; the A/A twin is left out, it measures the instrument):
      two runs of this variant disagree on that many records, so the trial-1 comparison is
      within the model's own noise.
    - ``trials_single_pair``: N = 2, so the flip rate rests on a single pair per record.
    - ``failed_trials``: trials failed; they count as wrong and as the answer ``failed``.
    """
    warnings = []
    for name, summary in summaries.items():
        if summary.n_trials == 2:
            warnings.append(
                ReportWarning(
                    "trials_single_pair",
                    f"variant {name}: 2 trials per record, so its flip rate rests on a single "
                    "pair of trials per record; run 3 or more trials to read agreement",
                )
            )
        if summary.failed_trials:
            warnings.append(
                ReportWarning(
                    "failed_trials",
                    f"variant {name}: {summary.failed_trials} of "
                    f"{summary.records * summary.n_trials} trials failed; they count as wrong "
                    f"and as the answer {FAILED!r} in agreement and flip rate",
                )
            )
        own = scores.get(name)
        if own is None or name == AA_TWIN:  # the twin is the instrument, not a candidate
            continue
        for level in summary.levels:
            interval = level.flip_rate.interval
            mine = own.level(level.depth).accuracy if level.depth in own.target_depth else None
            if interval is None or mine is None or mine.estimate is None:
                continue
            within = []
            for other, score in scores.items():
                if other in (name, AA_TWIN):
                    continue
                theirs = score.level(level.depth).accuracy.estimate
                if theirs is None:
                    continue
                difference = abs(mine.estimate - theirs)
                if interval.high >= difference:
                    within.append(f"{other} ({difference:.3f})")
            if within:
                warnings.append(
                    ReportWarning(
                        "trials_within_noise",
                        f"variant {name} at L{level.depth}: the upper bound of its flip rate "
                        f"({interval.high:.3f}, {level.disagreeing_pairs} of {level.pairs} "
                        "pairs of trials disagree) is at least its trial-1 accuracy difference "
                        f"from {', '.join(within)}: that comparison is within the model's own "
                        "run-to-run noise",
                    )
                )
    return warnings
