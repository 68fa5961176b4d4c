"""Evaluation specs: what an evaluation will do, validated once at the boundary.

A spec is written to storage before its Dagster run starts and belongs to the evaluation's
partition, so UI re-materialisations and backfills read the same spec (never run config).
Its parts have their own modules: :mod:`~eval_pipelines.core.holdout.classify_config`,
:mod:`~eval_pipelines.core.holdout.grouping_settings`,
:mod:`~eval_pipelines.core.holdout.retrieval` and :mod:`~eval_pipelines.core.holdout.variants`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout.classify_config import (
    ClassifyConfig,
    config_from_json,
    parse_config,
)
from eval_pipelines.core.holdout.grouping_settings import (
    GROUPING_KEYS,
    Grouping,
    grouping_from_json,
    parse_grouping,
)
from eval_pipelines.core.holdout.memo import memo_version_of
from eval_pipelines.core.holdout.retrieval import Retrieval
from eval_pipelines.core.holdout.variants import (
    AA_TWIN,
    Variant,
    parse_variants,
    step_key_for,
    variant_from_json,
)
from eval_pipelines.core.inputs import check_name
from eval_pipelines.core.plugins import PluginError, identity_of, resolve_classifier

SAMPLE_SIZE_MIN = 10
SAMPLE_SIZE_MAX = 5_000
SAMPLE_SIZE_DEFAULT = 200
DEFAULT_SEED = 7


def validate_case_id(case_id: str) -> str:
    """Case ids become part of partition keys and file names: the one name pattern."""
    return check_name(case_id, "case", "a case id")


def validate_sample_size(sample_size: Any) -> int:
    if (
        isinstance(sample_size, bool)
        or not isinstance(sample_size, int)
        or not SAMPLE_SIZE_MIN <= sample_size <= SAMPLE_SIZE_MAX
    ):
        raise InputError(
            "sampleSize",
            sample_size,
            f"must be an integer from {SAMPLE_SIZE_MIN} to {SAMPLE_SIZE_MAX}",
        )
    return sample_size


def validate_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise InputError("seed", seed, "must be a non-negative integer below 2**63")
    return seed


@dataclass(frozen=True)
class HoldoutSpec:
    """Everything an evaluation needs, resolved and validated; stored before the run starts."""

    eval_id: str
    case_id: str
    seed: int
    sample_size: int
    grouping: Grouping
    config: ClassifyConfig
    target_depth: tuple[int, ...]
    variants: tuple[Variant, ...]
    records_version: str
    tree_version: str
    memo_version: str
    active_memo: tuple[str, ...] | None = None
    memo_entries: dict[str, dict[str, Any]] | None = None
    aa: bool = False
    leakage_check: bool = False
    embeddings_version: str | None = None
    # The tokens (and cost) estimated before the run, per chat variant name: what the report
    # shows beside what was spent (None: no chat variant, or stored before chat variants).
    token_estimate: dict[str, dict[str, Any]] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "evalId": self.eval_id,
            "caseId": self.case_id,
            "seed": self.seed,
            "sampleSize": self.sample_size,
            "grouping": self.grouping.to_json(),
            "config": self.config.to_json(),
            "targetDepth": list(self.target_depth),
            "variants": [v.to_json() for v in self.variants],
            "recordsVersion": self.records_version,
            "treeVersion": self.tree_version,
            "memoVersion": self.memo_version,
        }
        if self.memo_entries is not None:
            data["activeMemo"] = list(self.active_memo or ())
            data["memoEntries"] = self.memo_entries
        if self.aa:
            data["aa"] = True
        if self.leakage_check:
            data["leakageCheck"] = True
        if self.embeddings_version is not None:
            data["embeddingsVersion"] = self.embeddings_version
        if self.token_estimate is not None:
            data["tokenEstimate"] = self.token_estimate
        return data

    @property
    def retrievals(self) -> tuple[Retrieval, ...]:
        """Each distinct way evidence is retrieved, in order of first use by a variant."""
        return tuple(dict.fromkeys(v.config.retrieval for v in self.variants))

    def candidates_for(self, retrieval: Retrieval) -> int:
        """Evidence records retrieved per sampled record this way: the most any variant
        retrieving this way asks for."""
        return max(v.config.candidates for v in self.variants if v.config.retrieval == retrieval)

    @property
    def uses_embeddings(self) -> bool:
        spaces = {r.space for r in self.retrievals}
        if self.grouping.mode == "nearDuplicate":
            spaces.add(self.grouping.retrieval.space)
        return "embedding" in spaces

    @property
    def aa_twin(self) -> Variant | None:
        """The A/A arm: the baseline's twin, classified a second time (``--aa``)."""
        return next((v for v in self.variants if v.name == AA_TWIN), None) if self.aa else None

    def memo_ids_of(self, variant: Variant) -> tuple[str, ...] | None:
        """The memo entries a variant classifies with (active plus included), or None for an
        evaluation stored before memo snapshots (its entries are read from the case)."""
        if self.active_memo is None:
            return None
        return tuple(sorted({*self.active_memo, *variant.memo_include}))

    @property
    def max_candidates(self) -> int:
        return max(v.config.candidates for v in self.variants)


def spec_from_json(data: dict[str, Any]) -> HoldoutSpec:
    """Rebuild a stored spec (already validated when it was written)."""
    return HoldoutSpec(
        eval_id=data["evalId"],
        case_id=data["caseId"],
        seed=data["seed"],
        sample_size=data["sampleSize"],
        grouping=grouping_from_json(data["grouping"]),
        config=config_from_json(data["config"]),
        target_depth=tuple(data["targetDepth"]),
        variants=tuple(variant_from_json(v) for v in data["variants"]),
        records_version=data["recordsVersion"],
        tree_version=data["treeVersion"],
        memo_version=data["memoVersion"],
        active_memo=tuple(data["activeMemo"]) if "activeMemo" in data else None,
        memo_entries=data.get("memoEntries"),
        aa=bool(data.get("aa", False)),
        leakage_check=bool(data.get("leakageCheck", False)),
        embeddings_version=data.get("embeddingsVersion"),
        token_estimate=data.get("tokenEstimate"),
    )


@dataclass(frozen=True)
class CaseContext:
    """What the spec parser needs to know about the case an evaluation runs on.

    Attributes
    ----------
    memo
        Every memo entry of the case: id -> (status, normalised content).
    classifiers
        Names of the registered classifiers.
    """

    case_id: str
    records_version: str
    tree_version: str
    max_depth: int
    target_depth: tuple[int, ...]
    metadata_columns: tuple[str, ...]
    memo: dict[str, tuple[str, dict[str, Any]]]
    classifiers: tuple[str, ...]
    n_records: int | None = None
    embeddings_version: str | None = None


@dataclass(frozen=True)
class HoldoutOptions:
    """What a new holdout evaluation is asked for besides its variants: the one list of options
    :func:`~eval_pipelines.api.start_holdout_eval`, :func:`~eval_pipelines.api.evaluate_memo_entry`
    and :func:`parse_holdout_request` take. Checked when the evaluation is registered, naming
    the field (``sampleSize``, ``grouping.threshold``, ...), never here.

    Attributes
    ----------
    sample_size, seed
        The records drawn (:data:`SAMPLE_SIZE_MIN` to :data:`SAMPLE_SIZE_MAX`) and the seed
        of the draw (and of every resampling).
    grouping
        ``{mode, threshold, field, retrieval}``: how near-duplicates of the sample are kept
        out of its evidence (:mod:`~eval_pipelines.core.holdout.grouping_settings`).
    group_field
        A metadata column whose equal values are held out together; alone it means grouping
        mode ``field``.
    config
        The config every variant without its own uses
        (:mod:`~eval_pipelines.core.holdout.classify_config`).
    aa
        Add the A/A arm: a twin of the baseline (same config and memo) named
        :data:`~eval_pipelines.core.holdout.variants.AA_TWIN`, classified a second time, so
        the report can measure the instrument's own noise.
    leakage_check
        Also score the baseline ungrouped on the same sample.
    trials
        Set ``trials`` on every ``chat`` variant (refused without one).
    confirm_tokens
        Yes to an estimate above the token limit
        (:mod:`~eval_pipelines.core.holdout.token_policy`).
    """

    sample_size: int = SAMPLE_SIZE_DEFAULT
    seed: int = DEFAULT_SEED
    grouping: Mapping[str, object] | None = None
    group_field: str | None = None
    config: Mapping[str, object] | None = None
    aa: bool = False
    leakage_check: bool = False
    trials: int | None = None
    confirm_tokens: bool = False


def parse_holdout_request(
    variants: Any, options: HoldoutOptions, *, case: CaseContext, sequence: int
) -> HoldoutSpec:
    """Check every input rule of a holdout evaluation and resolve it into a spec (``options``'
    ``trials`` and ``confirm_tokens`` are read later, by
    :mod:`~eval_pipelines.core.holdout.chat_variants` and
    :mod:`~eval_pipelines.core.holdout.token_policy`).

    This is the only place the rules live: sample size, seed, grouping (mode, threshold, group
    field among the case's metadata columns), the shared config, every variant (names, memo
    entries that exist, config, classifiers that are registered) and the pinned target depth.

    Raises
    ------
    InputError
        Naming the field, the value and the rule; nothing has been written.
    """
    sample_size, seed, group_field = options.sample_size, options.seed, options.group_field
    aa, leakage_check = options.aa, options.leakage_check
    validate_sample_size(sample_size)
    validate_seed(seed)
    grouping: Any = options.grouping
    if grouping is None:
        grouping = {}
    if not isinstance(grouping, dict):
        raise InputError("grouping", grouping, "must be an object with mode, threshold, field")
    unknown = set(grouping) - set(GROUPING_KEYS)
    if unknown:
        key = sorted(unknown)[0]
        raise InputError(
            f"grouping.{key}", grouping[key], f"unknown; use {', '.join(GROUPING_KEYS)}"
        )
    if "field" in grouping and group_field is None:
        group_field = grouping["field"]
    resolved = parse_grouping(
        grouping.get("mode"),
        grouping.get("threshold"),
        group_field,
        grouping.get("retrieval"),
        n_records=case.n_records,
        n_queries=sample_size,
    )
    if resolved.field is not None and resolved.field not in case.metadata_columns:
        raise InputError(
            "groupField",
            resolved.field,
            f"is not a metadata column of case {case.case_id} "
            f"(columns: {list(case.metadata_columns)})",
        )
    shared = parse_config(
        options.config,
        where="config",
        max_depth=case.max_depth,
        n_records=case.n_records,
        n_queries=sample_size,
    )
    pinned = shared.target_depth or case.target_depth
    parsed = parse_variants(
        variants,
        shared_config=shared,
        pinned_target_depth=pinned,
        known_memo_ids=set(case.memo),
        max_depth=case.max_depth,
        n_records=case.n_records,
        n_queries=sample_size,
    )
    if leakage_check and resolved.mode == "none":
        raise InputError(
            "leakageCheck",
            True,
            "compares grouped with ungrouped scores; this evaluation is ungrouped (grouping "
            "mode none), so there is nothing to compare",
        )
    if any(v.name == AA_TWIN for v in parsed):
        raise InputError("variants.name", AA_TWIN, "is reserved for the A/A arm (`aa`)")
    if aa:
        baseline = parsed[0]
        taken = {v.step_key for v in parsed}
        parsed = (*parsed, replace(baseline, name=AA_TWIN, step_key=step_key_for(AA_TWIN, taken)))
    parsed = tuple(
        _with_plugin(variant, f"variants[{index}].config.classifier", case.classifiers)
        for index, variant in enumerate(parsed)
    )
    _require_embeddings(resolved, parsed, case)
    active = tuple(sorted(i for i, (status, _) in case.memo.items() if status == "active"))
    used = sorted({*active, *(m for v in parsed for m in v.memo_include)})
    return HoldoutSpec(
        eval_id=make_eval_id(case.case_id, sequence, seed),
        case_id=case.case_id,
        seed=seed,
        sample_size=sample_size,
        grouping=resolved,
        config=shared,
        target_depth=pinned,
        variants=parsed,
        records_version=case.records_version,
        tree_version=case.tree_version,
        memo_version=memo_version_of([case.memo[i][1] for i in active]),
        active_memo=active,
        memo_entries={i: case.memo[i][1] for i in used},
        aa=bool(aa),
        leakage_check=bool(leakage_check),
        embeddings_version=case.embeddings_version if _embedding_fields(resolved, parsed) else None,
    )


def _with_plugin(variant: Variant, where: str, registered: tuple[str, ...]) -> Variant:
    """The variant with its classifier's plug-in identity pinned (none for a registered
    name); a plug-in that cannot be imported or does not take the classifier's arguments is
    refused naming ``where``."""
    name = variant.config.classifier
    if name in registered:
        return variant
    try:
        _, found = resolve_classifier(name)
        identity = identity_of(name, found)
    except PluginError as error:
        raise InputError(
            where, name, f"must be a registered classifier {list(registered)} or a plug-in: {error}"
        ) from None
    return replace(variant, plugin=identity)


def _embedding_fields(grouping: Grouping, variants: tuple[Variant, ...]) -> list[str]:
    """The spec fields that ask for the embedding space."""
    fields = [
        f"variants[{i}].config.retrieval.space"
        for i, v in enumerate(variants)
        if v.config.retrieval.space == "embedding"
    ]
    if grouping.mode == "nearDuplicate" and grouping.retrieval.space == "embedding":
        fields.insert(0, "grouping.retrieval.space")
    return fields


def _require_embeddings(
    grouping: Grouping, variants: tuple[Variant, ...], case: CaseContext
) -> None:
    fields = _embedding_fields(grouping, variants)
    if fields and case.embeddings_version is None:
        raise InputError(
            fields[0],
            "embedding",
            f"case {case.case_id} has no embeddings for its current records; add them with "
            f"'eval-pipelines case create {case.case_id} ... --embeddings FILE' or "
            f"'eval-pipelines case embed {case.case_id} --method lsa --dim 256'",
        )


def make_eval_id(case_id: str, sequence: int, seed: int) -> str:
    """Evaluation id and partition key, e.g. ``icd10cm-e0007-s7``: case, sequence and seed."""
    return f"{case_id}-e{sequence:04d}-s{seed}"
