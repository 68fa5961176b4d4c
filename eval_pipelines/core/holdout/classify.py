"""Classifiers: the contract, the registry and the built-in ``knn-vote``.

Contract: ``classify(records, evidence, memo, config, *, tree) -> list[Prediction]`` where a
prediction holds a code (possibly partial, or none: a decline), a confidence, a routing flag
(``auto``, ``review``, ``declined``), the candidate codes with scores and usage. Other
classifiers plug in by name with :func:`register_classifier`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from eval_pipelines.core.holdout.memo import MemoEntry
from eval_pipelines.core.holdout.spec import ClassifyConfig
from eval_pipelines.core.tree import CodeTree

ROUTES = ("auto", "review", "declined")


@dataclass(frozen=True)
class RecordToClassify:
    record_key: str
    text: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class Neighbour:
    """One retrieved evidence record (already outside the sampled record's leave-out set)."""

    record_key: str
    similarity: float
    label_node: str


@dataclass(frozen=True)
class Prediction:
    record_key: str
    code: str | None
    confidence: float
    route: str
    candidates: list[dict[str, Any]] = field(default_factory=list)
    requested_candidates: int = 0
    effective_candidates: int = 0
    memo_applied: list[str] = field(default_factory=list)
    error: str | None = None
    tokens: int = 0


class Classifier(Protocol):
    def __call__(
        self,
        records: Sequence[RecordToClassify],
        evidence: dict[str, list[Neighbour]],
        memo: Sequence[MemoEntry],
        config: ClassifyConfig,
        *,
        tree: CodeTree,
    ) -> list[Prediction]: ...


_REGISTRY: dict[str, Classifier] = {}


def register_classifier(name: str, classifier: Classifier) -> None:
    """Make a classifier available to variants as ``config.classifier = name``."""
    _REGISTRY[name] = classifier


def get_classifier(name: str) -> Classifier:
    if name not in _REGISTRY:
        raise KeyError(f"classifier={name!r}: not registered; known: {sorted(_REGISTRY)}")
    return _REGISTRY[name]


def known_classifiers() -> list[str]:
    return sorted(_REGISTRY)


def knn_vote(
    records: Sequence[RecordToClassify],
    evidence: dict[str, list[Neighbour]],
    memo: Sequence[MemoEntry],
    config: ClassifyConfig,
    *,
    tree: CodeTree,
) -> list[Prediction]:
    """Vote over the evidence labels level by level down the tree.

    At each level the evidence still consistent with the path chosen so far votes for its
    ancestor at that level (weights: similarity, one each, or the nearest record only); the
    winner's share of the total vote is its confidence. Descent stops when the share falls
    below ``decline_below``. A prediction that does not reach the shallowest target depth is
    routed ``declined``; otherwise ``auto`` when the share at that depth is at least
    ``auto_above``, else ``review``. Memo rules run first: ``decline`` and ``assign`` decide
    outright; ``exclude`` drops evidence under a code; ``prefer`` multiplies its weight.
    """
    target = min(config.target_depth) if config.target_depth else tree.max_depth
    predictions = []
    for record in records:
        try:
            predictions.append(
                _vote_one(record, evidence.get(record.record_key, []), memo, config, tree, target)
            )
        except Exception as error:  # noqa: BLE001 - one bad record must not sink the variant
            predictions.append(
                Prediction(
                    record_key=record.record_key,
                    code=None,
                    confidence=0.0,
                    route="declined",
                    requested_candidates=config.candidates,
                    error=f"{type(error).__name__}: {error}",
                )
            )
    return predictions


def _vote_one(
    record: RecordToClassify,
    retrieved: list[Neighbour],
    memo: Sequence[MemoEntry],
    config: ClassifyConfig,
    tree: CodeTree,
    target: int,
) -> Prediction:
    pool = retrieved[: config.candidates]
    matched = [entry for entry in memo if entry.rule.matches(record.text, record.metadata)]
    applied = [entry.entry_id for entry in matched]

    def common(**fields: Any) -> Prediction:
        return Prediction(
            record_key=record.record_key,
            requested_candidates=config.candidates,
            memo_applied=applied,
            **fields,
        )

    for entry in matched:
        if entry.rule.action == "decline":
            return common(
                code=None,
                confidence=0.0,
                route="declined",
                effective_candidates=len(pool),
            )
    for entry in matched:
        if entry.rule.action == "assign":
            code = entry.rule.codes[0]
            return common(
                code=code,
                confidence=1.0,
                route="auto",
                candidates=[{"code": code, "score": 1.0}],
                effective_candidates=len(pool),
            )

    weights = _weights(pool, config.strategy)
    for entry in matched:
        for index, item in enumerate(pool):
            under = any(
                tree.ancestor_at(item.label_node, len(tree.path(code))) == code
                for code in entry.rule.codes
            )
            if under and entry.rule.action == "exclude":
                weights[index] = 0.0
            elif under and entry.rule.action == "prefer":
                weights[index] *= entry.rule.boost
    effective = sum(1 for w in weights if w > 0)
    total = sum(weights)
    if total <= 0:
        return common(code=None, confidence=0.0, route="declined", effective_candidates=effective)

    label_scores: dict[str, float] = defaultdict(float)
    for item, weight in zip(pool, weights, strict=True):
        if weight > 0:
            label_scores[item.label_node] += weight
    candidates = [
        {"code": code, "score": round(score / total, 6)}
        for code, score in sorted(label_scores.items(), key=lambda kv: (-kv[1], kv[0]))
    ]

    alive = [i for i, w in enumerate(weights) if w > 0]
    chosen: list[tuple[str, float]] = []
    for depth in range(1, tree.max_depth + 1):
        tally: dict[str, float] = defaultdict(float)
        for i in alive:
            ancestor = tree.ancestor_at(pool[i].label_node, depth)
            if ancestor is not None:
                tally[ancestor] += weights[i]
        if not tally:
            break
        best, score = min(tally.items(), key=lambda kv: (-kv[1], kv[0]))
        share = score / total
        if share < config.decline_below:
            break
        chosen.append((best, share))
        alive = [i for i in alive if tree.ancestor_at(pool[i].label_node, depth) == best]

    if not chosen:
        return common(
            code=None,
            confidence=0.0,
            route="declined",
            candidates=candidates,
            effective_candidates=effective,
        )
    code, confidence = chosen[-1]
    if len(chosen) < target:
        route = "declined"
    elif chosen[target - 1][1] >= config.auto_above:
        route = "auto"
    else:
        route = "review"
    return common(
        code=code,
        confidence=round(confidence, 6),
        route=route,
        candidates=candidates,
        effective_candidates=effective,
    )


def _weights(pool: list[Neighbour], strategy: str) -> list[float]:
    if strategy == "weighted":
        return [max(item.similarity, 0.0) for item in pool]
    if strategy == "majority":
        return [1.0 for _ in pool]
    return [1.0 if index == 0 else 0.0 for index in range(len(pool))]


register_classifier("knn-vote", knn_vote)
