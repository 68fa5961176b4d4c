"""The settings of a ``chat`` variant, read once from its config and checked.

A variant's ``config`` holds the endpoint settings in ``options`` (``model``, ``baseUrl``,
``apiKeyEnv``, ``temperature``, ``maxTokens``, ``seed``, ``prompt``, ``timeout``,
``responseFormat``) and beside
them ``prices`` (per model, the price of 1M input and 1M output tokens), ``trials`` (1..20),
``concurrency`` (calls in flight per endpoint, default 4) and ``maxRetries`` (default 4, 0
allowed). Each bad value is refused as an :class:`InputError` naming its path in the config.

The API key is never part of the settings: ``apiKeyEnv`` names the environment variable that
holds it, and the environment is an argument (the caller at the API boundary passes
``os.environ``), so the rule that the variable must be set is checked here without I/O.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.inputs import is_finite_number
from eval_pipelines.core.results import JsonResult

OPTION_KEYS = (
    "model",
    "baseUrl",
    "apiKeyEnv",
    "temperature",
    "maxTokens",
    "seed",
    "prompt",
    "timeout",
    "responseFormat",
)
# json_object_schema: {"type": "json_object", "schema": ...}, the form llama-cpp-python's server
# takes (it refuses "json_schema" and turns the schema into a grammar).
RESPONSE_FORMATS = ("json_schema", "json_object", "json_object_schema", "none")
TRIALS_MAX = 20
CONCURRENCY_MAX = 64
RETRIES_MAX = 20
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclasses.dataclass(frozen=True)
class ModelPrice(JsonResult):
    """What 1M tokens cost, in the price table's currency."""

    input_per_million: float
    output_per_million: float


@dataclasses.dataclass(frozen=True)
class ChatSettings(JsonResult):
    """Checked settings of one ``chat`` variant (no secret in here: only the variable's name)."""

    model: str
    base_url: str
    api_key_env: str | None = None
    temperature: float = 0.0
    max_tokens: int = 64
    seed: int | None = None
    prompt: str | None = None
    timeout: float = 60.0
    response_format: str = "json_schema"
    prices: Mapping[str, ModelPrice] = dataclasses.field(default_factory=dict)
    trials: int = 1
    concurrency: int = 4
    max_retries: int = 4

    @property
    def endpoint(self) -> str:
        """The base URL as the cache keys it (no trailing slash)."""
        return self.base_url.rstrip("/")


def _integer(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InputError(field, value, f"must be a whole number from {low} to {high}")
    return value


def _number(value: Any, field: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not is_finite_number(value) or not low <= value <= high:
        raise InputError(field, value, f"must be a number from {low:g} to {high:g}")
    return float(value)


def parse_prices(raw: Any, where: str) -> dict[str, ModelPrice]:
    """A price table (model -> ``{input, output}`` per 1M tokens), each value checked."""
    if not isinstance(raw, Mapping):
        raise InputError(
            where, raw, "must map a model name to {input, output} prices per 1M tokens"
        )
    prices = {}
    for model, entry in raw.items():
        field = f"{where}.{model}"
        if not isinstance(entry, Mapping) or set(entry) != {"input", "output"}:
            raise InputError(field, entry, "must be {input, output}: prices per 1M tokens")
        values = []
        for side in ("input", "output"):
            value = entry[side]
            if isinstance(value, bool) or not is_finite_number(value) or value < 0:
                raise InputError(f"{field}.{side}", value, "a price is a finite number >= 0")
            values.append(float(value))
        prices[str(model)] = ModelPrice(values[0], values[1])
    return prices


def parse_chat_settings(
    config: Mapping[str, Any],
    environ: Mapping[str, str],
    *,
    where: str = "config",
    model_rule: str = "the chat classifier needs the model's name",
) -> ChatSettings:
    """The settings of ``config`` checked (``environ``: the environment the calls will run in;
    ``model_rule``: what the error says when the model is missing, in the caller's words).

    Raises
    ------
    InputError
        Naming the first bad field: ``{where}.options.model`` missing, ``apiKeyEnv`` naming a
        variable unset (or empty) in ``environ``, a negative price, ``trials`` outside 1..20...
    """
    options = config.get("options", {})
    if not isinstance(options, Mapping):
        raise InputError(f"{where}.options", options, "must be a JSON object")
    at = f"{where}.options"
    unknown = sorted(set(options) - set(OPTION_KEYS))
    if unknown:
        raise InputError(
            f"{at}.{unknown[0]}", options[unknown[0]], f"known: {', '.join(OPTION_KEYS)}"
        )
    model = options.get("model")
    if not isinstance(model, str) or not model.strip():
        raise InputError(f"{at}.model", model, model_rule)
    base_url = options.get("baseUrl")
    if not isinstance(base_url, str) or not re.fullmatch(r"https?://[^\s/]+(/\S*)?", base_url):
        raise InputError(
            f"{at}.baseUrl", base_url, "the endpoint's base URL, http(s)://host[:port]/v1"
        )
    key_env = options.get("apiKeyEnv")
    if key_env is not None:
        if not isinstance(key_env, str) or not ENV_NAME.fullmatch(key_env):
            raise InputError(f"{at}.apiKeyEnv", key_env, "the name of an environment variable")
        if not environ.get(key_env):
            raise InputError(
                f"{at}.apiKeyEnv", key_env, "this environment variable is not set (or empty)"
            )
    seed = options.get("seed")
    if seed is not None:
        seed = _integer(seed, f"{at}.seed", 0, 2**63 - 1)
    prompt = options.get("prompt")
    if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
        raise InputError(f"{at}.prompt", prompt, "a non-empty text (the system message)")
    response_format = options.get("responseFormat", "json_schema")
    if response_format not in RESPONSE_FORMATS:
        raise InputError(
            f"{at}.responseFormat",
            response_format,
            f"one of {', '.join(RESPONSE_FORMATS)} (what the endpoint supports)",
        )
    return ChatSettings(
        model=model,
        response_format=response_format,
        base_url=base_url,
        api_key_env=key_env,
        temperature=_number(options.get("temperature", 0.0), f"{at}.temperature", 0.0, 2.0),
        max_tokens=_integer(options.get("maxTokens", 64), f"{at}.maxTokens", 1, 1_000_000),
        seed=seed,
        prompt=prompt,
        timeout=_number(options.get("timeout", 60.0), f"{at}.timeout", 0.001, 3600.0),
        prices=parse_prices(config.get("prices", {}), f"{where}.prices"),
        trials=_integer(config.get("trials", 1), f"{where}.trials", 1, TRIALS_MAX),
        concurrency=_integer(
            config.get("concurrency", 4), f"{where}.concurrency", 1, CONCURRENCY_MAX
        ),
        max_retries=_integer(config.get("maxRetries", 4), f"{where}.maxRetries", 0, RETRIES_MAX),
    )


def api_key(settings: ChatSettings, environ: Mapping[str, str]) -> str | None:
    """The key the settings name, read from ``environ`` (None: the endpoint needs none)."""
    if settings.api_key_env is None:
        return None
    key = environ.get(settings.api_key_env)
    if not key:
        raise InputError(
            "config.options.apiKeyEnv",
            settings.api_key_env,
            "this environment variable is not set (or empty) where the calls run",
        )
    return key


NODE_KEYS = ("options", "prices", "concurrency", "maxRetries")
NODE_MAX_TOKENS = 1024  # an extraction answers with every field: 64 tokens would cut it off


def parse_node_chat_settings(
    config: Mapping[str, Any], environ: Mapping[str, str], *, where: str
) -> ChatSettings:
    """The settings of a workflow's ``chat`` extract node (``config``: the node mapping
    besides ``id``, ``type``, ``cost``, ``schema``): the keys of a chat variant but
    ``trials`` (a step runs once per document and its output is cached: a repeated trial
    would never be made) and ``llmLevel``/``models`` (a node names its model); ``maxTokens``
    defaults to :data:`NODE_MAX_TOKENS`.

    Raises
    ------
    InputError
        Naming the first bad field, as :func:`parse_chat_settings` does; ``{where}.trials``
        and any other key besides ``options``, ``prices``, ``concurrency``, ``maxRetries``.
    """
    if "trials" in config:
        raise InputError(
            f"{where}.trials",
            config["trials"],
            "a workflow node runs once per document (its step is cached); repeated trials "
            "are for holdout variants",
        )
    unknown = sorted(set(config) - set(NODE_KEYS))
    if unknown:
        raise InputError(
            f"{where}.{unknown[0]}", config[unknown[0]], f"known: {', '.join(NODE_KEYS)}"
        )
    options = config.get("options", {})
    if isinstance(options, Mapping) and "maxTokens" not in options:
        config = {**config, "options": {**options, "maxTokens": NODE_MAX_TOKENS}}
    return parse_chat_settings(
        config, environ, where=where, model_rule="a chat node needs the name of the model it calls"
    )
