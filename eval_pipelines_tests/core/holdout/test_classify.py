"""The built-in knn-vote classifier and memo rules, on a hand-made tree."""

import random

import polars as pl
import pytest

from eval_pipelines.core.holdout.classify import (
    Neighbour,
    RecordToClassify,
    knn_vote,
    route_for,
)
from eval_pipelines.core.holdout.classify_config import ClassifyConfig
from eval_pipelines.core.holdout.memo import parse_memo_entry
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


def test_votes_level_by_level_and_routes_on_the_confidence_it_reports():
    evidence = _evidence(("A1.1", 0.9), ("A1.2", 0.8), ("A1.1", 0.7), ("B1", 0.9))
    (p,) = knn_vote([RECORD], evidence, [], CONFIG, tree=TREE)
    # Shares of the total 3.3: A 2.4, A1 2.4 (0.727 at target depth 2: review, not auto),
    # A1.1 1.6 (0.485 >= 0.3, so the vote descends to it).
    assert p.code == "A1.1"
    # Changed with issue 7: the confidence is the support at the target depth (A1: 2.4/3.3),
    # the number routing uses, not the deepest level's share (A1.1: 1.6/3.3 = 0.485).
    assert p.confidence == round(2.4 / 3.3, 6)
    assert p.route == "review"


def test_the_confidence_shown_is_the_one_routing_used():
    # Issue 7: this row read confidence 0.5 (A1.1, the deepest level) but was routed auto on
    # A1's 0.95 at target depth 2. Now both are A1's share.
    evidence = _evidence(("A1.1", 0.5), ("A1.2", 0.45), ("B1", 0.05))
    (p,) = knn_vote([RECORD], evidence, [], CONFIG, tree=TREE)
    assert (p.code, p.confidence, p.route) == ("A1.1", 0.95, "auto")
    # Stopping above the target depth: declined, the confidence that of the code reached.
    stop = ClassifyConfig(candidates=10, target_depth=(3,), decline_below=0.6, auto_above=0.8)
    (q,) = knn_vote([RECORD], evidence, [], stop, tree=TREE)
    assert (q.code, q.confidence, q.route) == ("A1", 0.95, "declined")


def test_auto_when_share_at_target_depth_is_high():
    evidence = _evidence(("A1.1", 0.9), ("A1.1", 0.8), ("A1.2", 0.1))
    (p,) = knn_vote([RECORD], evidence, [], CONFIG, tree=TREE)
    assert p.route == "auto" and p.code == "A1.1"
    # Candidates now also count the records that cast each label's vote.
    assert p.candidates[0] == {
        "code": "A1.1",
        "score": pytest.approx(1.7 / 1.8, abs=1e-6),
        "votes": 2,
    }


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
    assert (p.confidence, p.votes) == (0.0, 0)


def test_nearest_and_majority_strategies():
    evidence = _evidence(("B1", 0.9), ("A1.1", 0.5), ("A1.1", 0.45))
    nearest = ClassifyConfig(strategy="nearest", target_depth=(2,))
    majority = ClassifyConfig(strategy="majority", target_depth=(2,))
    assert knn_vote([RECORD], evidence, [], nearest, tree=TREE)[0].code == "B1"
    assert knn_vote([RECORD], evidence, [], majority, tree=TREE)[0].code == "A1.1"


def test_nearest_counts_what_retrieval_returned_and_the_one_vote_separately():
    # Issue 7: nearest rows counted 1 effective candidate (the record that voted) and every
    # run warned that rows were short although retrieval returned all of them.
    evidence = _evidence(("B1", 0.9), ("A1.1", 0.5), ("A1.1", 0.45), ("B1", 0.3))
    nearest = ClassifyConfig(strategy="nearest", candidates=4, target_depth=(2,))
    (p,) = knn_vote([RECORD], evidence, [], nearest, tree=TREE)
    assert (p.requested_candidates, p.effective_candidates, p.votes) == (4, 4, 1)
    assert p.candidates == [{"code": "B1", "score": 1.0, "votes": 1}]
    # Confidence: B1's share (one vote each) among the 4 retrieved at target depth 2 = 2/4.
    assert (p.code, p.confidence, p.route) == ("B1", 0.5, "review")


def test_nearest_is_auto_only_when_the_retrieved_records_agree_at_the_target_depth():
    # Before issue 7 every nearest row was auto (the deciding vote's share is always 1).
    evidence = _evidence(("A1.1", 0.9), ("A1.2", 0.5), ("A1.1", 0.45), ("A1.1", 0.4), ("B1", 0.3))
    nearest = ClassifyConfig(strategy="nearest", candidates=5, target_depth=(2,))
    (p,) = knn_vote([RECORD], evidence, [], nearest, tree=TREE)
    # The code is the nearest's full label; 4 of 5 retrieved lie under its A1 at depth 2.
    assert (p.code, p.confidence, p.route, p.votes) == ("A1.1", 0.8, "auto", 1)
    split = _evidence(("A1.1", 0.9), ("A1.2", 0.5), ("A1.1", 0.45), ("A2", 0.4), ("A2", 0.3))
    (q,) = knn_vote([RECORD], split, [], nearest, tree=TREE)
    assert (q.code, q.confidence, q.route) == ("A1.1", 0.6, "review")


def test_nearest_with_the_top_record_excluded_takes_the_next():
    evidence = _evidence(("B1", 0.9), ("A1.1", 0.5), ("A1.2", 0.45), ("A1.1", 0.3))
    nearest = ClassifyConfig(strategy="nearest", candidates=4, target_depth=(2,))
    (p,) = knn_vote([RECORD], evidence, [_entry({"exclude": ["B"]})], nearest, tree=TREE)
    # B1 is dropped: A1.1 (next nearest) decides; the 3 remaining records all lie under A1.
    # (Before, the dropped B1 kept the only vote, its weight was 0, and the row was declined.)
    assert (p.code, p.confidence, p.route) == ("A1.1", 1.0, "auto")
    assert (p.effective_candidates, p.votes, p.memo_applied) == (4, 1, ["m1"])


def test_votes_exclude_memo_dropped_evidence_but_effective_counts_it():
    evidence = _evidence(("B1", 0.9), ("A1.1", 0.5), ("A1.1", 0.45))
    (p,) = knn_vote([RECORD], evidence, [_entry({"exclude": ["B"]})], CONFIG, tree=TREE)
    assert (p.code, p.confidence, p.route) == ("A1.1", 1.0, "auto")
    assert (p.requested_candidates, p.effective_candidates, p.votes) == (10, 3, 2)
    assert p.candidates == [{"code": "A1.1", "score": 1.0, "votes": 2}]


def test_route_for():
    kw = {"target": 2, "auto_above": 0.8, "tree": TREE}
    assert route_for(None, 0.0, **kw) == "declined"
    assert route_for("A", 1.0, **kw) == "declined"  # does not reach the target depth
    assert route_for("UNKNOWN", 1.0, **kw) == "declined"
    assert route_for("A1", 0.8, **kw) == "auto"
    assert route_for("A1.1", 0.799999, **kw) == "review"


@pytest.mark.parametrize("strategy", ["weighted", "majority", "nearest"])
def test_auto_rows_reach_auto_above_and_declined_rows_miss_the_target_depth(strategy):
    """Every row, on 300 seeded random evidence lists: the route follows from the confidence
    and the code's depth alone, and the confidence is the support of the code's ancestor at
    the target depth (of the code when shallower)."""
    rng = random.Random(20260)
    leaves = ["A1.1", "A1.2", "A2", "B1", "A1", "B"]
    config = ClassifyConfig(
        strategy=strategy, candidates=6, target_depth=(2,), decline_below=0.3, auto_above=0.7
    )
    records = [RecordToClassify(f"r{i}", "text", {}) for i in range(300)]
    evidence = {
        r.record_key: [
            Neighbour(f"e{j}", round(rng.uniform(0.05, 1.0), 3), rng.choice(leaves))
            for j in range(rng.randint(0, 6))
        ]
        for r in records
    }
    routes = set()
    for p in knn_vote(records, evidence, [], config, tree=TREE):
        pool = evidence[p.record_key]
        depth = len(TREE.path(p.code)) if p.code else 0
        routes.add(p.route)
        if p.route == "auto":
            assert p.confidence >= config.auto_above
        if p.route == "review":
            assert p.confidence < config.auto_above and depth >= 2
        assert (p.route == "declined") == (depth < 2)
        assert p.effective_candidates == len(pool)
        if p.code is not None:
            weight = (lambda n: n.similarity) if strategy == "weighted" else (lambda n: 1.0)
            at = min(depth, 2)
            scored = TREE.ancestor_at(p.code, at)
            under = sum(weight(n) for n in pool if TREE.ancestor_at(n.label_node, at) == scored)
            assert p.confidence == round(under / sum(weight(n) for n in pool), 6)
            assert p.votes == (1 if strategy == "nearest" else len(pool))
    assert routes == {"auto", "review", "declined"}


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
    assert (assigned.confidence, assigned.votes, assigned.effective_candidates) == (1.0, 0, 3)
    declined = run(_entry({"decline": True}))
    assert (declined.route, declined.confidence, declined.votes) == ("declined", 0.0, 0)
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
