"""The holdout report: typed results, their JSON (keys as in 000, converted here and only here)
and a markdown summary for the Dagster UI and the CLI."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eval_pipelines.core.hashing import hash_json
from eval_pipelines.core.holdout.classify_config import ClassifyConfig
from eval_pipelines.core.holdout.compare import PairedLevel
from eval_pipelines.core.holdout.noise_floor import approximate_retrieval_warnings
from eval_pipelines.core.holdout.scoring import CandidateSupply, LevelScore, VariantScore
from eval_pipelines.core.holdout.spec import HoldoutSpec
from eval_pipelines.core.holdout.trials import (
    DECLINED,
    FAILED,
    TrialsSummary,
    trials_warnings,
)
from eval_pipelines.core.holdout.variants import AA_TWIN
from eval_pipelines.core.holdout.warnings import ReportWarning
from eval_pipelines.core.stats import INSUFFICIENT, Proportion
from eval_pipelines.core.stats.clustered import ClusterRatio
from eval_pipelines.core.stats.multiple import holm
from eval_pipelines.core.stats.verdict import BETTER, NO_DETECTABLE_DIFFERENCE, WORSE
from eval_pipelines.core.tree import Level

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


@dataclass(frozen=True)
class VariantResult:
    """One variant's scores and what it ran with.

    ``memo_rules`` maps each memo entry of the variant to the rows it fired on (its ``when``
    matched), 0 for entries that never fired.
    """

    name: str
    memo_include: tuple[str, ...]
    memo_version: str
    config: ClassifyConfig
    score: VariantScore
    failed_rows: int
    usage: dict[str, Any]
    supply: CandidateSupply
    memo_rules: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Comparison:
    """A candidate variant paired with the baseline, level by level."""

    baseline: str
    candidate: str
    levels: tuple[PairedLevel, ...]


@dataclass(frozen=True)
class HoldoutReport:
    spec: HoldoutSpec
    levels: tuple[Level, ...]
    sample_hash: str
    sample_size: int
    group_members_excluded: int
    excluded_records: int
    variants: tuple[VariantResult, ...]
    comparisons: tuple[Comparison, ...]
    warnings: tuple[ReportWarning, ...]
    retrievals: tuple[dict[str, Any], ...] | None = None
    diagnostics: dict[str, Any] | None = None
    aa_check: dict[str, Any] | None = None
    leakage_gap: dict[str, Any] | None = None
    trials: dict[str, TrialsSummary] | None = None


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


def _stops_above(score: VariantScore, level: LevelScore) -> bool:
    """Whether every row scored at ``level`` was declined there while some shallower level
    has codes: the classifier's codes stop above ``level`` (e.g. a plug-in that answers
    categories scored at a subcategory target)."""
    if level.accuracy.n == 0 or level.declined < level.accuracy.n:
        return False
    return any(
        other.declined < other.accuracy.n for other in score.levels if other.depth < level.depth
    )


def _warnings(
    spec: HoldoutSpec, sample_size: int, variants: tuple[VariantResult, ...]
) -> tuple[ReportWarning, ...]:
    warnings = []
    if spec.grouping.mode == "none":
        warnings.append(
            ReportWarning(
                "ungrouped",
                "grouping mode none: near-duplicates of sampled records stayed in the evidence; "
                "read only the paired differences between variants, as a sign of direction, "
                "and do not quote absolute accuracy",
            )
        )
    if sample_size < spec.sample_size:
        warnings.append(
            ReportWarning(
                "sample_smaller_than_requested",
                f"the case has only {sample_size} records; sampled all of them",
            )
        )
    for variant in variants:
        if variant.failed_rows:
            warnings.append(
                ReportWarning(
                    "failed_rows",
                    f"variant {variant.name}: {variant.failed_rows} rows failed to classify; "
                    "they count as wrong and declined",
                )
            )
        if variant.supply.rows_short:
            warnings.append(
                ReportWarning(
                    "candidates_short",
                    f"variant {variant.name}: retrieval returned fewer than the "
                    f"{variant.supply.requested} evidence records requested for "
                    f"{variant.supply.rows_short} rows (too few records share any text "
                    "feature with them)",
                )
            )
        for depth in variant.score.target_depth:
            level = variant.score.level(depth)
            accuracy = level.accuracy
            if _stops_above(variant.score, level):
                warnings.append(
                    ReportWarning(
                        "no_codes_at_target",
                        f"variant {variant.name}: none of its {accuracy.n} predictions reaches "
                        f"target level {_level_title(depth, level.name)}, though codes reach "
                        "shallower levels: its accuracy there is 0 by construction (a code "
                        "shallower than a level counts as declined at it), not a measure of "
                        "wrong codes",
                    )
                )
            if not accuracy.sufficient:
                warnings.append(
                    ReportWarning(
                        INSUFFICIENT,
                        f"variant {variant.name}: only {accuracy.n} records reach target "
                        f"depth {depth}",
                    )
                )
    return tuple(warnings)


def build_report(
    spec: HoldoutSpec,
    levels: tuple[Level, ...],
    *,
    sample_hash: str,
    sample_size: int,
    group_members_excluded: int,
    excluded_records: int,
    variants: tuple[VariantResult, ...],
    comparisons: tuple[Comparison, ...],
    retrievals: tuple[dict[str, Any], ...] | None = None,
    diagnostics: dict[str, Any] | None = None,
    aa_check: dict[str, Any] | None = None,
    leakage_gap: dict[str, Any] | None = None,
    trials: dict[str, TrialsSummary] | None = None,
) -> HoldoutReport:
    """Assemble the whole report and derive its warnings.

    ``retrievals`` (the stored retrieval rows), ``diagnostics``
    (:func:`~eval_pipelines.core.holdout.diagnostics.evaluation_diagnostics`), ``aa_check``
    (:func:`~eval_pipelines.core.holdout.noise_floor.aa_noise_floor`), ``leakage_gap`` and
    ``trials`` (:func:`~eval_pipelines.core.holdout.trials.summarize_trials`, with its
    warnings: :func:`~eval_pipelines.core.holdout.trials.trials_warnings`) are reported when
    given; None leaves their block out. A failed A/A check is the first warning: every
    difference in the report is read against that noise floor.
    """
    if trials is not None:
        unknown = sorted(set(trials) - {v.name for v in variants})
        if unknown:
            raise ValueError(f"trials: summaries of variants the report does not have: {unknown}")
    warnings: list[ReportWarning] = []
    if aa_check is not None and not aa_check["passed"]:
        warnings.append(ReportWarning("aa_check_failed", aa_check["summary"]))
    warnings += _warnings(spec, sample_size, variants)
    if trials is not None:
        warnings += trials_warnings(trials, {v.name: v.score for v in variants})
    warnings += approximate_retrieval_warnings(list(retrievals or ()))
    return HoldoutReport(
        spec=spec,
        levels=levels,
        sample_hash=sample_hash,
        sample_size=sample_size,
        group_members_excluded=group_members_excluded,
        excluded_records=excluded_records,
        variants=variants,
        comparisons=comparisons,
        warnings=tuple(warnings),
        retrievals=retrievals,
        diagnostics=diagnostics,
        aa_check=aa_check,
        leakage_gap=leakage_gap,
        trials=trials,
    )


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


def _fmt(proportion: dict[str, Any]) -> str:
    if proportion["value"] == INSUFFICIENT:
        return f"{INSUFFICIENT} (k={proportion['k']}, n={proportion['n']})"
    low, high = proportion["interval"]
    return f"{proportion['value']:.3f} [{low:.3f}, {high:.3f}] n={proportion['n']}"


def format_difference(value: float | None) -> str:
    """Three decimals, signed only when the rounded value is not zero (never ``-0.000``)."""
    if value is None:
        return "n/a"
    text = f"{value:.3f}"
    if float(text) == 0.0:
        return "0.000"
    return f"{value:+.3f}"


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _level_title(depth: int | str, name: str) -> str:
    """``L<d> <name>``, the depth said once (a name made unique as ``subcategory L4`` reads
    ``L4 subcategory``)."""
    return f"L{depth} {name.removesuffix(f' L{depth}')}".strip()


def _level_titles(report: dict[str, Any]) -> dict[str, str]:
    """``L<d> <name>`` per level; target levels in bold and marked ``(target)``."""
    targets = {str(d) for d in report["targetDepth"]}
    titles = {}
    for level in report["levels"]:
        depth = str(level["depth"])
        title = _level_title(depth, level["name"])
        titles[depth] = f"**{title}** (target)" if depth in targets else title
    return titles


def _memo_rules_text(rules: dict[str, int]) -> str:
    if not rules:
        return "none"
    return ", ".join(f"`{entry}` {rows}" for entry, rows in rules.items())


def _supply_text(supply: dict[str, Any]) -> str:
    text = (
        f"{supply['requestedCandidates']} requested, {supply['effectiveCandidatesMean']:g} "
        f"returned on average (min {supply['effectiveCandidatesMin']})"
    )
    if supply.get("votesMean") is not None:
        text += f", {supply['votesMean']:g} voted on average (min {supply['votesMin']})"
    return text


def _resamples(report: dict[str, Any]) -> int:
    return int(
        report["comparisons"][0]["levels"][next(iter(report["comparisons"][0]["levels"]))][
            "resamples"
        ]
    )


def _holm(report: dict[str, Any]) -> bool:
    return any(
        "mcnemarPHolm" in level for c in report["comparisons"] for level in c["levels"].values()
    )


def _interval(level: dict[str, Any]) -> str:
    interval = level["interval"]
    if interval == INSUFFICIENT:
        return INSUFFICIENT
    return f"[{format_difference(interval[0])}, {format_difference(interval[1])}]"


def _mde(level: dict[str, Any]) -> str:
    mde = level["minimumDetectableEffect"]
    return "—" if mde is None else f"{mde:.3f}"


def _p(level: dict[str, Any]) -> str:
    p = level.get("mcnemarPHolm", level["mcnemarP"])
    return p if p == INSUFFICIENT else f"{p:.4g}"


def _retrieval_text(row: dict[str, Any]) -> str:
    backend = row["backend"]
    if row.get("requestedBackend", backend) != backend:
        backend = f"{backend} (auto)"
    text = f"`{row['space']}` {backend} for {row['purpose']}"
    if row["backend"] == "pynndescent":
        recall = row.get("recallAtK")
        text += (
            f": recall@{row.get('recallK')} {recall if recall is not None else 'n/a'} against "
            f"exact search on {row.get('recallProbeQueries', 0)} probe queries, "
            f"{row.get('fallbackQueries', 0)} queries fell back to exact search"
        )
    return text


def _retrieval_lines(rows: list[dict[str, Any]]) -> list[str]:
    """How each space was searched; said only when something other than the default ran."""
    if not rows or all(r["retrieval"] == "tfidf:exact" for r in rows):
        return []
    return ["Retrieval: " + "; ".join(_retrieval_text(r) for r in rows) + ".", ""]


def paired_table(comparisons: list[dict[str, Any]], titles: dict[str, str]) -> list[str]:
    """The paired comparisons as a markdown table: per comparison (``baseline``,
    ``candidate``, ``levels`` as :func:`paired_levels_to_json` writes them), one row per level
    of ``titles`` (depth -> title)."""
    lines = [
        "| baseline | candidate | level | pairs | newly right | newly wrong | diff | 95% "
        "interval | verdict | MDE | p |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for comparison in comparisons:
        for depth, title in titles.items():
            level = comparison["levels"][depth]
            lines.append(
                f"| {_cell(comparison['baseline'])} | {_cell(comparison['candidate'])} | "
                f"{title} | {level['pairs']} | {level['newlyRight']} | "
                f"{level['newlyWrong']} | {format_difference(level['difference'])} | "
                f"{_interval(level)} | {level['verdict']} | {_mde(level)} | {_p(level)} |"
            )
    return lines


def report_markdown(report: dict[str, Any]) -> str:
    """Markdown summary of a report's JSON: warnings first, then sample and versions, each
    variant's memo version, memo rules fired, evidence and config, accuracy at every level
    (target levels marked), routing, paired comparisons at every level and the note."""
    sample = report["sample"]
    grouping = sample["grouping"]
    grouping_text = ", ".join(
        f"{k}={v}" for k, v in grouping.items() if k not in ("representation",)
    )
    lines = [f"## Holdout evaluation `{report['evalId']}` (case `{report['caseId']}`)", ""]
    if report["warnings"]:
        lines += ["**Warnings**", ""]
        lines += [f"- **{w['code']}**: {w['message']}" for w in report["warnings"]]
        lines += [""]
    versions = report["versions"]
    lines += [
        f"Sample: {sample['size']} of {sample['requestedSize']} requested, seed {sample['seed']}, "
        f"hash `{sample['sampleHash']}`; grouping {grouping_text}; "
        f"{sample['excludedRecords']} leave-out entries.",
        "",
        f"Versions: records `{versions['records']}`, tree `{versions['tree']}`, "
        f"memo `{versions['memo']}`"
        + (f", embeddings `{versions['embeddings']}`" if "embeddings" in versions else "")
        + (f"; comparable as `{report['comparableAs']}`." if "comparableAs" in report else "."),
        "",
        *_retrieval_lines(report.get("retrievals", [])),
        "Variants (the first is the baseline):",
        "",
        _row(["variant", "memo version", "memo rules fired (rows)", "evidence", "config"]),
        "|---|---|---|---|---|",
    ]
    for variant in report["variants"]:
        config = json.dumps(variant["config"], separators=(", ", ": "), sort_keys=True)
        lines.append(
            _row(
                [
                    _cell(variant["name"]),
                    f"`{_cell(variant['memoVersion'])}`",
                    _cell(_memo_rules_text(variant.get("memoRules", {}))),
                    _supply_text(variant["leaveOut"]),
                    f"`{_cell(config)}`",
                ]
            )
        )
    titles = _level_titles(report)
    names = [_cell(variant["name"]) for variant in report["variants"]]
    scores = [variant["score"] for variant in report["variants"]]
    lines += [
        "",
        "Accuracy per level (target levels in bold):",
        "",
        _row(["level", *names]),
        "|---|" + "---|" * len(names),
    ]
    for depth, title in titles.items():
        lines.append(_row([title, *(_fmt(score["levels"][depth]["accuracy"]) for score in scores)]))
    lines.append(_row(["decline rate", *(_fmt(score["declineRate"]) for score in scores)]))
    lines.append(
        _row(
            [
                "routed auto / review / declined",
                *(
                    " / ".join(
                        str(score["routing"][route]["coverage"]["k"])
                        for route in ("auto", "review", "declined")
                    )
                    for score in scores
                ),
            ]
        )
    )
    lines.append(
        _row(["failed rows", *(str(variant["failedRows"]) for variant in report["variants"])])
    )
    lines += _plugin_rows(report["variants"])
    lines += _model_usage_rows(report["variants"])
    if report["comparisons"]:
        lines += [
            "",
            "### Paired comparisons",
            "",
            "Paired comparisons (candidate vs baseline; target levels in bold). The interval "
            "is a 95% cluster bootstrap over the groups held out together "
            f"({_resamples(report)} resamples, seeded); `better`/`worse` only when it excludes "
            "zero and the exact test agrees at 0.05; MDE: the difference this n detects "
            "with 80% power (a diagnostic, not the verdict); p: McNemar exact"
            + (", Holm-adjusted across the candidates." if _holm(report) else "."),
            "",
            *paired_table(report["comparisons"], titles),
        ]
    if "trials" in report:
        lines += ["", *trials_markdown(report["trials"], titles)]
    if "aaCheck" in report:
        lines += ["", *aa_markdown(report["aaCheck"], titles)]
    if "leakageGap" in report:
        lines += ["", *leakage_markdown(report["leakageGap"], titles)]
    if "diagnostics" in report:
        lines += ["", *diagnostics_markdown(report["diagnostics"])]
    lines += ["", f"_{report['note']}_"]
    return "\n".join(lines)


def _figure(figure: dict[str, Any]) -> str:
    if figure["value"] == INSUFFICIENT:
        return INSUFFICIENT
    low, high = figure["interval"]
    return f"{figure['value']:.3f} [{low:.3f}, {high:.3f}]"


def trials_markdown(trials: dict[str, Any], titles: dict[str, str]) -> list[str]:
    """The repeated trials per variant and target level (the report's ``trials`` block)."""
    resamples = next(iter(trials.values()))["resamples"] if trials else None
    lines = [
        "### Repeated trials",
        "",
        "Variants whose records were each classified N times (distinct cache keys; trial 1 "
        "is the prediction every other figure of this report uses). Accuracy: the mean over "
        "records of the share of their trials that are right; agreement: the mean over "
        "records of the share of their trials giving the record's most common answer; "
        "unanimous: records whose trials all agree; flip rate: pairs of trials of one record "
        "that disagree, pooled over records (the A/A flip rate of the model's own "
        f"non-determinism). A failed trial counts as wrong and as the answer `{FAILED}`, a "
        f"code that does not reach the level as the answer `{DECLINED}`. Intervals: 95% "
        "cluster bootstrap over the sample's clusters, a record's trials staying together "
        f"({resamples} resamples, seeded).",
        "",
        "| variant | level | N | records | clusters | trials (failed) | accuracy, all trials | "
        "agreement | unanimous | flip rate | pairs disagreeing |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, variant in trials.items():
        for depth, level in variant["levels"].items():
            unanimous = level["unanimous"]
            flip = level["flipRate"]
            lines.append(
                f"| {_cell(name)} | {titles.get(depth, depth)} | {variant['trials']} | "
                f"{level['records']} | {level['clusters']} | {level['trials']} "
                f"({level['failedTrials']}) | {_figure(level['accuracy'])} | "
                f"{_figure(level['agreement'])} | {_figure(unanimous)} "
                f"{unanimous['k']}/{unanimous['n']} | {_figure(flip)} | "
                f"{flip['disagreeingPairs']}/{flip['pairs']} |"
            )
    return lines


def _cost(cost: float | None, reason: str | None) -> str:
    return f"{cost:.6g}" if cost is not None else f"unknown ({reason})"


def _plugin_rows(variants: list[dict[str, Any]]) -> list[str]:
    """The plug-in each variant ran (name, then its distribution and version or its module
    file's hash), so the table says which code gave its figures; none when no variant ran
    one."""
    if not any(variant.get("plugin") for variant in variants):
        return []

    def identity(plugin: dict[str, str] | None) -> str:
        if not plugin:
            return "-"
        pinned = (
            f"{plugin['distribution']} {plugin['version']}"
            if "distribution" in plugin
            else f"sha256 {plugin.get('sha256', '?')}"
        )
        return _cell(f"{plugin['name']} ({pinned})")

    return [_row(["plug-in", *(identity(variant.get("plugin")) for variant in variants)])]


def _model_usage_rows(variants: list[dict[str, Any]]) -> list[str]:
    """Rows of the variants that call a model (``usage.chat``): calls made, from the cache and
    failed (no answer after the retries: fewer than the failed rows, which count unusable
    answers too); the failed rows by cause; tokens in and out as the endpoint reported them;
    cost beside the estimate made before the run. None when no variant calls a model."""
    chats = [
        {**variant["usage"]["chat"], "tokens": variant["usage"]}
        if variant["usage"].get("chat")
        else None
        for variant in variants
    ]
    if not any(chats):
        return []

    def estimate(chat: dict[str, Any]) -> str:
        made = chat.get("estimate")
        if not made:
            return "none stored"
        return f"{made['tokens']:,} tokens, cost {_cost(made['cost'], made['costReason'])}"

    def calls(chat: dict[str, Any]) -> str:
        return f"{chat['callsMade']} / {chat['callsFromCache']} / {chat['callsFailed']}"

    def causes(chat: dict[str, Any]) -> str:
        # A report stored before the causes were grouped lists each whole reason instead.
        shown = "; ".join(
            f"{c.get('cause', c.get('reason'))}: {c['rows']}" for c in chat["failureReasons"]
        )
        return _cell(shown) if shown else "none"

    def tokens(chat: dict[str, Any]) -> str:
        usage = chat["tokens"]
        return f"{usage['inputTokens']:,} / {usage['outputTokens']:,}"

    def costs(chat: dict[str, Any]) -> str:
        spent = chat["spent"]
        return (
            f"{_cost(chat['cost'], chat['costReason'])} / "
            f"{_cost(spent['cost'], spent['costReason'])}"
        )

    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("model calls made / from cache / failed (no answer after retries)", calls),
        ("model requests sent (retries)", lambda c: f"{c['requestsSent']} ({c['retries']})"),
        ("failed rows by cause (a bad answer too)", causes),
        ("tokens in / out (as reported)", tokens),
        ("cost of the answers / spent now", costs),
        ("estimate before the run", estimate),
    ]
    return [_row([name, *(show(chat) if chat else "-" for chat in chats)]) for name, show in rows]


def aa_markdown(aa: dict[str, Any], titles: dict[str, str]) -> list[str]:
    """The A/A noise floor per target level."""
    lines = [
        "### A/A noise floor",
        "",
        f"{aa['summary']}. The A/A arm `aa-twin` is the baseline classified a second time; "
        "flip rate: records whose outcome changed between the two; false-positive rate: "
        "seeded random halves (by cluster), baseline on one half against the twin on the "
        "other, read as a difference (interval excluding zero).",
        "",
        "| level | records | flips | flip rate | splits | false positives | rate | too few |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for depth, level in aa["levels"].items():
        rate = level["flipRate"]
        lines.append(
            f"| {titles.get(depth, depth)} | {level['n']} | {level['flips']} | "
            f"{INSUFFICIENT if rate is None else f'{rate:.3f}'} | {level['splits']} | "
            f"{level['falsePositives']} | {level['falsePositiveRate']:.2f} | "
            f"{level['insufficientSplits']} |"
        )
    return lines


def leakage_markdown(gap: dict[str, Any], titles: dict[str, str]) -> list[str]:
    """How much grouping moved the baseline at each level (ungrouped minus grouped)."""
    lines = [
        "### Leakage gap",
        "",
        f"Leakage gap of `{_cell(gap['baseline'])}`: the same records scored ungrouped (only "
        "each record itself held out) minus grouped; a positive gap is what an ungrouped "
        "holdout would have overstated.",
        "",
        "| level | pairs | ungrouped right only | grouped right only | gap | 95% interval | "
        "reading |",
        "|---|---|---|---|---|---|---|",
    ]
    for depth, title in titles.items():
        level = gap["levels"][depth]
        reading = {"better": "grouping lowered it", "worse": "grouping raised it"}.get(
            level["verdict"], level["verdict"]
        )
        lines.append(
            f"| {title} | {level['pairs']} | {level['newlyRight']} | {level['newlyWrong']} | "
            f"{format_difference(level['difference'])} | {_interval(level)} | {reading} |"
        )
    return lines


def _share(proportion: dict[str, Any]) -> str:
    if proportion["value"] == INSUFFICIENT:
        return f"{proportion['k']}/{proportion['n']}"
    return f"{proportion['value']:.3f} ({proportion['k']}/{proportion['n']})"


def diagnostics_markdown(diagnostics: dict[str, Any]) -> list[str]:
    """Error severity, risk-coverage at the routing threshold and the label-review list."""
    depth = diagnostics["targetDepth"]
    lines = [
        "### Diagnostics",
        "",
        f"Diagnostics at target depth {depth}: where wrong codes still agree with the label "
        "(deepest shared level), coverage and risk if `autoAbove` were each threshold, and "
        "records every variant gets wrong with confidence >= 0.8 (likely label errors: a "
        "holdout score measures agreement with past filing).",
        "",
        "| variant | wrong or declined | declined | errors agreeing down to | mean tree distance | "
        "coverage / risk at autoAbove |",
        "|---|---|---|---|---|---|",
    ]
    for name, variant in diagnostics["variants"].items():
        severity = variant["errorSeverity"]
        agree = ", ".join(
            f"{a['name']} {a['count']}" for a in severity["byAgreement"] if a["count"]
        )
        mean = severity["distance"]["mean"]
        point = next(p for p in variant["riskCoverage"]["points"] if p["autoAbove"])
        lines.append(
            f"| {_cell(name)} | {severity['errors'] + severity['declined']} | "
            f"{severity['declined']} | {agree or '—'} | "
            f"{INSUFFICIENT if mean in (None, INSUFFICIENT) else f'{mean:.2f}'} | "
            f"{_share(point['coverage'])} / {_share(point['risk'])} |"
        )
    review = diagnostics["labelReview"]
    lines += [
        "",
        f"Label review: {review['listed']} of {review['considered']} records wrong under every "
        f"variant with confidence >= {review['minConfidence']} ({review['agreeing']} where the "
        "variants agree on another code)"
        + (
            ": " + ", ".join(_cell(r["recordKey"]) for r in review["records"][:10])
            if review["records"]
            else "."
        ),
    ]
    return lines
