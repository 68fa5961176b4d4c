"""The built-in knn-vote classifier and memo rules, on a hand-made tree."""

import polars as pl
import pytest

from eval_pipelines.core.holdout.classify import Neighbour, RecordToClassify, knn_vote
from eval_pipelines.core.holdout.memo import parse_memo_entry
from eval_pipelines.core.holdout.spec import ClassifyConfig
from eval_pipelines.core.tree import tree_from_parent_links

TREE = tree_from_parent_links(
    pl.DataFrame(
        {
            "code": ["A", "A1", "A1.1", "A1.2", "A2", "B", "B1"],
            "parent": [None, "A", "A1", "A1", "A", None, "B"],
        }
    )
)
RECORD = RecordToClassify("r", "left knee pain", {"shop": "s1"})
CONFIG = ClassifyConfig(candidates=10, target_depth=(2,), decline_below=0.3, auto_above=0.8)


def _evidence(*pairs):
    return {"r": [Neighbour(f"e{i}", s, code) for i, (code, s) in enumerate(pairs)]}


def test_votes_level_by_level_and_routes_by_share_at_target_depth():
    evidence = _evidence(("A1.1", 0.9), ("A1.2", 0.8), ("A1.1", 0.7), ("B1", 0.9))
    (p,) = knn_vote([RECORD], evidence, [], CONFIG, tree=TREE)
    # Shares of the total 3.3: A 2.4, A1 2.4 (0.727 at target depth 2: review, not auto),
    # A1.1 1.6 (0.485 >= 0.3, so the vote descends to it).
    assert p.code == "A1.1"
    assert p.confidence == pytest.approx(1.6 / 3.3, abs=1e-6)
    assert p.route == "review"


def test_auto_when_share_at_target_depth_is_high():
    evidence = _evidence(("A1.1", 0.9), ("A1.1", 0.8), ("A1.2", 0.1))
    (p,) = knn_vote([RECORD], evidence, [], CONFIG, tree=TREE)
    assert p.route == "auto" and p.code == "A1.1"
    assert p.candidates[0] == {"code": "A1.1", "score": pytest.approx(1.7 / 1.8, abs=1e-6)}


def test_declines_when_the_vote_is_split_above_the_target_depth():
    evidence = _evidence(("A1.1", 0.5), ("A2", 0.5), ("B1", 0.5))
    (p,) = knn_vote([RECORD], evidence, [], CONFIG, tree=TREE)
    # A wins level 1 with 2/3, but A1 and A2 each hold 1/3 >= 0.3: tie broken by code -> A1,
    # then A1.1 at 1/3; with decline_below 0.4 the descent stops at A (depth 1 < target 2).
    strict = ClassifyConfig(candidates=10, target_depth=(2,), decline_below=0.4)
    (q,) = knn_vote([RECORD], evidence, [], strict, tree=TREE)
    assert p.code == "A1.1"
    assert q.code == "A" and q.route == "declined"


def test_no_evidence_is_a_decline_not_an_error():
    (p,) = knn_vote([RECORD], {}, [], CONFIG, tree=TREE)
    assert (p.code, p.route, p.error, p.effective_candidates) == (None, "declined", None, 0)


def test_nearest_and_majority_strategies():
    evidence = _evidence(("B1", 0.9), ("A1.1", 0.5), ("A1.1", 0.45))
    nearest = ClassifyConfig(strategy="nearest", target_depth=(2,))
    majority = ClassifyConfig(strategy="majority", target_depth=(2,))
    assert knn_vote([RECORD], evidence, [], nearest, tree=TREE)[0].code == "B1"
    assert knn_vote([RECORD], evidence, [], majority, tree=TREE)[0].code == "A1.1"


def test_candidates_limits_the_evidence_used():
    evidence = _evidence(("B1", 0.9), ("A1.1", 0.5), ("A1.1", 0.45))
    (p,) = knn_vote(
        [RECORD], evidence, [], ClassifyConfig(candidates=1, target_depth=(2,)), tree=TREE
    )
    assert p.code == "B1" and p.effective_candidates == 1 and p.requested_candidates == 1


def _entry(then, when=None):
    return parse_memo_entry(
        {"id": "m1", "instruction": "test", "when": when or {"keywords": ["knee"]}, "then": then},
        TREE,
    )


def test_memo_rules():
    evidence = _evidence(("B1", 0.9), ("A1.1", 0.5), ("A1.1", 0.45))
    run = lambda entry: knn_vote([RECORD], evidence, [entry], CONFIG, tree=TREE)[0]  # noqa: E731
    assigned = run(_entry({"assign": "A2"}))
    assert (assigned.code, assigned.route, assigned.memo_applied) == ("A2", "auto", ["m1"])
    assert run(_entry({"decline": True})).route == "declined"
    assert run(_entry({"exclude": ["B"]})).code == "A1.1"
    assert run(_entry({"prefer": ["B"], "boost": 3.0})).code == "B1"
    not_matching = run(_entry({"assign": "A2"}, when={"keywords": ["elbow"]}))
    assert not_matching.memo_applied == [] and not_matching.code != "A2"
    by_metadata = run(_entry({"assign": "A2"}, when={"metadata": {"shop": "s1"}}))
    assert by_metadata.code == "A2"
    by_regex = run(_entry({"assign": "A2"}, when={"regex": r"^left\b"}))
    assert by_regex.code == "A2"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (
            {"instruction": "x", "when": {"keywords": ["a"]}, "then": {"assign": "Z"}},
            "memo.then.assign",
        ),
        (
            {"instruction": "x", "when": {"regex": "("}, "then": {"decline": True}},
            "memo.when.regex",
        ),
        (
            {"instruction": "", "when": {"keywords": ["a"]}, "then": {"decline": True}},
            "memo.instruction",
        ),
        ({"instruction": "x", "when": {}, "then": {"decline": True}}, "memo.when"),
        (
            {
                "instruction": "x",
                "when": {"keywords": ["a"]},
                "then": {"assign": "A", "exclude": ["B"]},
            },
            "memo.then",
        ),
        (
            {"instruction": "x", "when": {"words": ["a"]}, "then": {"decline": True}},
            "memo.when.words",
        ),
    ],
)
def test_bad_memo_entries(raw, field):
    from eval_pipelines.core.errors import InputError

    with pytest.raises(InputError) as error:
        parse_memo_entry(raw, TREE)
    assert error.value.field == field
