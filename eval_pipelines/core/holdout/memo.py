"""Memo entries: an instruction text plus a machine rule the built-in classifier executes.

Rule shape (YAML or JSON)::

    id: m_cholera            # optional; derived from the content when absent
    instruction: Cholera titles go to A00 unless the organism is named.
    when:                    # every condition given must hold
      keywords: [cholera]    # any of these words (case-insensitive, whole words)
      regex: "vibrio"        # RE2 regular expression, case-insensitive
      metadata: {source: tabular-2026-inclusion}   # exact match on record metadata
    then:                    # exactly one action
      assign: A00.9          # or prefer: [A00] (boost: 2.0) / exclude: [A01] / decline: true

Regexes run on RE2 (the ``google-re2`` package), which matches in time linear in the text, not
on Python's backtracking ``re``: a memo is user input, and a pattern such as ``^(a+)+$`` takes
exponential time under backtracking, so one record could hang a whole run. RE2 has no
backreferences or lookaround; a regex that uses them, or that RE2 cannot parse, is refused when
the entry is parsed. Keywords are escaped literals matched with ``re``, which cannot backtrack
catastrophically.

The memo version is the hash of the active entries; a variant's memo is the active memo plus
the entries it includes (proposed ones included).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

import re2

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.hashing import hash_json
from eval_pipelines.core.inputs import check_name, is_finite_number, reject_non_finite
from eval_pipelines.core.tree import CodeTree

ACTIONS = ("assign", "prefer", "exclude", "decline")
DEFAULT_BOOST = 2.0
MAX_KEYWORDS = 200


def compile_memo_regex(regex: str) -> Any:
    """Compile a memo ``when.regex`` with RE2, case-insensitive; raises ``re2.error``."""
    options = re2.Options()
    options.case_sensitive = False
    # Compile errors are raised (and reported by parse_memo_entry), not also logged to stderr.
    options.log_errors = False
    return re2.compile(regex, options)


def _re2_message(error: Exception) -> str:
    """RE2's error text; google-re2 raises it as bytes."""
    message = error.args[0] if error.args else error
    return message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)


@dataclass(frozen=True)
class MemoRule:
    """The executable part of a memo entry.

    The compiled patterns are derived from the fields in ``__post_init__``; pickles carry the
    fields only and recompile on load (classify steps receive rules through pickles).
    """

    keywords: tuple[str, ...] = ()
    regex: str | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    action: str = "prefer"
    codes: tuple[str, ...] = ()
    boost: float = DEFAULT_BOOST

    def __post_init__(self) -> None:
        keyword_patterns = tuple(
            re.compile(rf"(?<!\w){re.escape(k)}(?!\w)", re.IGNORECASE) for k in self.keywords
        )
        regex_pattern = compile_memo_regex(self.regex) if self.regex is not None else None
        object.__setattr__(self, "_keyword_patterns", keyword_patterns)
        object.__setattr__(self, "_regex_pattern", regex_pattern)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (type(self), tuple(getattr(self, f.name) for f in fields(self)))

    def matches(self, text: str, metadata: dict[str, Any]) -> bool:
        """True when every condition given holds for this record."""
        keyword_patterns: tuple[re.Pattern[str], ...] = self._keyword_patterns  # type: ignore[attr-defined]
        regex_pattern: Any = self._regex_pattern  # type: ignore[attr-defined]
        if keyword_patterns and not any(p.search(text) for p in keyword_patterns):
            return False
        if regex_pattern is not None and not regex_pattern.search(text):
            return False
        return all(str(metadata.get(key)) == value for key, value in self.metadata)


@dataclass(frozen=True)
class MemoEntry:
    """A memo entry; ``status`` is ``proposed`` until a person approves it (then ``active``)."""

    entry_id: str
    instruction: str
    rule: MemoRule
    status: str = "proposed"
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    def content(self) -> dict[str, Any]:
        """What the memo version hashes: id, instruction, when and then."""
        return {
            "id": self.entry_id,
            "instruction": self.instruction,
            "when": self.raw.get("when", {}),
            "then": self.raw.get("then", {}),
        }


def parse_memo_entry(raw: Any, tree: CodeTree) -> MemoEntry:
    """Validate a memo entry document; codes must exist in the case's tree."""
    if not isinstance(raw, dict):
        raise InputError("memo", raw, "a memo entry is a mapping with instruction, when, then")
    reject_non_finite(raw, "memo")
    unknown = set(raw) - {"id", "instruction", "when", "then"}
    if unknown:
        key = sorted(unknown)[0]
        raise InputError(f"memo.{key}", raw[key], "unknown key; known: id, instruction, when, then")
    instruction = raw.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        raise InputError("memo.instruction", instruction, "every entry needs instruction text")
    when = raw.get("when", {})
    if not isinstance(when, dict):
        raise InputError("memo.when", when, "must be a mapping")
    unknown = set(when) - {"keywords", "regex", "metadata"}
    if unknown:
        key = sorted(unknown)[0]
        raise InputError(f"memo.when.{key}", when[key], "unknown; use keywords, regex, metadata")
    keywords = when.get("keywords", [])
    if isinstance(keywords, str):
        keywords = [keywords]
    if not isinstance(keywords, list) or not all(isinstance(k, str) and k for k in keywords):
        raise InputError("memo.when.keywords", keywords, "must be a list of non-empty words")
    if len(keywords) > MAX_KEYWORDS:
        # Each keyword is one pattern tried on every record of every evaluation.
        raise InputError(
            "memo.when.keywords",
            f"{len(keywords)} keywords",
            f"give at most {MAX_KEYWORDS} keywords per entry (or one regex)",
        )
    regex = when.get("regex")
    if regex is not None:
        if not isinstance(regex, str):
            raise InputError("memo.when.regex", regex, "must be a string")
        try:
            compile_memo_regex(regex)
        except re2.error as error:
            raise InputError(
                "memo.when.regex",
                regex,
                "is not supported by the linear-time RE2 engine memo rules use (no "
                f"backreferences or lookaround): {_re2_message(error)}",
            ) from None
    metadata = when.get("metadata", {})
    if not isinstance(metadata, dict):
        raise InputError("memo.when.metadata", metadata, "must be a mapping of key: value")
    then = raw.get("then")
    if not isinstance(then, dict):
        raise InputError("memo.then", then, f"must be a mapping with one of {ACTIONS}")
    actions = [a for a in ACTIONS if a in then]
    extra = set(then) - set(ACTIONS) - {"boost"}
    if len(actions) != 1 or extra:
        raise InputError("memo.then", then, f"must hold exactly one action of {ACTIONS}")
    action = actions[0]
    codes: tuple[str, ...] = ()
    if action == "decline":
        if then["decline"] is not True:
            raise InputError("memo.then.decline", then["decline"], "must be true")
    else:
        value = then[action]
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items or (action == "assign" and len(items) != 1):
            expected = "one code" if action == "assign" else "a code or a list of codes"
            raise InputError(f"memo.then.{action}", value, f"must be {expected}")
        nodes = []
        for code in items:
            node = tree.node_of(str(code))
            if node is None:
                raise InputError(f"memo.then.{action}", code, "is not a code of the case's tree")
            nodes.append(node)
        codes = tuple(nodes)
    boost = then.get("boost", DEFAULT_BOOST)
    if "boost" in then and action != "prefer":
        raise InputError("memo.then.boost", boost, "applies to prefer only")
    if not is_finite_number(boost) or boost <= 0:
        raise InputError("memo.then.boost", boost, "must be a positive finite number")
    if not (keywords or regex is not None or metadata):
        raise InputError(
            "memo.when", when, "give at least one condition: keywords, regex, metadata"
        )
    entry_id = raw.get("id") or "m_" + hash_json(
        {"instruction": instruction, "when": when, "then": then}, length=10
    )
    check_name(entry_id, "memo.id", "a memo entry id")
    rule = MemoRule(
        keywords=tuple(keywords),
        regex=regex,
        metadata=tuple(sorted((str(k), str(v)) for k, v in metadata.items())),
        action=action,
        codes=codes,
        boost=float(boost),
    )
    normalised = {"id": entry_id, "instruction": instruction, "when": when, "then": then}
    return MemoEntry(entry_id=entry_id, instruction=instruction, rule=rule, raw=normalised)


def memo_version(entries: list[MemoEntry]) -> str:
    """Hash of the given entries' content, independent of order; ``empty`` for no entries."""
    return memo_version_of([e.content() for e in entries])


def memo_version_of(contents: list[dict[str, Any]]) -> str:
    """Hash of memo entry contents (``{id, instruction, when, then}``), independent of order;
    ``empty`` for no entries."""
    if not contents:
        return "empty"
    return hash_json(sorted(contents, key=lambda c: c["id"]))
