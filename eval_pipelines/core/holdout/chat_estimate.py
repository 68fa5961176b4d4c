"""A holdout variant with ``classifier: chat``: its settings from its config, and the tokens and
cost it is expected to spend, estimated before the run.

Settings: the variant's config as JSON (``options``, ``models``, ``prices``, ``trials``,
``concurrency``, ``maxRetries``) is checked by
:func:`~eval_pipelines.core.chat.settings.parse_chat_settings`; with ``llmLevel`` set, the
model is ``models[llmLevel]`` (an llmLevel missing from the table is refused naming
``config.llmLevel``), else ``options.model``.

Estimate, without a tokenizer: a call's input is estimated as its prompt's characters over
:data:`CHARS_PER_TOKEN` (4, the usual rule of thumb for English text and BPE tokenizers),
rounded up, and its output as the whole answer budget ``maxTokens`` (an upper bound: the answer
is a short JSON object). The prompt is the real one of a few sampled rows (their text, the
memo's instructions and candidate lines with real titles); the variant's estimate is the mean
over those rows times records times trials.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from eval_pipelines.core.chat.cost import call_cost
from eval_pipelines.core.chat.settings import ChatSettings, parse_chat_settings
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout.classify_config import ClassifyConfig
from eval_pipelines.core.results import JsonResult

CHARS_PER_TOKEN = 4.0
# Rows whose real prompt the estimate is made from.
ESTIMATE_ROWS = 5


def variant_settings(
    config: ClassifyConfig, environ: Mapping[str, str], *, where: str = "config"
) -> ChatSettings:
    """The checked settings of a chat variant's config (``environ``: where the calls run).

    Raises
    ------
    InputError
        Naming the field: no model, ``apiKeyEnv`` unset in ``environ``, a negative price,
        trials outside 1..20, an ``llmLevel`` not in ``models``...
    """
    raw = config.to_json()
    models = config.models or {}
    if config.llm_level is not None:
        if config.llm_level not in models:
            raise InputError(
                f"{where}.llmLevel",
                config.llm_level,
                f"is not in {where}.models ({sorted(models)}): the chat classifier takes the "
                "model of the level from that table",
            )
        raw = {**raw, "options": {**config.options, "model": models[config.llm_level]}}
    return parse_chat_settings(raw, environ, where=where)


def estimate_call_tokens(messages: Sequence[tuple[str, str]]) -> int:
    """Input tokens of one call, estimated as ``ceil(characters / 4)`` of its messages."""
    return math.ceil(sum(len(content) for _, content in messages) / CHARS_PER_TOKEN)


@dataclasses.dataclass(frozen=True)
class ChatEstimate(JsonResult):
    """What a chat variant is expected to spend: ``calls`` (records x trials) of
    ``input_tokens_per_call`` (mean over ``sampled_rows`` real prompts, chars/4) plus the answer
    budget ``output_tokens_per_call`` (``maxTokens``); ``cost`` from the price table, None with
    ``cost_reason`` when the model has no price."""

    model: str
    records: int
    trials: int
    calls: int
    sampled_rows: int
    input_tokens_per_call: int
    output_tokens_per_call: int
    input_tokens: int
    output_tokens: int
    tokens: int
    cost: float | None
    cost_reason: str | None
    method: str = "prompt characters / 4 of sampled rows, plus maxTokens per answer"


def estimate_variant(
    settings: ChatSettings, prompts: Sequence[Sequence[tuple[str, str]]], records: int
) -> ChatEstimate:
    """The estimate from the messages of a few sampled rows (``prompts``) for ``records``
    records asked ``settings.trials`` times each."""
    if not prompts:
        raise ValueError("the estimate needs the prompt of at least one sampled row")
    per_call = math.ceil(sum(estimate_call_tokens(p) for p in prompts) / len(prompts))
    calls = records * settings.trials
    input_tokens, output_tokens = calls * per_call, calls * settings.max_tokens
    cost = call_cost(settings.prices, settings.model, input_tokens, output_tokens)
    return ChatEstimate(
        model=settings.model,
        records=records,
        trials=settings.trials,
        calls=calls,
        sampled_rows=len(prompts),
        input_tokens_per_call=per_call,
        output_tokens_per_call=settings.max_tokens,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        tokens=input_tokens + output_tokens,
        cost=cost,
        cost_reason=None if cost is not None else no_price_reason(settings),
    )


def no_price_reason(settings: ChatSettings) -> str:
    return f"model {settings.model!r} has no price in the config's prices table"
