"""The rules ``chat`` variants add to a holdout evaluation: ``trials`` (only with a chat
variant), no A/A arm or leakage check on a chat baseline, each chat variant's settings checked
against the environment the calls run in, and its token estimate from the real prompts of
sampled rows (:mod:`eval_pipelines.core.holdout.chat_estimate`). The caller reads the rows; nothing
here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from eval_pipelines.core.chat.settings import TRIALS_MAX, ChatSettings
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout.chat_classify import chat_messages
from eval_pipelines.core.holdout.chat_estimate import (
    ESTIMATE_ROWS,
    estimate_variant,
    variant_settings,
)
from eval_pipelines.core.holdout.classify_config import CHAT_CLASSIFIER
from eval_pipelines.core.holdout.spec import HoldoutSpec

# How many of the sample's first rows are read for their labels: the candidate lines of an
# estimate's prompts carry real codes and titles, as many as a variant may be offered.
LABEL_ROWS = max(ESTIMATE_ROWS, 200)


def chat_variants_checked(
    spec: HoldoutSpec, trials: Any, environ: Mapping[str, str]
) -> tuple[HoldoutSpec, dict[str, ChatSettings]]:
    """The spec with ``trials`` set on every chat variant, and each chat variant's settings
    checked against ``environ`` (by variant name; empty without a chat variant).

    Raises
    ------
    InputError
        Naming the field, for a bad chat setting, ``trials`` outside 1..20 or given without a
        chat variant, and for ``aa`` or ``leakageCheck`` with a chat baseline.
    """
    chat = [i for i, v in enumerate(spec.variants) if v.config.classifier == CHAT_CLASSIFIER]
    if trials is not None:
        if isinstance(trials, bool) or not isinstance(trials, int) or not 1 <= trials <= TRIALS_MAX:
            raise InputError("trials", trials, f"must be a whole number from 1 to {TRIALS_MAX}")
        if not chat:
            raise InputError(
                "trials",
                trials,
                "asks each record several times of a chat variant; this evaluation has no "
                "chat variant (knn-vote and plug-ins answer the same every time)",
            )
        spec = replace(
            spec,
            variants=tuple(
                replace(v, config=replace(v.config, trials=trials)) if i in chat else v
                for i, v in enumerate(spec.variants)
            ),
        )
    if not chat:
        return spec, {}
    if 0 in chat and spec.aa:
        raise InputError(
            "aa",
            True,
            "the A/A twin of a chat baseline would be answered from the call cache (the same "
            "requests): it measures nothing; use trials for the model's own non-determinism",
        )
    if 0 in chat and spec.leakage_check:
        raise InputError(
            "leakageCheck",
            True,
            "is not supported with a chat baseline (it would classify the sample a second "
            "time with the model); put a knn-vote variant first",
        )
    settings = {
        spec.variants[i].name: variant_settings(
            spec.variants[i].config, environ, where=f"variants[{i}].config"
        )
        for i in chat
    }
    return spec, settings


@dataclass(frozen=True)
class _InstructionOnly:
    """What :func:`~eval_pipelines.core.holdout.chat_classify.chat_messages` reads of a memo
    entry."""

    instruction: str


def sampled_labels(sample_keys: Sequence[str], rows: Mapping[str, tuple[str, str]]) -> list[str]:
    """The labels of the sampled rows read (``rows``: key -> (text, label)), in sample order,
    each once: the codes an estimate's prompts offer, whose titles the caller reads."""
    return list(dict.fromkeys(rows[k][1] for k in sample_keys if k in rows))


def chat_estimates(
    spec: HoldoutSpec,
    settings: Mapping[str, ChatSettings],
    sample_keys: Sequence[str],
    rows: Mapping[str, tuple[str, str]],
    titles: Mapping[str, str],
) -> dict[str, Any]:
    """Each chat variant's estimate (its JSON, by variant name) from the real prompts of the
    first sampled rows: the sample the run will draw (``sample_keys``, in order), the texts
    and labels of its first :data:`LABEL_ROWS` (``rows``: key -> (text, label)), the variant's
    memo instructions and candidate lines with real titles (the labels of the sampled rows,
    as many as the variant's ``candidates``: the most it can be offered)."""
    labels = sampled_labels(sample_keys, rows)
    estimates = {}
    for variant in spec.variants:
        if variant.name not in settings:
            continue
        chat = settings[variant.name]
        ids = spec.memo_ids_of(variant) or ()
        instructions = [
            _InstructionOnly((spec.memo_entries or {}).get(i, {}).get("instruction", ""))
            for i in ids
        ]
        offered = [(code, 1.0) for code in labels[: variant.config.candidates]]
        prompts = [
            chat_messages(chat, rows[key][0], offered, instructions, titles)  # type: ignore[arg-type]
            for key in sample_keys[:ESTIMATE_ROWS]
        ]
        estimates[variant.name] = estimate_variant(chat, prompts, len(sample_keys)).to_json()
    return estimates
