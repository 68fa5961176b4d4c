"""The holdout report's JSON, as stored and returned by the API: keys as in 000, converted here
and only here, from the typed :class:`~eval_pipelines.core.holdout.report.HoldoutReport`."""

from __future__ import annotations

from typing import Any

from eval_pipelines.core.hashing import hash_json
from eval_pipelines.core.holdout.compare import PairedLevel
from eval_pipelines.core.holdout.cost_report import cost_comparison_to_json, variant_cost_to_json
from eval_pipelines.core.holdout.report import Comparison, HoldoutReport
from eval_pipelines.core.holdout.scoring import CandidateSupply, VariantScore
from eval_pipelines.core.holdout.spec import HoldoutSpec
from eval_pipelines.core.holdout.trials import TrialsSummary
from eval_pipelines.core.holdout.variants import AA_TWIN
from eval_pipelines.core.stats import INSUFFICIENT, Proportion
from eval_pipelines.core.stats.clustered import ClusterRatio
from eval_pipelines.core.stats.multiple import holm
from eval_pipelines.core.stats.verdict import BETTER, NO_DETECTABLE_DIFFERENCE, WORSE

AGREEMENT_NOTE = (
    "A holdout score measures agreement with past filing, not correctness against a new policy: "
    "historical labels can contain errors, and conventions can change."
)
EMBEDDING_REPRESENTATION = (
    "cosine similarity of the case's embeddings (L2-normalised; set in versions.embeddings); "
    "a threshold here is not the same as on TF-IDF vectors"
)
NEAR_DUPLICATE_REPRESENTATION = (
    "cosine similarity on hashed TF-IDF vectors (word 1-2-grams and character 3-5-grams, "
    "sublinear tf, smooth idf, L2-normalised)"
)


def comparability(spec: HoldoutSpec) -> dict[str, Any]:
    """What two evaluations must share for their figures to sit on one line of a plot."""
    key: dict[str, Any] = {
        "recordsVersion": spec.records_version,
        "treeVersion": spec.tree_version,
        "grouping": spec.grouping.to_json(),
        "targetDepth": list(spec.target_depth),
    }
    if spec.grouping.mode == "nearDuplicate" and spec.grouping.retrieval.space == "embedding":
        # The groups come from these vectors: other embeddings hold out other records.
        key["embeddingsVersion"] = spec.embeddings_version
    return key


def comparability_key(spec: HoldoutSpec) -> str:
    """A short, readable key for :func:`comparability`, e.g. ``field-group_key.3a9f0c1e``."""
    grouping = spec.grouping
    if grouping.mode == "nearDuplicate":
        label = f"near{grouping.threshold:g}"
    elif grouping.mode == "field":
        label = f"field-{grouping.field}"
    else:
        label = "ungrouped"
    return f"{label}.{hash_json(comparability(spec), length=8)}"


def proportion_to_json(proportion: Proportion) -> dict[str, Any]:
    """``{k, n, value, interval}`` (:meth:`Proportion.to_json`)."""
    return proportion.to_json()


def score_to_json(score: VariantScore) -> dict[str, Any]:
    levels = {
        str(level.depth): {
            "name": level.name,
            "accuracy": proportion_to_json(level.accuracy),
            "declined": level.declined,
            "candidateCeiling": proportion_to_json(level.candidate_ceiling),
        }
        for level in score.levels
    }
    return {
        "n": score.n,
        "levels": levels,
        "targetDepth": {str(d): levels[str(d)]["accuracy"] for d in score.target_depth},
        "declineRate": proportion_to_json(score.decline_rate),
        "routing": {
            route.route: {
                "coverage": proportion_to_json(route.coverage),
                "accuracy": {str(d): proportion_to_json(p) for d, p in route.accuracy.items()},
            }
            for route in score.routing
        },
    }


def supply_to_json(supply: CandidateSupply) -> dict[str, Any]:
    """Evidence requested and supplied by retrieval (``effectiveCandidates*``, ``rowsShort``)
    and, separately, how many supplied records voted (``votes*``; null when not counted)."""
    return {
        "requestedCandidates": supply.requested,
        "effectiveCandidatesMean": round(supply.effective_mean, 3),
        "effectiveCandidatesMin": supply.effective_min,
        "rowsShort": supply.rows_short,
        "rowsShortKeys": list(supply.rows_short_keys),
        "votesMean": None if supply.votes_mean is None else round(supply.votes_mean, 3),
        "votesMin": supply.votes_min,
    }


SIGNIFICANCE = 0.05


def confirmed_verdict(verdict: str, pvalue: float) -> str:
    """``better``/``worse`` need the interval to exclude zero *and* the exact McNemar test (Holm
    adjusted with several candidates) to agree at 0.05: with few discordant records the
    bootstrap interval is narrower than its nominal 95% (measured in the stats tests), and a
    verdict must not rest on that alone."""
    if verdict in (BETTER, WORSE) and pvalue >= SIGNIFICANCE:
        return NO_DETECTABLE_DIFFERENCE
    return verdict


def paired_levels_to_json(levels: tuple[PairedLevel, ...]) -> dict[str, Any]:
    """Per level: the raw counts (always), the difference with its cluster-bootstrap 95%
    interval, the verdict, the MDE (these read ``insufficient_evidence`` below the minimum n)
    and the exact McNemar p."""
    out = {}
    for level in levels:
        paired = level.paired
        interval = paired.interval
        mde = level.minimum_detectable_effect
        out[str(level.depth)] = {
            "pairs": level.pairs,
            "newlyRight": level.newly_right,
            "newlyWrong": level.newly_wrong,
            "bothRight": level.both_right,
            "bothWrong": level.both_wrong,
            "difference": None if level.difference is None else round(level.difference, 6),
            "interval": INSUFFICIENT
            if interval is None
            else [round(interval.low, 6), round(interval.high, 6)],
            "verdict": confirmed_verdict(level.verdict, level.mcnemar.pvalue),
            "minimumDetectableEffect": None if mde is None else round(mde, 6),
            "clusters": paired.n_clusters,
            "resamples": paired.n_resamples,
            "intervalMethod": paired.method,
            # The exact test is valid at any n (it is how few pairs are judged), so its p is
            # always shown; the interval, verdict and MDE follow the minimum-n rule.
            "mcnemarP": level.mcnemar.pvalue,
        }
    return out


def comparisons_to_json(comparisons: tuple[Comparison, ...]) -> list[dict[str, Any]]:
    """Every candidate against the baseline; with more than one candidate, each level's
    McNemar p-values are also Holm-adjusted across the candidates (``mcnemarPHolm``)."""
    out: list[dict[str, Any]] = [
        {
            "baseline": comparison.baseline,
            "candidate": comparison.candidate,
            "levels": paired_levels_to_json(comparison.levels),
            **(
                {"cost": cost_comparison_to_json(comparison.cost)}
                if comparison.cost is not None
                else {}
            ),
        }
        for comparison in comparisons
    ]
    # The A/A twin measures the instrument, it is not a candidate: it stays out of the family.
    family = [c for c in out if c["candidate"] != AA_TWIN]
    if len(family) > 1:
        for depth in family[0]["levels"]:
            pvalues = [c["levels"][depth]["mcnemarP"] for c in family]
            numeric = [p for p in pvalues if p != INSUFFICIENT]
            adjusted = iter(holm(numeric))
            for comparison, p in zip(family, pvalues, strict=True):
                level = comparison["levels"][depth]
                level["mcnemarPHolm"] = INSUFFICIENT if p == INSUFFICIENT else next(adjusted)
                if level["mcnemarPHolm"] != INSUFFICIENT:
                    level["verdict"] = confirmed_verdict(level["verdict"], level["mcnemarPHolm"])
    return out


def report_to_json(report: HoldoutReport) -> dict[str, Any]:
    """The report as stored and returned by the API (000's key names)."""
    spec = report.spec
    grouping = dict(spec.grouping.to_json())
    grouping["groupMembersExcluded"] = report.group_members_excluded
    if spec.grouping.mode == "nearDuplicate":
        grouping["representation"] = (
            EMBEDDING_REPRESENTATION
            if spec.grouping.retrieval.space == "embedding"
            else NEAR_DUPLICATE_REPRESENTATION
        )
    versions = {
        "records": spec.records_version,
        "tree": spec.tree_version,
        "memo": spec.memo_version,
    }
    if spec.embeddings_version is not None:
        versions["embeddings"] = spec.embeddings_version
    plugins = {v.name: dict(v.plugin) for v in spec.variants if v.plugin is not None}
    report_json: dict[str, Any] = {
        "evalId": spec.eval_id,
        "caseId": spec.case_id,
        "kind": "holdout",
        "sample": {
            "size": report.sample_size,
            "requestedSize": spec.sample_size,
            "seed": spec.seed,
            "groupField": spec.grouping.field,
            "grouping": grouping,
            "sampleHash": report.sample_hash,
            "excludedRecords": report.excluded_records,
        },
        "versions": versions,
        "comparableAs": comparability_key(spec),
        "levels": [{"depth": level.depth, "name": level.name} for level in report.levels],
        "targetDepth": list(spec.target_depth),
        "variants": [
            {
                "name": variant.name,
                "memoInclude": list(variant.memo_include),
                "memoVersion": variant.memo_version,
                "config": variant.config.to_json(),
                "score": score_to_json(variant.score),
                "failedRows": variant.failed_rows,
                "usage": variant.usage,
                "leaveOut": supply_to_json(variant.supply),
                "memoRules": dict(variant.memo_rules),
                **({"cost": variant_cost_to_json(variant.cost)} if variant.cost else {}),
                # Which code a plug-in classifier was (absent for registered ones).
                **({"plugin": plugins[variant.name]} if variant.name in plugins else {}),
            }
            for variant in report.variants
        ],
        "comparisons": comparisons_to_json(report.comparisons),
        "warnings": [{"code": w.code, "message": w.message} for w in report.warnings],
        "note": AGREEMENT_NOTE,
    }
    if report.retrievals is not None:
        report_json["retrievals"] = list(report.retrievals)
    if report.diagnostics is not None:
        report_json["diagnostics"] = report.diagnostics
    if report.aa_check is not None:
        report_json["aaCheck"] = report.aa_check
    if report.leakage_gap is not None:
        report_json["leakageGap"] = report.leakage_gap
    if report.trials is not None:
        order = [v.name for v in report.variants if v.name in report.trials]
        report_json["trials"] = trials_to_json({name: report.trials[name] for name in order})
    return report_json


def _ratio_figure(ratio: ClusterRatio, **counts: int) -> dict[str, Any]:
    """``{value, interval, n, clusters, ...counts}`` of one cluster-bootstrap figure: value
    ``insufficient_evidence`` and interval null below the minimum sample."""
    figure: dict[str, Any] = {"value": INSUFFICIENT, "interval": None}
    if ratio.estimate is not None and ratio.interval is not None:
        figure = {
            "value": round(ratio.estimate, 6),
            "interval": [round(ratio.interval.low, 6), round(ratio.interval.high, 6)],
        }
    return {**figure, "n": ratio.n, "clusters": ratio.n_clusters, **counts}


def trials_to_json(summaries: dict[str, TrialsSummary]) -> dict[str, Any]:
    """The report's ``trials`` block: per variant with N > 1, N, its records and failed
    trials, and per target level accuracy over all trials, agreement, unanimous records and
    the flip rate, each with its cluster-bootstrap interval, ``n`` (records) and ``clusters``
    (the resampled units), plus the counts the figure is made of (trials and right trials;
    unanimous records; pairs and disagreeing pairs)."""
    out = {}
    for name, summary in summaries.items():
        levels = {}
        for level in summary.levels:
            levels[str(level.depth)] = {
                "records": level.records,
                "trials": level.trials,
                "failedTrials": level.failed_trials,
                "clusters": level.clusters,
                "accuracy": _ratio_figure(
                    level.accuracy, trials=level.trials, rightTrials=level.right_trials
                ),
                "agreement": _ratio_figure(level.agreement, trials=level.trials),
                "unanimous": _ratio_figure(level.unanimous, k=level.unanimous_records),
                "flipRate": _ratio_figure(
                    level.flip_rate, pairs=level.pairs, disagreeingPairs=level.disagreeing_pairs
                ),
            }
        first = summary.levels[0].accuracy if summary.levels else None
        out[name] = {
            "trials": summary.n_trials,
            "records": summary.records,
            "trialRows": summary.records * summary.n_trials,
            "failedTrials": summary.failed_trials,
            "resamples": first.n_resamples if first else None,
            "confidenceLevel": first.confidence_level if first else None,
            "intervalMethod": first.method if first else None,
            "levels": levels,
        }
    return out
