"""The holdout report: JSON (keys as in 000) and a markdown summary for the Dagster UI."""

from __future__ import annotations

from typing import Any

from eval_pipelines.core.scoring import INSUFFICIENT
from eval_pipelines.core.specs import HoldoutSpec
from eval_pipelines.core.tree import CodeTree

AGREEMENT_NOTE = (
    "A holdout score measures agreement with past filing, not correctness against a new policy: "
    "historical labels can contain errors, and conventions can change."
)
NEAR_DUPLICATE_REPRESENTATION = (
    "cosine similarity on hashed TF-IDF vectors (word 1-2-grams and character 3-5-grams, "
    "sublinear tf, smooth idf, L2-normalised)"
)


def build_report(
    spec: HoldoutSpec,
    tree: CodeTree,
    *,
    sample_hash: str,
    sample_size: int,
    group_members_excluded: int,
    excluded_records: int,
    variants: list[dict[str, Any]],
    comparisons: list[dict[str, Any]],
) -> dict[str, Any]:
    """Assemble the report. ``variants`` items hold name, score, failedRows, usage, leaveOut."""
    grouping = dict(spec.grouping.to_json())
    grouping["groupMembersExcluded"] = group_members_excluded
    if spec.grouping.mode == "nearDuplicate":
        grouping["representation"] = NEAR_DUPLICATE_REPRESENTATION
    warnings = []
    if spec.grouping.mode == "none":
        warnings.append(
            {
                "code": "ungrouped",
                "message": "grouping mode none: near-duplicates of sampled records stayed in the "
                "evidence; read only the paired differences between variants, as a sign of "
                "direction, and do not quote absolute accuracy",
            }
        )
    if sample_size < spec.sample_size:
        warnings.append(
            {
                "code": "sample_smaller_than_requested",
                "message": f"the case has only {sample_size} records; sampled all of them",
            }
        )
    for variant in variants:
        if variant["failedRows"]:
            warnings.append(
                {
                    "code": "failed_rows",
                    "message": f"variant {variant['name']}: {variant['failedRows']} rows failed "
                    "to classify; they count as wrong and declined",
                }
            )
        if variant["leaveOut"]["rowsShort"]:
            warnings.append(
                {
                    "code": "candidates_short",
                    "message": f"variant {variant['name']}: {variant['leaveOut']['rowsShort']} "
                    "rows had fewer evidence records than requested (too few records share "
                    "any text feature with them)",
                }
            )
        for depth, accuracy in variant["score"]["targetDepth"].items():
            if accuracy["value"] == INSUFFICIENT:
                warnings.append(
                    {
                        "code": INSUFFICIENT,
                        "message": f"variant {variant['name']}: only {accuracy['n']} records "
                        f"reach target depth {depth}",
                    }
                )
    return {
        "evalId": spec.eval_id,
        "caseId": spec.case_id,
        "sample": {
            "size": sample_size,
            "requestedSize": spec.sample_size,
            "seed": spec.seed,
            "groupField": spec.grouping.field,
            "grouping": grouping,
            "sampleHash": sample_hash,
            "excludedRecords": excluded_records,
        },
        "versions": {
            "records": spec.records_version,
            "tree": spec.tree_version,
            "memo": spec.memo_version,
        },
        "levels": [{"depth": level.depth, "name": level.name} for level in tree.levels],
        "targetDepth": list(spec.target_depth),
        "variants": variants,
        "comparisons": comparisons,
        "warnings": warnings,
        "note": AGREEMENT_NOTE,
    }


def _fmt(proportion: dict[str, Any]) -> str:
    if proportion["value"] == INSUFFICIENT:
        return f"{INSUFFICIENT} (n={proportion['n']})"
    low, high = proportion["interval"]
    return f"{proportion['value']:.3f} [{low:.3f}, {high:.3f}] n={proportion['n']}"


def report_markdown(report: dict[str, Any]) -> str:
    """Markdown summary: sample, per-variant scores, paired comparisons, warnings, the note."""
    sample = report["sample"]
    grouping = sample["grouping"]
    grouping_text = ", ".join(
        f"{k}={v}" for k, v in grouping.items() if k not in ("representation",)
    )
    lines = [
        f"## Holdout evaluation `{report['evalId']}` (case `{report['caseId']}`)",
        "",
        f"Sample: {sample['size']} of {sample['requestedSize']} requested, seed {sample['seed']}, "
        f"hash `{sample['sampleHash']}`; grouping {grouping_text}; "
        f"{sample['excludedRecords']} leave-out entries.",
        "",
    ]
    depths = [str(d) for d in report["targetDepth"]]
    names = {str(level["depth"]): level["name"] for level in report["levels"]}
    titles = [f"L{d} {names[d].removesuffix(f' L{d}')}" for d in depths]
    header = ["variant", *titles, "decline rate", "failed"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for variant in report["variants"]:
        score = variant["score"]
        cells = [variant["name"], *(_fmt(score["targetDepth"][d]) for d in depths)]
        cells += [_fmt(score["declineRate"]), str(variant["failedRows"])]
        lines.append("| " + " | ".join(cells) + " |")
    if report["comparisons"]:
        lines += [
            "",
            "Paired comparisons (candidate vs baseline, McNemar exact):",
            "",
            "| baseline | candidate | level | pairs | newly right | newly wrong | diff | p |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for comparison in report["comparisons"]:
            for depth in depths:
                level = comparison["levels"][depth]
                diff = level["difference"]
                lines.append(
                    f"| {comparison['baseline']} | {comparison['candidate']} | L{depth} | "
                    f"{level['pairs']} | {level['newlyRight']} | {level['newlyWrong']} | "
                    f"{diff if diff is None else f'{diff:+.3f}'} | {level['mcnemarP']:.4g} |"
                )
    if report["warnings"]:
        lines += ["", "Warnings:", ""]
        lines += [f"- **{w['code']}**: {w['message']}" for w in report["warnings"]]
    lines += ["", f"_{report['note']}_"]
    return "\n".join(lines)
