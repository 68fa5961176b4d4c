"""Memo rules: user regexes run on RE2, so a pathological pattern cannot hang a run."""

from __future__ import annotations

import pickle
from typing import Any

import polars as pl
import pytest
import re2

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout.memo import MemoEntry, MemoRule, parse_memo_entry
from eval_pipelines.core.tree import tree_from_parent_links

TREE = tree_from_parent_links(pl.DataFrame({"code": ["A", "A1", "B"], "parent": [None, "A", None]}))


def _entry(when: dict[str, Any]) -> MemoEntry:
    return parse_memo_entry(
        {"id": "m1", "instruction": "test", "when": when, "then": {"assign": "A1"}}, TREE
    )


def _runs_on_re2(rule: MemoRule) -> bool:
    """Whether the rule's regex is compiled by RE2 (an automaton, linear in the text), not by
    Python's backtracking ``re``."""
    return isinstance(rule._regex_pattern, type(re2.compile("")))  # type: ignore[attr-defined]


def test_catastrophic_backtracking_pattern_returns_quickly() -> None:
    rule = _entry({"regex": "^(a+)+$"}).rule
    # Python's backtracking re would take about 2**35 steps on this text; RE2 is linear in the
    # text. What makes it quick is the engine, checked here; the time it takes (microseconds)
    # is measured by benchmarks/suite_timings.py.
    assert _runs_on_re2(rule)
    assert rule.matches("a" * 35 + "!", {}) is False
    assert rule.matches("a" * 35, {}) is True


def test_regex_is_case_insensitive() -> None:
    rule = _entry({"regex": r"^left\b.*PAIN"}).rule
    assert rule.matches("LEFT knee pain", {})
    assert rule.matches("left knee Pain", {})
    assert not rule.matches("right knee pain", {})
    assert not rule.matches("bereft knee pain", {})


def test_regex_combines_with_keywords_and_metadata() -> None:
    rule = _entry({"keywords": ["knee"], "regex": "pain$", "metadata": {"shop": "s1"}}).rule
    assert rule.matches("Knee PAIN", {"shop": "s1"})
    assert not rule.matches("Knee PAIN", {"shop": "s2"})
    assert not rule.matches("kneel pain", {"shop": "s1"})
    assert not rule.matches("knee pain, left", {"shop": "s1"})


@pytest.mark.parametrize("regex", [r"(a)\1", "foo(?=bar)", "(?<!x)y", "("])
def test_regexes_re2_cannot_run_are_refused(regex: str) -> None:
    with pytest.raises(InputError) as error:
        _entry({"regex": regex})
    assert error.value.field == "memo.when.regex"
    assert error.value.value == regex
    assert "RE2" in error.value.rule
    # RE2's own message is passed on as text, not as a bytes repr.
    assert "b'" not in error.value.rule


def test_rule_with_regex_survives_pickle() -> None:
    rule = _entry({"regex": "vib+rio", "keywords": ["cholera"]}).rule
    restored = pickle.loads(pickle.dumps(rule))
    assert isinstance(restored, MemoRule)
    assert restored == rule
    assert restored.matches("Cholera due to VIBRIO", {})
    assert not restored.matches("Cholera, unspecified", {})
    slow = pickle.loads(pickle.dumps(_entry({"regex": "^(a+)+$"}).rule))
    assert _runs_on_re2(slow)  # recompiled on load with RE2, not with re
    assert slow.matches("a" * 35 + "!", {}) is False


@pytest.mark.parametrize("boost", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_boost_is_refused(boost: float) -> None:
    raw = {"id": "m1", "instruction": "t", "when": {"keywords": ["x"]}}
    with pytest.raises(InputError) as error:
        parse_memo_entry({**raw, "then": {"prefer": ["A"], "boost": boost}}, TREE)
    assert error.value.field == "memo.then.boost"


def test_a_non_finite_number_anywhere_in_an_entry_is_refused() -> None:
    raw = {"id": "m1", "instruction": "t", "then": {"assign": "A1"}}
    with pytest.raises(InputError) as error:
        parse_memo_entry({**raw, "when": {"metadata": {"score": float("nan")}}}, TREE)
    assert error.value.field == "memo.when.metadata.score"


def test_the_number_of_keywords_is_bounded() -> None:
    from eval_pipelines.core.holdout.memo import MAX_KEYWORDS

    _entry({"keywords": [f"k{i}" for i in range(MAX_KEYWORDS)]})
    with pytest.raises(InputError, match=f"at most {MAX_KEYWORDS} keywords"):
        _entry({"keywords": [f"k{i}" for i in range(MAX_KEYWORDS + 1)]})
