"""Strict parsing of a classification answer: a JSON object ``{"code": str, "confidence":
number in [0, 1]}`` and nothing else. Anything else is a failure with its reason (a string a
report can show), never an exception: one bad answer is one failed row.

A reason is its cause, then the details that vary from answer to answer (the answer's text, a
code) after ``: `` or in ``(...)``: :func:`failure_cause` reads the cause back, so a report
groups the rows by cause."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Collection
from typing import Any

from eval_pipelines.core.results import JsonResult


@dataclasses.dataclass(frozen=True)
class ParsedAnswer(JsonResult):
    """``code`` and ``confidence`` of a good answer, or ``failure``: why there is none."""

    code: str | None
    confidence: float | None
    failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


def _failed(reason: str) -> ParsedAnswer:
    return ParsedAnswer(None, None, reason)


def json_object_of(content: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """``(object, None)`` when ``content`` is a JSON object, else ``(None, why not)``: the
    first check of every model answer (classification and extraction alike)."""
    if content is None or not content.strip():
        return None, "empty answer"
    try:
        value = json.loads(content)
    except json.JSONDecodeError as error:
        # Some of json's messages end in "at" themselves ("Invalid control character at").
        where = error.msg.removesuffix(" at")
        return None, f"answer is not JSON ({where} at char {error.pos}): {content[:80]!r}"
    if not isinstance(value, dict):
        return None, f"answer is not a JSON object: {content[:80]!r}"
    return value, None


def parse_answer(content: str | None, *, allowed: Collection[str] | None = None) -> ParsedAnswer:
    """The answer in ``content``; with ``allowed``, a code outside it is a failure."""
    value, problem = json_object_of(content)
    if value is None:
        return _failed(problem or "empty answer")
    extra = sorted(set(value) - {"code", "confidence"})
    if extra:
        return _failed(f"answer has unexpected keys: {extra}")
    code, confidence = value.get("code"), value.get("confidence")
    if not isinstance(code, str) or not code:
        return _failed(f"answer's code is not a non-empty string: {code!r}")
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not math.isfinite(confidence)
        or not 0 <= confidence <= 1
    ):
        return _failed(f"answer's confidence is not a number in [0, 1]: {confidence!r}")
    if allowed is not None and code not in allowed:
        return _failed(f"answer's code is not among the codes allowed: {code!r}")
    return ParsedAnswer(code, float(confidence))


def failure_cause(reason: str) -> str:
    """The cause of a failure ``reason``: the text before its first ``: `` or `` (`` (``answer
    is not JSON``, ``HTTP 500 from the endpoint``), the same for every row failed that way."""
    cuts = [at for at in (reason.find(": "), reason.find(" (")) if at > 0]
    return reason[: min(cuts)] if cuts else reason
