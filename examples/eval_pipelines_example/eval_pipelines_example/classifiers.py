"""``most-similar``: the label of the single most similar evidence record, with that
record's similarity as the confidence.

Unlike the built-in ``knn-vote`` it does not vote and does not descend the tree: the nearest
record's full label is the prediction, and the routing threshold (``autoAbove``) applies to
the raw similarity. Memo rules are not applied (a plug-in decides what it does with them);
the ids of the entries whose ``when`` matched are still reported.
"""

from __future__ import annotations

from collections.abc import Sequence

from eval_pipelines.core.holdout.classify import (
    Neighbour,
    Prediction,
    RecordToClassify,
    route_for,
)
from eval_pipelines.core.holdout.classify_config import ClassifyConfig
from eval_pipelines.core.holdout.memo import MemoEntry
from eval_pipelines.core.tree import CodeTree


def most_similar(
    records: Sequence[RecordToClassify],
    evidence: dict[str, list[Neighbour]],
    memo: Sequence[MemoEntry],
    config: ClassifyConfig,
    *,
    tree: CodeTree,
) -> list[Prediction]:
    target = min(config.target_depth) if config.target_depth else tree.max_depth
    predictions = []
    for record in records:
        pool = evidence.get(record.record_key, [])[: config.candidates]
        matched = [e.entry_id for e in memo if e.rule.matches(record.text, record.metadata)]
        if not pool:
            code, confidence = None, 0.0
        else:
            nearest = max(pool, key=lambda n: n.similarity)
            code, confidence = nearest.label_node, round(max(0.0, nearest.similarity), 6)
        predictions.append(
            Prediction(
                record_key=record.record_key,
                code=code,
                confidence=confidence,
                route=route_for(
                    code, confidence, target=target, auto_above=config.auto_above, tree=tree
                ),
                candidates=[{"code": code, "score": confidence}] if code is not None else [],
                requested_candidates=config.candidates,
                effective_candidates=len(pool),
                memo_applied=matched,
            )
        )
    return predictions
