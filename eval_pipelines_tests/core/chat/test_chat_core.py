"""The pure chat core: settings refused naming the field, the cache key, strict answers, cost."""

from __future__ import annotations

from typing import Any

import pytest

from eval_pipelines.core.chat.answer import failure_cause, parse_answer
from eval_pipelines.core.chat.cost import call_cost
from eval_pipelines.core.chat.request import build_request, classification_messages
from eval_pipelines.core.chat.settings import ModelPrice, api_key, parse_chat_settings
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout.chat_classify import failure_causes

ENV = {"MY_KEY": "sk-secret"}


def _config(**changes: Any) -> dict[str, Any]:
    options = {"model": "m1", "baseUrl": "http://127.0.0.1:9/v1", "apiKeyEnv": "MY_KEY"}
    config: dict[str, Any] = {"options": options, "prices": {"m1": {"input": 1, "output": 4}}}
    for name, value in changes.items():
        if name in {
            "model",
            "baseUrl",
            "apiKeyEnv",
            "temperature",
            "maxTokens",
            "seed",
            "responseFormat",
        }:
            if value is None:
                options.pop(name)
            else:
                options[name] = value
        else:
            config[name] = value
    return config


def test_defaults_and_the_key_is_not_in_the_settings() -> None:
    settings = parse_chat_settings(_config(), ENV)
    assert (settings.trials, settings.concurrency, settings.max_retries) == (1, 4, 4)
    assert settings.prices == {"m1": ModelPrice(1.0, 4.0)}
    assert "sk-secret" not in repr(settings) and "sk-secret" not in str(settings.to_json())
    assert api_key(settings, ENV) == "sk-secret"
    assert parse_chat_settings(_config(maxRetries=0), ENV).max_retries == 0
    # the variable checked again where the calls run (another process may lack it)
    with pytest.raises(InputError) as raised:
        api_key(settings, {})
    assert raised.value.field == "config.options.apiKeyEnv" and raised.value.value == "MY_KEY"


def test_the_response_format_follows_the_settings() -> None:
    messages = [("user", "x")]
    schema = build_request(parse_chat_settings(_config(), ENV), messages)
    assert schema.create_arguments()["response_format"]["type"] == "json_schema"
    loose = build_request(parse_chat_settings(_config(responseFormat="json_object"), ENV), messages)
    assert loose.create_arguments()["response_format"] == {"type": "json_object"}
    inside = build_request(
        parse_chat_settings(_config(responseFormat="json_object_schema"), ENV), messages
    )
    # llama-cpp-python's server: the schema inside a json_object format
    assert inside.create_arguments()["response_format"] == {
        "type": "json_object",
        "schema": schema.create_arguments()["response_format"]["json_schema"]["schema"],
    }
    bare = build_request(parse_chat_settings(_config(responseFormat="none"), ENV), messages)
    assert "response_format" not in bare.create_arguments()
    assert len({schema.key, loose.key, inside.key, bare.key}) == 4


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"model": None}, "config.options.model"),
        ({"baseUrl": "127.0.0.1:9"}, "config.options.baseUrl"),
        ({"baseUrl": "http://127.0.0.1:9/v1\n"}, "config.options.baseUrl"),
        ({"baseUrl": "http://127.0.0.1:9/v 1"}, "config.options.baseUrl"),
        ({"apiKeyEnv": "UNSET_VARIABLE"}, "config.options.apiKeyEnv"),
        ({"prices": {"m1": {"input": -1, "output": 4}}}, "config.prices.m1.input"),
        ({"prices": {"m1": {"input": 1}}}, "config.prices.m1"),
        ({"trials": 0}, "config.trials"),
        ({"trials": 21}, "config.trials"),
        ({"trials": True}, "config.trials"),
        ({"concurrency": 0}, "config.concurrency"),
        ({"maxRetries": -1}, "config.maxRetries"),
        ({"temperature": float("nan")}, "config.options.temperature"),
        ({"maxTokens": 0}, "config.options.maxTokens"),
        ({"responseFormat": "xml"}, "config.options.responseFormat"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as raised:
        parse_chat_settings(_config(**changes), ENV)
    assert raised.value.field == field


def test_an_unknown_option_is_refused() -> None:
    config = _config()
    config["options"]["modle"] = "m2"
    with pytest.raises(InputError, match="known: model"):
        parse_chat_settings(config, ENV)


def test_the_cache_key_changes_with_everything_that_decides_the_answer() -> None:
    settings = parse_chat_settings(_config(trials=3), ENV)
    messages = classification_messages(settings, "a shop", [("47.1", "Retail")], ["be brief"])
    base = build_request(settings, messages, trial=1)
    assert base.key == build_request(settings, list(messages), trial=1).key
    others = [
        build_request(settings, messages, trial=2),
        build_request(settings, messages[:1], trial=1),
        build_request(settings, messages, trial=1, response_format=None),
        build_request(parse_chat_settings(_config(trials=3, model="m2"), ENV), messages),
        build_request(parse_chat_settings(_config(trials=3, temperature=0.5), ENV), messages),
        build_request(parse_chat_settings(_config(trials=3, seed=7), ENV), messages),
        build_request(
            parse_chat_settings(_config(trials=3, baseUrl="http://127.0.0.1:10/v1"), ENV),
            messages,
        ),
    ]
    assert len({base.key, *(other.key for other in others)}) == 1 + len(others)
    # the key ignores a trailing slash of the base URL and never holds the API key
    slash = parse_chat_settings(_config(trials=3, baseUrl="http://127.0.0.1:9/v1/"), ENV)
    assert build_request(slash, messages).key == base.key
    assert "sk-secret" not in str(base.canonical())
    with pytest.raises(ValueError, match="trial=4"):
        build_request(settings, messages, trial=4)


@pytest.mark.parametrize(
    ("content", "reason", "cause"),
    [
        (None, "empty answer", "empty answer"),
        ('{"code": "A", "confidence":', "not JSON", "answer is not JSON"),
        ('["A"]', "not a JSON object", "answer is not a JSON object"),
        (
            '{"code": "A", "confidence": 0.5, "why": "x"}',
            "unexpected keys: ['why']",
            "answer has unexpected keys",
        ),
        (
            '{"code": 3, "confidence": 0.5}',
            "code is not a non-empty string",
            "answer's code is not a non-empty string",
        ),
        (
            '{"code": "A", "confidence": 1.5}',
            "confidence is not a number in [0, 1]",
            "answer's confidence is not a number in [0, 1]",
        ),
        (
            '{"code": "A", "confidence": true}',
            "confidence is not a number",
            "answer's confidence is not a number in [0, 1]",
        ),
        (
            '{"code": "A", "confidence": NaN}',
            "confidence is not a number",
            "answer's confidence is not a number in [0, 1]",
        ),
        (
            '{"code": "Z", "confidence": 0.5}',
            "is not among the codes allowed: 'Z'",
            "answer's code is not among the codes allowed",
        ),
    ],
)
def test_answers_are_parsed_strictly(content: str | None, reason: str, cause: str) -> None:
    parsed = parse_answer(content, allowed={"A", "B"})
    assert not parsed.ok and reason in (parsed.failure or "")
    # the cause leaves out what varies from answer to answer
    assert failure_cause(parsed.failure or "") == cause


def test_a_json_error_says_where_it_is_once() -> None:
    content = '{"code": "A\n", "confidence": 0.5}'
    assert parse_answer(content).failure == (
        f"answer is not JSON (Invalid control character at char 11): {content!r}"
    )
    cut = '{"code": "A", "confidence":'
    assert parse_answer(cut).failure == f"answer is not JSON (Expecting value at char 27): {cut!r}"


@pytest.mark.parametrize(
    ("reason", "cause"),
    [
        ("answer's code is not in the code tree: 'Z99'", "answer's code is not in the code tree"),
        (
            "HTTP 500 from the endpoint: internal error (after 5 attempts)",
            "HTTP 500 from the endpoint",
        ),
        (
            "HTTP 429 from the endpoint: slow down (Retry-After 300 s is more than 120 s)",
            "HTTP 429 from the endpoint",
        ),
        (
            "the endpoint did not answer within the timeout (after 1 attempt)",
            "the endpoint did not answer within the timeout",
        ),
        (
            "endpoint unreachable: connection refused at http://127.0.0.1:9/v1",
            "endpoint unreachable",
        ),
        (
            "connection lost before an answer: Server disconnected (after 2 attempts)",
            "connection lost before an answer",
        ),
        ("stopped before the call was made", "stopped before the call was made"),
    ],
)
def test_the_cause_of_a_failed_call_leaves_its_details_out(reason: str, cause: str) -> None:
    assert failure_cause(reason) == cause


def test_failed_rows_are_grouped_by_cause_with_every_cause_shown() -> None:
    errors = [
        'answer is not JSON (Expecting value at char 33): \'{"code": "D75.821", "confidence":\'',
        "answer's code is not in the code tree: 'X1'",
        'answer is not JSON (Expecting value at char 32): \'{"code": "D78.21", "confidence":\'',
        "HTTP 500 from the endpoint: internal error (after 1 attempt)",
        "answer's code is not in the code tree: 'X2'",
        "answer is not JSON (Expecting ',' delimiter at char 12): '{\"code\": \"A\" x'",
        "answer has unexpected keys: ['why']",
        "answer's code is not a non-empty string: 3",
        "the endpoint did not answer within the timeout (after 5 attempts)",
    ]
    assert failure_causes(errors) == [
        {"cause": "answer is not JSON", "rows": 3, "example": errors[0]},
        {"cause": "answer's code is not in the code tree", "rows": 2, "example": errors[1]},
        {"cause": "HTTP 500 from the endpoint", "rows": 1, "example": errors[3]},
        {"cause": "answer has unexpected keys", "rows": 1, "example": errors[6]},
        {"cause": "answer's code is not a non-empty string", "rows": 1, "example": errors[7]},
        {
            "cause": "the endpoint did not answer within the timeout",
            "rows": 1,
            "example": errors[8],
        },
    ]
    assert failure_causes([]) == []


def test_a_missing_model_is_refused_in_the_words_of_the_chat_classifier() -> None:
    with pytest.raises(InputError) as refused:
        parse_chat_settings(_config(model=None), ENV, where="variant chat.config")
    assert str(refused.value) == (
        "variant chat.config.options.model=None: the chat classifier needs the model's name"
    )


def test_a_good_answer() -> None:
    parsed = parse_answer('{"code": "A", "confidence": 1}', allowed={"A"})
    assert (parsed.ok, parsed.code, parsed.confidence) == (True, "A", 1.0)


def test_cost_from_the_price_table_and_none_without_a_price() -> None:
    prices = {"m1": ModelPrice(1.0, 4.0)}
    # 1000 input tokens at 1 per 1M + 200 output tokens at 4 per 1M
    assert call_cost(prices, "m1", 1000, 200) == pytest.approx(0.0018, rel=1e-12)
    assert call_cost(prices, "m2", 1000, 200) is None


def test_an_extraction_can_send_its_schema_inside_a_json_object_format() -> None:
    """``json_object_schema`` (llama-cpp-python's server refuses ``json_schema``): the node's
    answer schema is sent as ``{"type": "json_object", "schema": ...}``."""
    from eval_pipelines.core.workflows.chat_extract import extraction_format, extraction_json_schema
    from eval_pipelines.core.workflows.schema import parse_schema

    schema = parse_schema(
        {"fields": [{"id": "total", "name": "Total", "type": "number", "source": "total"}]}, "s"
    )
    settings = parse_chat_settings(_config(responseFormat="json_object_schema"), ENV)
    assert extraction_format(settings, schema) == {
        "type": "json_object",
        "schema": extraction_json_schema(schema),
    }
    assert extraction_json_schema(schema)["required"] == ["total"]


def test_a_chat_variant_takes_its_model_from_the_llm_level_table() -> None:
    from eval_pipelines.core.errors import InputError
    from eval_pipelines.core.holdout.chat_estimate import estimate_call_tokens, variant_settings
    from eval_pipelines.core.holdout.classify_config import parse_config

    raw = {
        "classifier": "chat",
        "llmLevel": "large",
        "models": {"small": "m-small", "large": "m-large"},
        "options": {"baseUrl": "http://127.0.0.1:1/v1"},
    }
    config = parse_config(raw, where="config", max_depth=3)
    assert variant_settings(config, {}).model == "m-large"
    without_level = parse_config({**raw, "llmLevel": None}, where="config", max_depth=3)
    with pytest.raises(InputError, match="config.options.model"):
        variant_settings(without_level, {})
    # prompt characters / 4, rounded up: 9 + 3 characters -> 3 tokens
    assert estimate_call_tokens([("system", "123456789"), ("user", "abc")]) == 3
