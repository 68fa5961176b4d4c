"""Comparing two completed evaluations, and the memo A/B shortcut."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipelines.api._holdout_state import HoldoutStatus
from eval_pipelines.api._shared import resolve_warehouse
from eval_pipelines.api.holdout import LaunchedEval, start_holdout_eval
from eval_pipelines.core.errors import ConflictError, InputError, NotFoundError
from eval_pipelines.core.holdout.spec import HoldoutOptions
from eval_pipelines.core.inputs import is_name
from eval_pipelines.core.results import JsonResult
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import holdout_evaluations as holdout_evaluations_store
from eval_pipelines.storage import memo as memo_store
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, connect


@dataclass(frozen=True)
class ChangedBesidesVariant(JsonResult):
    """Something that differs between the two runs besides the variant (``what``: ``memo
    version``, ``config`` or ``plug-in``: the identity of the plug-in classifier both
    variants name), with its baseline and candidate values."""

    what: str
    baseline: object
    candidate: object


@dataclass(frozen=True)
class HoldoutComparison(JsonResult):
    """One variant of each of two completed evaluations compared, paired per record
    (:func:`compare_holdout_evals`). ``levels`` is the paired-levels document of the 000
    report (per level: counts, difference and interval, verdict, MDE, McNemar p)."""

    changed_besides_variant: tuple[ChangedBesidesVariant, ...]
    case_id: str
    baseline_eval_id: str
    candidate_eval_id: str
    baseline_variant: str
    candidate_variant: str
    sample_hash: str
    grouping: dict[str, Any]
    target_depth: tuple[int, ...]
    levels: dict[str, Any]
    # The paired difference in cost per record (the report's comparison ``cost``); None when
    # neither variant calls a model.
    cost: dict[str, Any] | None = None


def compare_holdout_evals(
    case_id: str,
    *,
    baseline_eval_id: str,
    candidate_eval_id: str,
    baseline_variant: str,
    candidate_variant: str,
    allow_memo_change: bool = False,
    allow_config_change: bool = False,
    warehouse: Path | str | None = None,
) -> HoldoutComparison:
    """Compare one variant of each of two completed evaluations, without classifying again.

    Refused (:class:`ConflictError`, nothing written) unless both drew the same sample from the
    same records version with the same grouping and the same target depth (000 does not check
    the target depth yet; this does). Also refused when the two evaluations ran with different
    active memos (an approved entry changes every later evaluation, baseline included), or
    when the same variant ran with a different memo or config, or when the plug-in classifier
    both variants name is different code (its pinned identity differs), unless
    ``allow_memo_change`` / ``allow_config_change`` (which also allows the plug-in change);
    the result then lists what changed besides the variant under
    ``changed_besides_variant``.
    """
    from eval_pipelines.core.holdout.compare import compare_outcomes
    from eval_pipelines.core.holdout.cost import calls_a_model, compare_costs, variant_cost
    from eval_pipelines.core.holdout.cost_report import cost_comparison_to_json
    from eval_pipelines.core.holdout.report_json import paired_levels_to_json
    from eval_pipelines.stages.holdout_report import evaluation_clusters, variant_outcomes

    loaded = {}
    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        for role, eval_id, variant, flag in (
            ("baseline", baseline_eval_id, baseline_variant, "baseline_variant"),
            ("candidate", candidate_eval_id, candidate_variant, "candidate_variant"),
        ):
            row = holdout_evaluations_store.evaluation_row(conn, eval_id)
            if row.case_id != case_id:
                raise NotFoundError(f"evalId={eval_id!r}: belongs to case {row.case_id!r}")
            stored = holdout_evaluations_store.load_report(conn, eval_id)
            if stored is None:
                raise ConflictError(f"evalId={eval_id!r}: not complete yet; wait for its report")
            spec, tree, outcomes = variant_outcomes(conn, eval_id)
            if role == "baseline":
                clusters = evaluation_clusters(conn, eval_id)
            if variant not in outcomes:
                raise InputError(flag, variant, f"is not a variant of {eval_id}: {list(outcomes)}")
            loaded[role] = (spec, stored.report, outcomes[variant], tree)
    base_spec, base_report, base_rows, tree = loaded["baseline"]
    cand_spec, cand_report, cand_rows, _ = loaded["candidate"]
    checks = [
        ("sample hash", base_report["sample"]["sampleHash"], cand_report["sample"]["sampleHash"]),
        ("records version", base_spec.records_version, cand_spec.records_version),
        ("tree version", base_spec.tree_version, cand_spec.tree_version),
        ("grouping", base_spec.grouping.to_json(), cand_spec.grouping.to_json()),
        ("target depth", list(base_spec.target_depth), list(cand_spec.target_depth)),
    ]
    for what, base_value, cand_value in checks:
        if base_value != cand_value:
            raise ConflictError(
                f"cannot compare {baseline_eval_id} with {candidate_eval_id}: their {what} "
                f"differs ({base_value} vs {cand_value}); compare evaluations that share the "
                "sample, grouping and target depth"
            )
    changed = _changed_besides_variant(
        base_spec.memo_version,
        cand_spec.memo_version,
        _variant_of(base_report, baseline_variant),
        _variant_of(cand_report, candidate_variant),
        same_variant=baseline_variant == candidate_variant,
    )
    allowed = {
        "memo version": allow_memo_change,
        "config": allow_config_change,
        "plug-in": allow_config_change,
    }
    flags = {
        "memo version": "`allow_memo_change`",
        "config": "`allow_config_change`",
        "plug-in": "`allow_config_change`",
    }
    for what, base_value, cand_value in changed:
        if not allowed[what]:
            raise ConflictError(
                f"cannot compare {baseline_eval_id}/{baseline_variant} with "
                f"{candidate_eval_id}/{candidate_variant}: their {what} differs ({base_value} vs "
                f"{cand_value}), so the difference would not be the variant's alone; pass "
                f"{flags[what]} to compare anyway"
            )
    costs = [
        variant_cost(
            rows,
            next(v for v in spec.variants if v.name == name).config,
            _variant_of(report, name)["usage"],
            clusters=clusters,
            seed=base_spec.seed,
        )
        for spec, report, rows, name in (
            (base_spec, base_report, base_rows, baseline_variant),
            (cand_spec, cand_report, cand_rows, candidate_variant),
        )
    ]
    return HoldoutComparison(
        cost=cost_comparison_to_json(compare_costs(*costs, clusters=clusters, seed=base_spec.seed))
        if calls_a_model(*costs)
        else None,
        changed_besides_variant=tuple(
            ChangedBesidesVariant(what, base_value, cand_value)
            for what, base_value, cand_value in changed
        ),
        case_id=case_id,
        baseline_eval_id=baseline_eval_id,
        candidate_eval_id=candidate_eval_id,
        baseline_variant=baseline_variant,
        candidate_variant=candidate_variant,
        sample_hash=base_report["sample"]["sampleHash"],
        grouping=base_spec.grouping.to_json(),
        target_depth=tuple(base_spec.target_depth),
        levels=paired_levels_to_json(
            compare_outcomes(base_rows, cand_rows, tree, clusters=clusters, seed=base_spec.seed)
        ),
    )


def _variant_of(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in report["variants"] if v["name"] == name)


def _changed_besides_variant(
    base_active_memo: str,
    cand_active_memo: str,
    baseline: dict[str, Any],
    candidate: dict[str, Any],
    *,
    same_variant: bool,
) -> list[tuple[str, Any, Any]]:
    """What differs between the two runs besides the variant.

    The memo version, always, but the evaluations' *active* memo, not each variant's: a
    variant's memo version includes its own ``memo_include``, which is the variant (000's memo
    A/B, ``baseline`` against ``with-rule`` of one evaluation, differs only there). When the
    same variant is compared across evaluations, also its own memo version (its included
    entries) and its config (between two different variants, those are what is compared).
    """
    changed: list[tuple[str, Any, Any]] = []
    if base_active_memo != cand_active_memo:
        changed.append(("memo version", base_active_memo, cand_active_memo))
    elif same_variant and baseline["memoVersion"] != candidate["memoVersion"]:
        changed.append(("memo version", baseline["memoVersion"], candidate["memoVersion"]))
    if same_variant and baseline["config"] != candidate["config"]:
        keys = sorted(
            k
            for k in {*baseline["config"], *candidate["config"]}
            if baseline["config"].get(k) != candidate["config"].get(k)
        )
        changed.append(
            (
                "config",
                {k: baseline["config"].get(k) for k in keys},
                {k: candidate["config"].get(k) for k in keys},
            )
        )
    # The same classifier name on both sides but different code under it (another version
    # of the distribution, an edited module): a change besides the variant, like a config.
    if baseline["config"].get("classifier") == candidate["config"].get("classifier") and (
        baseline.get("plugin") != candidate.get("plugin")
    ):
        changed.append(("plug-in", baseline.get("plugin"), candidate.get("plugin")))
    return changed


def evaluate_memo_entry(
    case_id: str,
    entry_id: str,
    options: HoldoutOptions | None = None,
    *,
    warehouse: Path | str | None = None,
    wait: bool = False,
    register_only: bool = False,
    timeout: float | None = None,
    progress: Callable[[HoldoutStatus], None] | None = None,
) -> LaunchedEval:
    """Memo A/B shortcut: run A uses the active memo, run B adds the proposed entry.

    The entry stays proposed; the evaluation changes nothing. ``options``, ``wait``,
    ``register_only``, ``timeout`` and ``progress`` as for
    :func:`~eval_pipelines.api.holdout.start_holdout_eval`, and so is the
    :class:`~eval_pipelines.api.holdout.LaunchedEval` returned.
    """
    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        cases_store.load_case(conn, case_id)
        entries = {i: status for i, (status, _) in memo_store.entry_contents(conn, case_id).items()}
    if entry_id not in entries:
        raise InputError("entry_id", entry_id, f"is not a memo entry of case {case_id}")
    if entries[entry_id] != "proposed":
        raise InputError(
            "entry_id", entry_id, "is already active: both runs would use it; A/B a proposed entry"
        )
    # An entry id may take all 64 characters a name has; "with-" would then not fit.
    with_entry = f"with-{entry_id}" if is_name(f"with-{entry_id}") else "with-entry"
    variants: list[Mapping[str, object]] = [
        {"name": "active-memo"},
        {"name": with_entry, "memo_include": [entry_id]},
    ]
    return start_holdout_eval(
        case_id,
        variants,
        options,
        warehouse=warehouse,
        wait=wait,
        register_only=register_only,
        timeout=timeout,
        progress=progress,
    )
