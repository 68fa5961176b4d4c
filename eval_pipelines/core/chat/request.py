"""The canonical chat request and its cache key, and the classification prompt.

A request is everything that decides the answer: the endpoint, the model, the messages, the
sampling parameters, the response format and the trial number (trials of the same prompt are
distinct calls with distinct keys, so a repeated trial is a new draw, not a cache hit). The
key is the sha256 of the request as canonical JSON (sorted keys, no spaces), so the same call
made by any process finds the same cached answer, and a change to any of these misses.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from eval_pipelines.core.chat.settings import ChatSettings

DEFAULT_SYSTEM_PROMPT = (
    "You classify a record into exactly one of the candidate codes listed. Answer with a JSON "
    'object only: {"code": "<one candidate code>", "confidence": <a number from 0 to 1>}.'
)

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "classification",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            },
            "required": ["code", "confidence"],
            "additionalProperties": False,
        },
    },
}


JSON_OBJECT: dict[str, Any] = {"type": "json_object"}
# The schema inside a json_object format: llama-cpp-python's server's form (docs/models.md).
JSON_OBJECT_SCHEMA: dict[str, Any] = {
    "type": "json_object",
    "schema": ANSWER_SCHEMA["json_schema"]["schema"],
}
FROM_SETTINGS = "settings"


def answer_format(settings: ChatSettings) -> dict[str, Any] | None:
    """The ``response_format`` the settings ask for: the answer's JSON schema (default), any
    JSON object (endpoints without schemas), a JSON object with the schema inside (the form
    llama-cpp-python's server takes), or none (endpoints that refuse the field)."""
    return {
        "json_schema": ANSWER_SCHEMA,
        "json_object": JSON_OBJECT,
        "json_object_schema": JSON_OBJECT_SCHEMA,
    }.get(settings.response_format)


@dataclasses.dataclass(frozen=True)
class ChatRequest:
    """One call to make (or to find in the cache)."""

    endpoint: str
    model: str
    messages: tuple[tuple[str, str], ...]
    parameters: tuple[tuple[str, Any], ...]
    response_format: str | None
    trial: int

    def canonical(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "model": self.model,
            "messages": [{"role": role, "content": content} for role, content in self.messages],
            "parameters": dict(self.parameters),
            "responseFormat": None
            if self.response_format is None
            else json.loads(self.response_format),
            "trial": self.trial,
        }

    @property
    def key(self) -> str:
        """sha256 of the canonical request: endpoint, model, messages, parameters, response
        format and trial number."""
        text = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def prompt(self) -> str:
        return "\n".join(content for _, content in self.messages)

    def create_arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``client.chat.completions.create`` for this request."""
        arguments: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": role, "content": content} for role, content in self.messages],
            **dict(self.parameters),
        }
        if self.response_format is not None:
            arguments["response_format"] = json.loads(self.response_format)
        return arguments


def build_request(
    settings: ChatSettings,
    messages: Sequence[tuple[str, str]],
    *,
    trial: int = 1,
    response_format: Mapping[str, Any] | None | str = FROM_SETTINGS,
) -> ChatRequest:
    """The request of ``messages`` (``(role, content)`` pairs) under ``settings``, with
    ``response_format`` (default: :func:`answer_format` of the settings; None: none)."""
    if isinstance(response_format, str):
        response_format = answer_format(settings)
    if not 1 <= trial <= settings.trials:
        raise ValueError(f"trial={trial}: the settings have trials 1..{settings.trials}")
    parameters: dict[str, Any] = {
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
    }
    if settings.seed is not None:
        parameters["seed"] = settings.seed
    return ChatRequest(
        endpoint=settings.endpoint,
        model=settings.model,
        messages=tuple((role, content) for role, content in messages),
        parameters=tuple(sorted(parameters.items())),
        response_format=None
        if response_format is None
        else json.dumps(response_format, sort_keys=True, separators=(",", ":")),
        trial=trial,
    )


def classification_prompt(
    record_text: str, candidates: Sequence[tuple[str, str]], instructions: Sequence[str] = ()
) -> str:
    """The user message: the instructions in force, the candidates (``- CODE: title`` lines
    after ``Candidates:``) and the record's text after ``Record:``."""
    lines: list[str] = []
    if instructions:
        lines.append("Instructions:")
        lines.extend(f"- {instruction}" for instruction in instructions)
        lines.append("")
    lines.append("Candidates:")
    lines.extend(f"- {code}: {title}" for code, title in candidates)
    lines.append("")
    lines.append("Record:")
    lines.append(record_text)
    return "\n".join(lines)


def classification_messages(
    settings: ChatSettings,
    record_text: str,
    candidates: Sequence[tuple[str, str]],
    instructions: Sequence[str] = (),
) -> list[tuple[str, str]]:
    """System message (the settings' ``prompt`` or the default) and the user message."""
    return [
        ("system", settings.prompt or DEFAULT_SYSTEM_PROMPT),
        ("user", classification_prompt(record_text, candidates, instructions)),
    ]
