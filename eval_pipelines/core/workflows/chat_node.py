"""The ``chat`` extract node: a model behind any OpenAI-compatible Chat Completions endpoint
reads the document and answers the node's fields as JSON.

Configuration (the node mapping besides ``id``, ``type``, ``cost``, ``schema``), the keys of
a ``chat`` variant's config (see :mod:`eval_pipelines.core.chat.settings`)::

    options: {model: m-small, baseUrl: "http://127.0.0.1:8199/v1", apiKeyEnv: MY_KEY,
              temperature: 0, maxTokens: 1024, seed: 7, prompt: "...", timeout: 60,
              responseFormat: json_schema}      # or json_object, none
    prices: {m-small: {input: 0.15, output: 0.6}}   # per 1M tokens (optional)
    concurrency: 4                                  # calls in flight per endpoint
    maxRetries: 4

``trials`` is refused (a step runs once per document and is cached). The settings are checked
when the workflow is saved (``apiKeyEnv`` must name a variable set in the saving process's
environment; the key itself is never stored). Preparing adds the node's ``schema`` to its
configuration: the prompt and the answer's JSON schema depend on it, so the step's cache key
covers it.

Running builds one request per document (:mod:`eval_pipelines.core.workflows.chat_extract`: the
fields' names and types and the document's text; ``response_format`` the schema's JSON schema)
and hands it to the run's ``call_chat`` (:class:`~eval_pipelines.core.workflows.nodes.StepContext`),
which answers from the warehouse's ``chat_calls`` cache or from the endpoint. The step runs
in the run's thread (no worker process: it waits on the network, not the CPU); the endpoint's
``timeout`` and ``maxRetries`` bound it. A call that fails (endpoint down, HTTP errors after
the retries, time-outs) fails the step without caching it, so the next run tries again; an
answer that does not parse against the schema fails it with its reason, cached like an output
(the same answer is in the chat cache: it would fail the same way).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eval_pipelines.core.chat.request import build_request
from eval_pipelines.core.chat.settings import (
    NODE_MAX_TOKENS,
    ChatSettings,
    parse_node_chat_settings,
)
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.workflows.chat_extract import (
    extraction_format,
    extraction_messages,
    parse_extraction,
)
from eval_pipelines.core.workflows.nodes import Document, NodeFailed, StepContext, StepUsage
from eval_pipelines.core.workflows.schema import Schema, parse_schema
from eval_pipelines.core.workflows.step_worker import StepCanceled, cancel_event


class ChatNode:
    """Node type ``chat``; ``environ`` is where ``apiKeyEnv`` is looked up (default: this
    process's environment, read at each call)."""

    uses_schema = True

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = environ

    def _environment(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def prepare(self, config: dict[str, Any], where: str, base_dir: Path) -> dict[str, Any]:
        settings_config = {k: v for k, v in config.items() if k != "schema"}
        parse_node_chat_settings(settings_config, self._environment(), where=where)
        if "options" in settings_config and "maxTokens" not in settings_config["options"]:
            # Pinned: a later change of the default must not change this revision's requests.
            settings_config["options"] = {
                **settings_config["options"],
                "maxTokens": NODE_MAX_TOKENS,
            }
        if not isinstance(config.get("schema"), list):
            raise InputError(f"{where}.schema", config.get("schema"), "a chat node needs a schema")
        return {**settings_config, "schema": config["schema"]}

    def run(
        self, config: dict[str, Any], document: Document, upstream: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, Any]:
        return self.run_metered(config, document, upstream, StepContext())[0]

    def run_metered(
        self,
        config: dict[str, Any],
        document: Document,
        upstream: Mapping[str, Mapping[str, Any]],
        context: StepContext,
    ) -> tuple[dict[str, Any], StepUsage]:
        settings, schema = self._settings(config)
        if context.call_chat is None:
            raise NodeFailed(
                "a chat node calls its model through a run's chat cache; run it in a golden "
                "run or a test run",
                cacheable=False,
            )
        request = build_request(
            settings,
            extraction_messages(settings, document.text, schema),
            response_format=extraction_format(settings, schema),
        )
        stop = cancel_event()
        result = context.call_chat(settings, [request], stop)
        answer = result.answers[0]
        usage = usage_of(settings, result.counters)
        if answer.failure is not None:
            if stop is not None and stop.is_set():
                raise StepCanceled("canceled while calling the model")
            raise NodeFailed(
                f"the chat call failed: {answer.failure}", cacheable=False, usage=usage
            )
        parsed = parse_extraction(answer.content, schema)
        if parsed.output is None:
            raise NodeFailed(f"the model's answer was refused: {parsed.failure}", usage=usage)
        return parsed.output, usage

    def _settings(self, config: dict[str, Any]) -> tuple[ChatSettings, Schema]:
        settings_config = {k: v for k, v in config.items() if k != "schema"}
        try:
            settings = parse_node_chat_settings(settings_config, self._environment(), where="node")
        except InputError as error:
            # The revision was checked when saved: what fails now is this process's
            # environment (the key's variable unset where the run executes).
            raise NodeFailed(f"{error} (where the step runs)", cacheable=False) from None
        return settings, parse_schema({"fields": config["schema"]}, "node.schema")


def usage_of(settings: ChatSettings, counters: Any) -> StepUsage:
    """A step's usage from the counters of its calls; the cost of calls made now is None
    when the model has no price (of calls from cache: nothing, so 0)."""
    cost = counters.cost if counters.answered else 0.0
    note = (
        None
        if cost is not None
        else f"no price for model {settings.model} in the node's prices: cost unknown"
    )
    return StepUsage(
        counters.answered,
        counters.from_cache,
        counters.failed,
        counters.input_tokens,
        counters.output_tokens,
        cost,
        note,
    )
