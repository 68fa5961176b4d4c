"""The A/A noise floor of a holdout evaluation and its verdict (000's ``--aa``), and the
warnings an approximate retrieval earns; pure functions the report is assembled from."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from eval_pipelines.core.holdout.spec import HoldoutSpec
from eval_pipelines.core.holdout.warnings import ReportWarning
from eval_pipelines.core.stats.aa import (
    CALIBRATED_FAILURE_RATES,
    MEASURED_FAILURE_RATES,
    aa_check,
)


def aa_noise_floor(
    spec: HoldoutSpec, outcomes: dict[str, pl.DataFrame], clusters: dict[str, int]
) -> dict[str, Any]:
    """The A/A noise floor at each target level: the baseline against its twin on 20 seeded
    random halves (false-positive rate), and how many records changed outcome between the two
    classifications (flip rate)."""
    twin = spec.aa_twin
    assert twin is not None
    baseline = outcomes[spec.variants[0].name].sort("record_key")
    again = outcomes[twin.name].sort("record_key")
    levels = {}
    for depth in spec.target_depth:
        column = f"right_{depth}"
        scored = baseline.get_column(column).is_not_null()
        keys = baseline.filter(scored).get_column("record_key").to_list()
        check = aa_check(
            baseline.filter(scored).get_column(column).to_numpy(),
            again.filter(scored).get_column(column).to_numpy(),
            [clusters[k] for k in keys],
            rng=np.random.default_rng([spec.seed, depth]),
        )
        levels[str(depth)] = check.to_json()
    unread = [d for d, level in levels.items() if level["insufficientSplits"] == level["splits"]]
    if unread:
        return {
            "levels": levels,
            "passed": False,
            "summary": "A/A check could not be read: every split of "
            + ", ".join(f"L{d}" for d in unread)
            + " had a half below the minimum of 20 records (take a larger sample)",
        }
    failed = [d for d, level in levels.items() if not level["passed"]]
    by_design, upper = CALIBRATED_FAILURE_RATES
    lowest, highest = MEASURED_FAILURE_RATES
    summary = (
        "A/A check failed: the baseline against itself read a difference in "
        + ", ".join(
            f"{levels[d]['falsePositives']} of {levels[d]['splits']} splits at L{d}" for d in failed
        )
        + f" (more than 10%). A calibrated instrument fails this way in {by_design:.1%} of "
        f"checks by design and in {lowest:.1%} to {highest:.1%} measured on clustered and "
        f"unclustered records (up to {upper:.0%} within their 95% intervals), so this is a "
        "prompt to look, not proof: read the flip rate (run-to-run noise of the classifier) "
        "and the grouping (clusters that should be grouped), and rerun with another seed"
        if failed
        else "A/A check passed: at most 10% of 20 seeded half splits read a difference at every "
        "target level"
    )
    return {"levels": levels, "passed": not failed, "summary": summary}


# Below this recall@k against exact search, the report warns that the approximate index lost
# evidence the exact search would have found.
RECALL_WARNING_BELOW = 0.95


def approximate_retrieval_warnings(retrievals: list[dict[str, Any]]) -> list[ReportWarning]:
    """Warnings for retrievals by the approximate index: recall below 0.95 against exact
    search, and near-duplicate groups that an approximate search may have left incomplete."""
    warnings = []
    for row in retrievals:
        if row["backend"] != "pynndescent":
            continue
        recall = row.get("recallAtK")
        if recall is not None and recall < RECALL_WARNING_BELOW:
            warnings.append(
                ReportWarning(
                    "approximate_recall_low",
                    f"{row['retrieval']} found {recall:.3f} of the exact top-"
                    f"{row['recallK']} on {row['recallProbeQueries']} probe queries (below "
                    f"{RECALL_WARNING_BELOW}): its variants saw less evidence than exact search",
                )
            )
        if "grouping" in row["purpose"]:
            warnings.append(
                ReportWarning(
                    "approximate_grouping",
                    "near-duplicates were found with the approximate index: a group "
                    "can miss members the exact search would hold out; use backend exact for "
                    "grouping when the leave-out must be complete",
                )
            )
    return warnings
