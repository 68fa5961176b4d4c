"""The power planner: how many records a paired comparison needs (004's rule that
the minimum detectable effect is a power diagnostic, never a verdict)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipelines.api._shared import resolve_warehouse
from eval_pipelines.core.errors import ConflictError, InputError
from eval_pipelines.core.inputs import is_finite_number
from eval_pipelines.core.results import JsonResult
from eval_pipelines.core.stats.power import minimum_detectable_effect, paired_sample_size
from eval_pipelines.storage import holdout_evaluations as holdout_evaluations_store
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, connect

__all__ = ["ComparisonPlan", "EvalDiscordance", "StatedDiscordance", "plan_comparison"]

ALPHA = 0.05
POWER = 0.8
METHOD = (
    "McNemar, normal approximation (Connor 1987); the exact test reported "
    "beside each comparison reaches about 0.77 power at this n"
)


@dataclass(frozen=True)
class StatedDiscordance(JsonResult):
    """The discordance was stated by the caller."""

    stated: bool = True


@dataclass(frozen=True)
class EvalDiscordance(JsonResult):
    """The discordance of an evaluation's first comparison (``candidate vs baseline``) at
    ``level``, over its ``pairs`` paired records."""

    eval_id: str
    comparison: str
    level: int
    pairs: int


@dataclass(frozen=True)
class ComparisonPlan(JsonResult):
    """Records a paired comparison needs to detect ``difference`` with ``power`` at ``alpha``
    (two-sided) when a share ``discordance`` of records is discordant.

    ``minimum_detectable_effect_at_eval_n`` is the MDE at the evaluation's own n when the
    discordance comes from one (None when it is undefined: too few discordant records); the
    document leaves the key out when the discordance was stated.
    """

    case_id: str
    difference: float
    discordance: float
    alpha: float
    power: float
    records_needed: int
    source: StatedDiscordance | EvalDiscordance
    method: str
    minimum_detectable_effect_at_eval_n: float | None = None

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        if not isinstance(self.source, EvalDiscordance):
            del document["minimumDetectableEffectAtEvalN"]
        return document


def _discordance_from_eval(
    case_id: str, eval_id: str, level: int | None, warehouse: Path | str | None
) -> tuple[float, int, int, str]:
    """``(discordance, pairs, depth, comparison)`` of the evaluation's first comparison at
    ``level`` (default its shallowest target level)."""
    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        row = holdout_evaluations_store.evaluation_row(conn, eval_id)
        if row.case_id != case_id:
            raise InputError("from_eval", eval_id, f"belongs to case {row.case_id!r}")
        stored = holdout_evaluations_store.load_report(conn, eval_id)
    if stored is None:
        raise ConflictError(f"evalId={eval_id!r}: not complete yet; wait for its report")
    report = stored.report
    if not report["comparisons"]:
        raise InputError(
            "from_eval", eval_id, "has one variant: no discordance to plan from; state one"
        )
    depth = level if level is not None else min(report["targetDepth"])
    comparison = report["comparisons"][0]
    levels = comparison["levels"]
    if str(depth) not in levels:
        raise InputError("level", depth, f"is not a level of {eval_id} ({', '.join(levels)})")
    paired = levels[str(depth)]
    if paired["pairs"] == 0:
        raise InputError("from_eval", eval_id, f"compared no pairs at level {depth}")
    discordant = paired["newlyRight"] + paired["newlyWrong"]
    if discordant == 0:
        raise InputError(
            "level",
            depth,
            f"{eval_id} has no discordant pair at this level: no discordance to plan from",
        )
    name = f"{comparison['candidate']} vs {comparison['baseline']}"
    return discordant / paired["pairs"], paired["pairs"], depth, name


def plan_comparison(
    case_id: str,
    *,
    difference: float,
    discordance: float | None = None,
    from_eval: str | None = None,
    level: int | None = None,
    warehouse: Path | str | None = None,
) -> ComparisonPlan:
    """Records a paired comparison needs to detect ``difference`` with 80% power at
    alpha 0.05 (two-sided), and the minimum detectable effect at the evaluation's own n.

    The expected share of discordant records comes from ``from_eval`` (its first comparison
    at ``level``) or is stated as ``discordance``; the formula is the one the reports' MDE uses.
    """
    if (discordance is None) == (from_eval is None):
        raise InputError(
            "discordance", discordance, "give either `discordance` or `from_eval`, not both"
        )
    if not is_finite_number(difference):
        raise InputError("difference", difference, "must be a finite number, e.g. 0.02")
    source: StatedDiscordance | EvalDiscordance
    if from_eval is not None:
        discordance, pairs, depth, name = _discordance_from_eval(
            case_id, from_eval, level, warehouse
        )
        source = EvalDiscordance(eval_id=from_eval, comparison=name, level=depth, pairs=pairs)
    else:
        assert discordance is not None
        source = StatedDiscordance()
    try:
        needed = paired_sample_size(difference, discordance, alpha=ALPHA, power=POWER)
    except ValueError as error:
        # The statistics name the value as "name=value: rule"; the error says it once.
        named, _, rule = str(error).partition(": ")
        if named.startswith("discordance"):
            raise InputError("discordance", discordance, rule) from None
        raise InputError("difference", difference, rule or named) from None
    mde_at_eval_n = None
    if isinstance(source, EvalDiscordance):
        mde = minimum_detectable_effect(source.pairs, discordance, alpha=ALPHA, power=POWER)
        mde_at_eval_n = None if math.isinf(mde) else round(mde, 6)
    return ComparisonPlan(
        case_id=case_id,
        difference=difference,
        discordance=round(discordance, 6),
        alpha=ALPHA,
        power=POWER,
        records_needed=needed,
        source=source,
        method=METHOD,
        minimum_detectable_effect_at_eval_n=mde_at_eval_n,
    )
