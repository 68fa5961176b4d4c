"""A variant's classify settings (000's ``config``): the classifier, how evidence votes, the
thresholds that route a prediction, the ``chat``-only keys; parsed strictly (an unknown key
is an error) and stored as JSON."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.files import check_document
from eval_pipelines.core.holdout.retrieval import Retrieval, parse_retrieval, retrieval_from_json
from eval_pipelines.core.inputs import reject_non_finite

# A price table's currency code (ISO 4217 style); the report prices tokens in it.
CURRENCY = re.compile(r"[A-Z]{3}")
STRATEGIES = ("weighted", "majority", "nearest")
CANDIDATES_MAX = 200


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
    models, prices, currency, trials, concurrency, max_retries
        ``chat`` only (None otherwise, and refused on other classifiers): the llmLevel ->
        model table, the price table and its currency, the trials per record, the calls in
        flight and the retries per call (:data:`CHAT_KEYS`).
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
    currency: str | None = None
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
    "currency": "currency",
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
    elif config.currency is not None and (
        not isinstance(config.currency, str) or not CURRENCY.fullmatch(config.currency)
    ):
        raise InputError(
            f"{where}.currency",
            config.currency,
            "the price table's currency: 3 upper-case letters, ISO 4217 style (USD, EUR)",
        )
    if "target_depth" in values:
        config = replace(
            config,
            target_depth=parse_target_depth(
                values["target_depth"], f"{where}.targetDepth", max_depth
            ),
        )
    return config


def config_from_json(raw: dict[str, Any]) -> ClassifyConfig:
    """Rebuild a stored config (already validated when it was written)."""
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


def parse_target_depth(raw: Any, field: str, max_depth: int) -> tuple[int, ...]:
    """Target depth: one level or a list of levels, each in 1..max_depth."""
    items = [raw] if isinstance(raw, int) and not isinstance(raw, bool) else raw
    if not isinstance(items, list | tuple) or not items:
        raise InputError(field, raw, "must be a level or a non-empty list")
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= max_depth:
            raise InputError(field, raw, f"each level must be an integer in 1..{max_depth}")
    return tuple(sorted(set(items)))
