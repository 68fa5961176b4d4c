"""Evaluation specs: what an evaluation will do, validated once at the boundary.

A spec is written to storage before its Dagster run starts and belongs to the evaluation's
partition, so UI re-materialisations and backfills read the same spec (never run config).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.files import check_document
from eval_pipelines.core.holdout.memo import memo_version_of
from eval_pipelines.core.inputs import check_name, reject_non_finite
from eval_pipelines.core.plugins import PluginError, identity_of, resolve_classifier

SAMPLE_SIZE_MIN = 10
SAMPLE_SIZE_MAX = 5_000
SAMPLE_SIZE_DEFAULT = 200
DEFAULT_SEED = 7
DEFAULT_NEAR_DUPLICATE_THRESHOLD = 0.98
# Each variant is one classify job and one Dagster step over the sample, and every candidate
# is compared with the baseline and Holm-adjusted across the candidates (README: Variants).
VARIANTS_MAX = 20
GROUPING_MODES = ("nearDuplicate", "field", "none")
STRATEGIES = ("weighted", "majority", "nearest")
CANDIDATES_MAX = 200
AA_TWIN = "aa-twin"
SPACES = ("tfidf", "embedding")
BACKENDS = ("exact", "pynndescent", "auto")


@dataclass(frozen=True)
class Retrieval:
    """Where evidence (or near-duplicates) are searched: the vector space and the backend.

    Attributes
    ----------
    space
        ``tfidf`` (the case's hashed TF-IDF vectors) or ``embedding`` (the case's embeddings,
        pinned per evaluation).
    backend
        ``exact`` or ``pynndescent``, resolved when the evaluation is registered.
    requested
        What was asked for (``auto`` stays visible in the report after it is resolved).
    """

    space: str = "tfidf"
    backend: str = "exact"
    requested: str = "exact"

    @property
    def key(self) -> str:
        """Storage key of the evidence retrieved this way, e.g. ``embedding:pynndescent``."""
        return f"{self.space}:{self.backend}"

    @property
    def is_default(self) -> bool:
        return self == Retrieval()

    def to_json(self) -> dict[str, Any]:
        data = {"space": self.space, "backend": self.backend}
        if self.requested != self.backend:
            data["requested"] = self.requested
        return data


def retrieval_from_json(raw: dict[str, Any] | None) -> Retrieval:
    """Rebuild a stored retrieval (specs stored before embeddings have none: TF-IDF, exact)."""
    if raw is None:
        return Retrieval()
    return Retrieval(
        space=raw["space"], backend=raw["backend"], requested=raw.get("requested", raw["backend"])
    )


def parse_retrieval(
    raw: Any, *, where: str, n_records: int | None = None, n_queries: int | None = None
) -> Retrieval:
    """Parse ``{space, backend}``; ``auto`` is resolved from the case's size and the sample's
    by the measured cost model of
    :func:`eval_pipelines.core.embeddings.ann.choose_backend` (index build included).

    The approximate index serves the embedding space only: on sparse TF-IDF pynndescent took
    347 s to build at 100k records for recall@10 0.94 (DESIGN.md section 6), while the exact
    scan answers 5,000 queries in seconds.
    """
    if raw is None:
        return Retrieval()
    if not isinstance(raw, dict):
        raise InputError(where, raw, "must be an object {space, backend}")
    unknown = set(raw) - {"space", "backend"}
    if unknown:
        key = sorted(unknown)[0]
        raise InputError(f"{where}.{key}", raw[key], "unknown; use space, backend")
    space = raw.get("space", "tfidf")
    if space not in SPACES:
        raise InputError(f"{where}.space", space, f"must be one of {', '.join(SPACES)}")
    requested = raw.get("backend", "exact")
    if requested not in BACKENDS:
        raise InputError(f"{where}.backend", requested, f"must be one of {', '.join(BACKENDS)}")
    if space == "tfidf" and requested == "pynndescent":
        raise InputError(
            f"{where}.backend",
            requested,
            "serves space embedding only: on sparse TF-IDF the exact scan is faster and "
            "exact (pynndescent measured 347 s to build at 100k records, recall@10 0.94)",
        )
    backend = requested
    if requested == "auto":
        backend = "exact"
        if space == "embedding" and n_records and n_queries:
            # Imported here: it loads numba, which only an `auto` request needs.
            from eval_pipelines.core.embeddings.ann import choose_backend

            backend = choose_backend("auto", n_records, n_queries)
    return Retrieval(space=space, backend=backend, requested=requested)


def validate_case_id(case_id: str) -> str:
    """Case ids become part of partition keys and file names: the one name pattern."""
    return check_name(case_id, "case", "a case id")


@dataclass(frozen=True)
class ClassifyConfig:
    """Classify settings of one variant (000's ``config``).

    Attributes
    ----------
    classifier
        Name of the classifier; ``knn-vote`` is built in and needs no network.
    strategy
        How retrieved evidence votes: ``weighted`` (by cosine similarity), ``majority``
        (one vote each) or ``nearest`` (the single most similar record decides).
    candidates
        Number of evidence records retrieved per sampled record (after leave-out).
    target_depth
        Levels the evaluation is scored at; pinned per evaluation.
    decline_below
        Vote share below which the classifier stops descending the tree; a prediction that
        does not reach the (shallowest) target depth is routed ``declined``.
    auto_above
        Vote share at the target depth from which a prediction is routed ``auto``
        (otherwise ``review``).
    llm_level
        Model tier for classifiers that use one; recorded and passed through.
    options
        Free-form settings for plug-in classifiers (for ``chat``: the endpoint settings,
        :mod:`eval_pipelines.core.chat.settings`).
    models, prices, trials, concurrency, max_retries
        ``chat`` only (None otherwise, and refused on other classifiers): the llmLevel ->
        model table, the price table, the trials per record, the calls in flight and the
        retries per call (:data:`CHAT_KEYS`).
    """

    classifier: str = "knn-vote"
    strategy: str = "weighted"
    candidates: int = 20
    target_depth: tuple[int, ...] = ()
    decline_below: float = 0.3
    auto_above: float = 0.8
    llm_level: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    retrieval: Retrieval = Retrieval()
    models: dict[str, Any] | None = None
    prices: dict[str, Any] | None = None
    trials: int | None = None
    concurrency: int | None = None
    max_retries: int | None = None

    @property
    def chat_keys(self) -> dict[str, Any]:
        """The ``chat``-only keys given, by their JSON names."""
        return {
            name: getattr(self, attribute)
            for name, attribute in CHAT_KEYS.items()
            if getattr(self, attribute) is not None
        }

    def to_json(self) -> dict[str, Any]:
        data = {
            "classifier": self.classifier,
            "strategy": self.strategy,
            "candidates": self.candidates,
            "targetDepth": list(self.target_depth),
            "declineBelow": self.decline_below,
            "autoAbove": self.auto_above,
            "llmLevel": self.llm_level,
            "options": self.options,
        }
        # Written only when it differs from the default, so configs (and the comparability
        # keys built from them) of evaluations made before embeddings read as before.
        if not self.retrieval.is_default:
            data["retrieval"] = self.retrieval.to_json()
        # Likewise the chat-only keys: written only when given.
        data.update(self.chat_keys)
        return data


CHAT_CLASSIFIER = "chat"
# Keys valid only with ``classifier: chat`` (JSON name -> attribute); checked in full by
# core.chat.settings when the evaluation is registered.
CHAT_KEYS = {
    "models": "models",
    "prices": "prices",
    "trials": "trials",
    "concurrency": "concurrency",
    "maxRetries": "max_retries",
}

_CONFIG_KEYS = {
    "classifier": "classifier",
    "strategy": "strategy",
    "candidates": "candidates",
    "targetDepth": "target_depth",
    "declineBelow": "decline_below",
    "autoAbove": "auto_above",
    "llmLevel": "llm_level",
    "options": "options",
    "retrieval": "retrieval",
    **CHAT_KEYS,
}


def parse_config(
    raw: Any,
    *,
    where: str,
    max_depth: int,
    n_records: int | None = None,
    n_queries: int | None = None,
) -> ClassifyConfig:
    """Parse a config object; unknown keys are errors (a typo must not become a default)."""
    if raw is None:
        return ClassifyConfig()
    if not isinstance(raw, dict):
        raise InputError(where, raw, "config must be a JSON object")
    reject_non_finite(raw, where)  # options included: a NaN passes range checks
    # A Python caller's config is bounded like a file's: stored as JSON, a config nested
    # thousands deep would end in a RecursionError.
    check_document(raw, where, "a config")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in _CONFIG_KEYS:
            raise InputError(
                f"{where}.{key}", value, f"unknown config key; known keys: {sorted(_CONFIG_KEYS)}"
            )
        values[_CONFIG_KEYS[key]] = value
    retrieval = parse_retrieval(
        values.pop("retrieval", None),
        where=f"{where}.retrieval",
        n_records=n_records,
        n_queries=n_queries,
    )
    config = ClassifyConfig(
        **{k: v for k, v in values.items() if k != "target_depth"}, retrieval=retrieval
    )
    if not isinstance(config.classifier, str) or not config.classifier:
        raise InputError(f"{where}.classifier", config.classifier, "must be a classifier name")
    if config.strategy not in STRATEGIES:
        raise InputError(f"{where}.strategy", config.strategy, f"must be one of {STRATEGIES}")
    if (
        isinstance(config.candidates, bool)
        or not isinstance(config.candidates, int)
        or not 1 <= config.candidates <= CANDIDATES_MAX
    ):
        raise InputError(
            f"{where}.candidates", config.candidates, f"must be an integer in 1..{CANDIDATES_MAX}"
        )
    for name, key in (("declineBelow", "decline_below"), ("autoAbove", "auto_above")):
        value = getattr(config, key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise InputError(f"{where}.{name}", value, "must be a number in [0, 1]")
    if config.auto_above < config.decline_below:
        raise InputError(f"{where}.autoAbove", config.auto_above, "must be at least declineBelow")
    if config.llm_level is not None and not isinstance(config.llm_level, str):
        raise InputError(f"{where}.llmLevel", config.llm_level, "must be a string")
    if not isinstance(config.options, dict):
        raise InputError(f"{where}.options", config.options, "must be a JSON object")
    if config.classifier != CHAT_CLASSIFIER:
        for name in config.chat_keys:
            raise InputError(
                f"{where}.{name}",
                raw[name],
                f"applies to classifier {CHAT_CLASSIFIER!r} only, not {config.classifier!r}",
            )
    elif config.models is not None and (
        not isinstance(config.models, dict)
        or not all(isinstance(m, str) and m.strip() for m in config.models.values())
    ):
        raise InputError(f"{where}.models", config.models, "must map an llmLevel to a model name")
    if "target_depth" in values:
        config = replace(
            config,
            target_depth=parse_target_depth(
                values["target_depth"], f"{where}.targetDepth", max_depth
            ),
        )
    return config


def parse_target_depth(raw: Any, field: str, max_depth: int) -> tuple[int, ...]:
    """Target depth: one level or a list of levels, each in 1..max_depth."""
    items = [raw] if isinstance(raw, int) and not isinstance(raw, bool) else raw
    if not isinstance(items, list | tuple) or not items:
        raise InputError(field, raw, "must be a level or a non-empty list")
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= max_depth:
            raise InputError(field, raw, f"each level must be an integer in 1..{max_depth}")
    return tuple(sorted(set(items)))


@dataclass(frozen=True)
class Grouping:
    """How near-duplicates of the sample are kept out of its evidence."""

    mode: str = "nearDuplicate"
    threshold: float | None = DEFAULT_NEAR_DUPLICATE_THRESHOLD
    field: str | None = None
    # The space near-duplicates are found in (nearDuplicate mode only). A threshold means
    # different things in different spaces, so a non-default space is part of the JSON and
    # of what makes two evaluations comparable.
    retrieval: Retrieval = Retrieval()

    def to_json(self) -> dict[str, Any]:
        if self.mode == "nearDuplicate":
            data: dict[str, Any] = {"mode": self.mode, "threshold": self.threshold}
            if not self.retrieval.is_default:
                data["retrieval"] = self.retrieval.to_json()
            return data
        if self.mode == "field":
            return {"mode": self.mode, "field": self.field}
        return {"mode": self.mode}


def parse_grouping(
    mode: str | None,
    threshold: float | None,
    group_field: str | None,
    retrieval: Any = None,
    *,
    n_records: int | None = None,
    n_queries: int | None = None,
) -> Grouping:
    """Resolve grouping flags as 000 states them.

    ``groupField`` alone means mode ``field``; with any other mode it is an error. A threshold
    belongs to ``nearDuplicate`` only and must lie in (0, 1]; so does a retrieval space.
    """
    if mode is None:
        mode = "field" if group_field is not None else "nearDuplicate"
    if mode not in GROUPING_MODES:
        raise InputError("grouping.mode", mode, f"must be one of {', '.join(GROUPING_MODES)}")
    if group_field is not None and mode != "field":
        raise InputError(
            "groupField", group_field, f"can only be combined with grouping mode field, not {mode}"
        )
    if threshold is not None:
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, int | float)
            or math.isnan(threshold)
            or not 0 < threshold <= 1
        ):
            raise InputError("grouping.threshold", threshold, "must be above 0 and at most 1")
        if mode != "nearDuplicate":
            raise InputError(
                "grouping.threshold", threshold, f"applies to mode nearDuplicate only, not {mode}"
            )
    if retrieval is not None and mode != "nearDuplicate":
        raise InputError(
            "grouping.retrieval", retrieval, f"applies to mode nearDuplicate only, not {mode}"
        )
    if mode == "field":
        if not group_field:
            raise InputError("groupField", group_field, "grouping mode field needs a groupField")
        return Grouping(mode="field", threshold=None, field=group_field)
    if mode == "none":
        return Grouping(mode="none", threshold=None, field=None)
    return Grouping(
        mode="nearDuplicate",
        threshold=float(threshold) if threshold is not None else DEFAULT_NEAR_DUPLICATE_THRESHOLD,
        field=None,
        retrieval=parse_retrieval(
            retrieval, where="grouping.retrieval", n_records=n_records, n_queries=n_queries
        ),
    )


@dataclass(frozen=True)
class Variant:
    """One classify job over the shared sample; the first variant is the baseline."""

    name: str
    memo_include: tuple[str, ...]
    config: ClassifyConfig
    step_key: str
    # The plug-in classifier's identity (core.plugins.identity_of); None for a registered one.
    plugin: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "memoInclude": list(self.memo_include),
            "config": self.config.to_json(),
            "stepKey": self.step_key,
        }
        # Written only for plug-ins, so specs of built-in classifiers read as before.
        if self.plugin is not None:
            data["plugin"] = dict(self.plugin)
        return data


def step_key_for(name: str, taken: set[str]) -> str:
    """A Dagster mapping key (``[A-Za-z0-9_]``) for a variant name, unique within the eval."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", name) or "variant"
    key, suffix = base, 2
    while key in taken:
        key, suffix = f"{base}_{suffix}", suffix + 1
    taken.add(key)
    return key


def parse_variants(
    raw: Any,
    *,
    shared_config: ClassifyConfig,
    pinned_target_depth: tuple[int, ...],
    known_memo_ids: set[str],
    max_depth: int,
    n_records: int | None = None,
    n_queries: int | None = None,
) -> tuple[Variant, ...]:
    """Parse ``variants.json``: a non-empty list of ``{"name", "memo_include"?, "config"?}``.

    A variant's config replaces the shared config when present; the target depth is pinned per
    evaluation, so a variant that names a different one is an error.
    """
    if not isinstance(raw, list) or not raw:
        raise InputError("variants", raw, "give at least one variant (the first is the baseline)")
    if len(raw) > VARIANTS_MAX:
        raise InputError(
            "variants",
            f"{len(raw)} variants",
            f"give at most {VARIANTS_MAX}: each is a classify job over the whole sample, and "
            "more candidates dilute the Holm-adjusted comparisons; split into evaluations "
            "with the same seed and compare them",
        )
    variants: list[Variant] = []
    names: set[str] = set()
    step_keys: set[str] = set()
    for index, item in enumerate(raw):
        where = f"variants[{index}]"
        if not isinstance(item, dict):
            raise InputError(where, item, 'each variant is an object {"name", ...}')
        unknown = set(item) - {"name", "memo_include", "memoInclude", "config"}
        if unknown:
            raise InputError(
                f"{where}.{sorted(unknown)[0]}",
                item[sorted(unknown)[0]],
                "unknown variant key; known keys: name, memo_include, config",
            )
        name = check_name(item.get("name"), f"{where}.name", "a variant name")
        if name in names:
            raise InputError(f"{where}.name", name, "variant names must be unique")
        names.add(name)
        if "memo_include" in item and "memoInclude" in item:
            raise InputError(f"{where}.memo_include", item["memo_include"], "give it once")
        include = item.get("memo_include", item.get("memoInclude", []))
        if not isinstance(include, list) or not all(isinstance(m, str) for m in include):
            raise InputError(f"{where}.memo_include", include, "must be a list of memo entry ids")
        for memo_id in include:
            if memo_id not in known_memo_ids:
                raise InputError(
                    f"{where}.memo_include", memo_id, "is not a memo entry of this case"
                )
        if "config" in item:
            config = parse_config(
                item["config"],
                where=f"{where}.config",
                max_depth=max_depth,
                n_records=n_records,
                n_queries=n_queries,
            )
            if config.target_depth and config.target_depth != pinned_target_depth:
                raise InputError(
                    f"{where}.config.targetDepth",
                    list(config.target_depth),
                    f"the evaluation pins targetDepth {list(pinned_target_depth)} for every "
                    "variant; set it in the shared config",
                )
        else:
            config = shared_config
        config = replace(config, target_depth=pinned_target_depth)
        variants.append(
            Variant(
                name=name,
                memo_include=tuple(dict.fromkeys(include)),
                config=config,
                step_key=step_key_for(name, step_keys),
            )
        )
    return tuple(variants)


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

    def config_of(raw: dict[str, Any]) -> ClassifyConfig:
        return ClassifyConfig(
            classifier=raw["classifier"],
            strategy=raw["strategy"],
            candidates=raw["candidates"],
            target_depth=tuple(raw["targetDepth"]),
            decline_below=raw["declineBelow"],
            auto_above=raw["autoAbove"],
            llm_level=raw["llmLevel"],
            options=raw.get("options", {}),
            retrieval=retrieval_from_json(raw.get("retrieval")),
            **{attribute: raw.get(name) for name, attribute in CHAT_KEYS.items()},
        )

    grouping = data["grouping"]
    return HoldoutSpec(
        eval_id=data["evalId"],
        case_id=data["caseId"],
        seed=data["seed"],
        sample_size=data["sampleSize"],
        grouping=Grouping(
            mode=grouping["mode"],
            threshold=grouping.get("threshold"),
            field=grouping.get("field"),
            retrieval=retrieval_from_json(grouping.get("retrieval")),
        ),
        config=config_of(data["config"]),
        target_depth=tuple(data["targetDepth"]),
        variants=tuple(
            Variant(
                name=v["name"],
                memo_include=tuple(v["memoInclude"]),
                config=config_of(v["config"]),
                step_key=v["stepKey"],
                plugin=v.get("plugin"),
            )
            for v in data["variants"]
        ),
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


GROUPING_KEYS = ("mode", "threshold", "field", "retrieval")


def parse_holdout_request(
    variants: Any,
    *,
    case: CaseContext,
    sequence: int,
    sample_size: Any = SAMPLE_SIZE_DEFAULT,
    seed: Any = DEFAULT_SEED,
    grouping: Any = None,
    group_field: str | None = None,
    config: Any = None,
    aa: bool = False,
    leakage_check: bool = False,
) -> HoldoutSpec:
    """Check every input rule of a holdout evaluation and resolve it into a spec.

    ``aa`` appends the A/A arm: a twin of the baseline (same config and memo) named
    :data:`AA_TWIN`, classified a second time, so the report can measure the instrument's own
    noise; ``leakage_check`` also scores the baseline ungrouped on the same sample.

    This is the only place the rules live: sample size, seed, grouping (mode, threshold, group
    field among the case's metadata columns), the shared config, every variant (names, memo
    entries that exist, config, classifiers that are registered) and the pinned target depth.

    Raises
    ------
    InputError
        Naming the field, the value and the rule; nothing has been written.
    """
    validate_sample_size(sample_size)
    validate_seed(seed)
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
        config,
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
