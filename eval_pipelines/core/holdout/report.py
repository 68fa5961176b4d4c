"""The holdout report as typed results: each variant's scores, the paired comparisons, the
optional blocks, and the warnings derived from them. Its JSON (000's keys) is
:mod:`~eval_pipelines.core.holdout.report_json`, its markdown
:mod:`~eval_pipelines.core.holdout.report_markdown`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eval_pipelines.core.holdout.classify_config import ClassifyConfig
from eval_pipelines.core.holdout.compare import PairedLevel
from eval_pipelines.core.holdout.cost import CostComparison, VariantCost
from eval_pipelines.core.holdout.noise_floor import approximate_retrieval_warnings
from eval_pipelines.core.holdout.report_markdown import level_title
from eval_pipelines.core.holdout.scoring import CandidateSupply, LevelScore, VariantScore
from eval_pipelines.core.holdout.spec import HoldoutSpec
from eval_pipelines.core.holdout.trials import (
    TrialsSummary,
    trials_warnings,
)
from eval_pipelines.core.holdout.warnings import ReportWarning
from eval_pipelines.core.stats import INSUFFICIENT
from eval_pipelines.core.tree import Level


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
    # Cost per record (None: the report leaves the cost out).
    cost: VariantCost | None = None


@dataclass(frozen=True)
class Comparison:
    """A candidate variant paired with the baseline, level by level."""

    baseline: str
    candidate: str
    levels: tuple[PairedLevel, ...]
    # The paired difference in cost per record, beside the accuracy's (None: left out).
    cost: CostComparison | None = None


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
                        f"target level {level_title(depth, level.name)}, though codes reach "
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
