"""The holdout report's markdown summary, for the Dagster UI and the CLI, rendered from its JSON
(:func:`~eval_pipelines.core.holdout.report_json.report_to_json`), so a stored report renders
as it did when it was made."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from eval_pipelines.core.holdout.cost_report import (
    cost_per_record_text,
    relative_cost_text,
    shows_cost_per_record,
)
from eval_pipelines.core.holdout.trials import DECLINED, FAILED
from eval_pipelines.core.stats import INSUFFICIENT


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


def level_title(depth: int | str, name: str) -> str:
    """``L<d> <name>``, the depth said once (a name made unique as ``subcategory L4`` reads
    ``L4 subcategory``)."""
    return f"L{depth} {name.removesuffix(f' L{depth}')}".strip()


def _level_titles(report: dict[str, Any]) -> dict[str, str]:
    """``L<d> <name>`` per level; target levels in bold and marked ``(target)``."""
    targets = {str(d) for d in report["targetDepth"]}
    titles = {}
    for level in report["levels"]:
        depth = str(level["depth"])
        title = level_title(depth, level["name"])
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
    ``candidate``, ``levels`` as
    :func:`~eval_pipelines.core.holdout.report_json.paired_levels_to_json` writes them), one
    row per level of ``titles`` (depth -> title)."""
    # The cost difference is one figure per pair (not per level): repeated on each level's
    # row, so every accuracy difference reads beside it.
    with_cost = any("cost" in comparison for comparison in comparisons)
    lines = [
        "| baseline | candidate | level | pairs | newly right | newly wrong | diff | 95% "
        "interval | verdict | MDE | p |"
        + (" cost per record, candidate vs baseline |" if with_cost else ""),
        "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if with_cost else ""),
    ]
    for comparison in comparisons:
        cost = f" {_cell(relative_cost_text(comparison.get('cost')))} |" if with_cost else ""
        for depth, title in titles.items():
            level = comparison["levels"][depth]
            lines.append(
                f"| {_cell(comparison['baseline'])} | {_cell(comparison['candidate'])} | "
                f"{title} | {level['pairs']} | {level['newlyRight']} | "
                f"{level['newlyWrong']} | {format_difference(level['difference'])} | "
                f"{_interval(level)} | {level['verdict']} | {_mde(level)} | {_p(level)} |{cost}"
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
    costs = [variant.get("cost") for variant in report["variants"]]
    if shows_cost_per_record(report):
        lines.append(_row(["cost per record (95% interval)", *map(cost_per_record_text, costs)]))
        basis = next(cost["basis"] for cost in costs if cost)
        lines += ["", f"_{basis[0].upper()}{basis[1:]}._"]
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
