"""The chat stand-in's answers: a deterministic function of the prompt, so a test knows them in
advance.

- the prompt (all message contents, joined) lists the candidates as lines ``- CODE: title``
  after a line ``Candidates:``, and the record after a line ``Record:`` (the layout
  :func:`eval_pipelines.core.chat.request.classification_prompt` writes);
- the answer is the JSON object ``{"code": C, "confidence": p}`` where ``C`` is the candidate
  whose title shares the most distinct lower-cased words (``\\w+``) with the record text (the
  first listed wins a tie; with no candidates the code is ``""``), and ``p`` is the number of
  shared words over the number of distinct words in that title (0 when it shares none);
- tokens are counted as whitespace-separated words: ``prompt_tokens`` over every message's
  content, ``completion_tokens`` over the answer's content.

An extraction prompt (a line ``Fields:`` followed by ``- key (type): display name`` lines, a
table's columns indented under it, and the document after a line ``Document:``: the layout
:func:`eval_pipelines.core.workflows.chat_extract.extraction_prompt` writes) is answered by
:func:`extract`'s documented rule instead: one JSON object with every field's key, each value
read from the document's text by its display name (null when not found), each table's rows
read under the line that holds its columns' names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

WORD = re.compile(r"\w+")
CANDIDATE_LINE = re.compile(r"^- (?P<code>[^:\s]+): ?(?P<title>.*)$")
FIELD_LINE = re.compile(r"^(?P<indent>\s*)- (?P<key>\S+) \((?P<type>[^)]*)\): ?(?P<name>.*)$")
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")
CELL_SEPARATOR = re.compile(r"\s{2,}")


def words(text: str) -> list[str]:
    return text.split()


def parse_prompt(prompt: str) -> tuple[list[tuple[str, str]], str]:
    """``([(code, title), ...], record_text)`` read from a prompt laid out as documented."""
    candidates: list[tuple[str, str]] = []
    record: list[str] = []
    section = None
    for line in prompt.splitlines():
        stripped = line.strip()
        if stripped == "Candidates:":
            section = "candidates"
            continue
        if stripped == "Record:":
            section = "record"
            continue
        if section == "candidates":
            found = CANDIDATE_LINE.match(stripped)
            if found:
                candidates.append((found["code"], found["title"]))
            elif stripped:
                section = None
        elif section == "record":
            record.append(line)
    return candidates, "\n".join(record).strip()


def choose(prompt: str) -> dict[str, Any]:
    """The stand-in's answer to ``prompt``: the documented word-overlap rule."""
    candidates, record = parse_prompt(prompt)
    record_words = {word.lower() for word in WORD.findall(record)}
    best_code, best_shared, best_size = "", -1, 1
    for code, title in candidates:
        title_words = {word.lower() for word in WORD.findall(title)}
        shared = len(title_words & record_words)
        if shared > best_shared:
            best_code, best_shared, best_size = code, shared, max(1, len(title_words))
    confidence = round(max(0, best_shared) / best_size, 4)
    return {"code": best_code, "confidence": confidence}


@dataclass(frozen=True)
class _Wanted:
    key: str
    kind: str  # the prompt's type word: text, number, date ..., true/false, table
    name: str
    columns: list[_Wanted] = field(default_factory=list)


def parse_extraction_prompt(prompt: str) -> tuple[list[_Wanted], str] | None:
    """``(fields, document text)`` of an extraction prompt; None when it is not one."""
    lines = prompt.splitlines()
    stripped = [line.strip() for line in lines]
    if "Fields:" not in stripped or "Document:" not in stripped:
        return None
    start, document_at = stripped.index("Fields:"), stripped.index("Document:")
    fields: list[_Wanted] = []
    for line in lines[start + 1 : document_at]:
        found = FIELD_LINE.fullmatch(line)
        if found is None:
            continue
        wanted = _Wanted(found["key"], found["type"], found["name"].strip())
        if found["indent"] and fields and fields[-1].kind == "table":
            fields[-1].columns.append(wanted)
        else:
            fields.append(wanted)
    return fields, "\n".join(lines[document_at + 1 :])


def _typed(text: str | None, kind: str) -> Any:
    if text is None:
        return None
    text = text.strip()
    if kind == "number":
        numbers = NUMBER.findall(text)
        if not numbers:
            return None
        value = numbers[-1].replace(",", "")
        return float(value) if "." in value else int(value)
    if kind == "true/false":
        return {"yes": True, "true": True, "no": False, "false": False}.get(text.lower())
    return text or None


def _header_value(name: str, lines: list[str]) -> str | None:
    pattern = re.compile(rf"{re.escape(name)}[.:]?\s+(?P<value>\S.*)", re.IGNORECASE)
    for line in lines:
        found = pattern.fullmatch(line.strip())
        if found:
            return found["value"]
    return None


def _table_rows(columns: list[_Wanted], lines: list[str]) -> list[dict[str, Any]]:
    heading = re.compile(
        r"\s*" + r"\s+".join(re.escape(c.name) for c in columns) + r"\s*", re.IGNORECASE
    )
    for at, line in enumerate(lines):
        if columns and heading.fullmatch(line):
            rows = []
            for row_line in lines[at + 1 :]:
                cells = CELL_SEPARATOR.split(row_line.strip())
                if len(cells) != len(columns):
                    break
                rows.append(
                    {c.key: _typed(cell, c.kind) for c, cell in zip(columns, cells, strict=True)}
                )
            return rows
    return []


def extract(prompt: str) -> dict[str, Any] | None:
    """The stand-in's answer to an extraction prompt (None: not one), by this rule:

    - a header field's value is what follows its display name (case-insensitive) on the
      first document line that starts with it, after an optional ``.`` or ``:`` and spaces
      (``Invoice no. HLP-1001`` for the name ``Invoice no``); a ``number`` is the last number
      in it (``,`` thousands separators dropped; an integer without a ``.``), a ``true/false``
      is yes/true/no/false; null when no line starts with the name;
    - a table's rows are the lines after the first line made of exactly its columns' display
      names in order (separated by spaces), each split at runs of two or more spaces into as
      many cells as there are columns, typed the same way; the first line that does not split
      so ends the table (no heading line: no rows).
    """
    parsed = parse_extraction_prompt(prompt)
    if parsed is None:
        return None
    fields, document = parsed
    lines = document.splitlines()
    return {
        f.key: _table_rows(f.columns, lines)
        if f.kind == "table"
        else _typed(_header_value(f.name, lines), f.kind)
        for f in fields
    }


def completion(model: str, content: str, prompt: str, number: int) -> dict[str, Any]:
    prompt_tokens = len(words(prompt))
    completion_tokens = len(words(content))
    return {
        "id": f"chatcmpl-standin-{number}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
