"""The pure half of a ``chat`` classifier: what the model is offered and how its answer becomes
a :class:`~eval_pipelines.core.holdout.classify.Prediction`.

The candidates offered are the distinct labels of the evidence the variant asked for
(``config.candidates`` records, in rank order), each with the similarity of its best evidence
record; they are the prediction's ``candidates``, so the candidate ceiling stays the share of
rows whose label was among the candidates offered. The prompt carries the memo entries'
``instruction`` texts, the candidates with their titles and the record's text. An answer that
does not parse, or names a code the tree does not know, is a failed row with its reason (in
``Prediction.error``); so is a call that failed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from eval_pipelines.core.chat.answer import failure_cause, parse_answer
from eval_pipelines.core.chat.request import classification_messages
from eval_pipelines.core.chat.settings import ChatSettings
from eval_pipelines.core.holdout.classify import Neighbour, Prediction, route_for
from eval_pipelines.core.holdout.classify_config import ClassifyConfig
from eval_pipelines.core.holdout.memo import MemoEntry
from eval_pipelines.core.tree import CodeTree


def supplied_evidence(retrieved: Sequence[Neighbour], limit: int) -> int:
    """Evidence records retrieval supplied of the ``limit`` asked for: the row's
    ``effective_candidates``, as for every classifier (a row falls short only when retrieval
    found fewer records, not when several of them share a label)."""
    return len(retrieved[:limit])


def offered_candidates(retrieved: Sequence[Neighbour], limit: int) -> list[tuple[str, float]]:
    """``(code, best similarity)`` of the distinct labels among the first ``limit`` evidence
    records, in the order they first appear."""
    best: dict[str, float] = {}
    for neighbour in retrieved[:limit]:
        if neighbour.label_node not in best or neighbour.similarity > best[neighbour.label_node]:
            best[neighbour.label_node] = float(neighbour.similarity)
    return list(best.items())


def chat_messages(
    settings: ChatSettings,
    text: str,
    offered: Sequence[tuple[str, float]],
    memo: Sequence[MemoEntry],
    titles: Mapping[str, str],
) -> list[tuple[str, str]]:
    """The messages for one record: the memo's instructions, the offered codes with their
    titles (the code itself when the tree has no title), the record's text."""
    candidates = [(code, titles.get(code) or code) for code, _ in offered]
    instructions = [entry.instruction for entry in memo if entry.instruction.strip()]
    return classification_messages(settings, text, candidates, instructions)


def prediction_from_answer(
    record_key: str,
    content: str | None,
    failure: str | None,
    offered: Sequence[tuple[str, float]],
    *,
    supplied: int,
    config: ClassifyConfig,
    tree: CodeTree,
    input_tokens: int = 0,
    output_tokens: int = 0,
) -> Prediction:
    """The prediction of one answered (or failed) call; a bad answer is a failed row.
    ``supplied`` is :func:`supplied_evidence` of the row."""
    candidates = [{"code": code, "score": round(score, 6)} for code, score in offered]

    def predicted(code: str | None, confidence: float, route: str, error: str | None) -> Prediction:
        return Prediction(
            record_key=record_key,
            code=code,
            confidence=confidence,
            route=route,
            candidates=candidates,
            requested_candidates=config.candidates,
            effective_candidates=supplied,
            error=error,
            tokens=input_tokens + output_tokens,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
        )

    reason = failure
    if reason is None:
        parsed = parse_answer(content)
        reason = parsed.failure
        if reason is None and parsed.code is not None:
            node = tree.node_of(parsed.code)
            if node is None:
                reason = f"answer's code is not in the code tree: {parsed.code!r}"
            else:
                confidence = round(float(parsed.confidence or 0.0), 6)
                target = min(config.target_depth) if config.target_depth else tree.max_depth
                route = route_for(
                    node, confidence, target=target, auto_above=config.auto_above, tree=tree
                )
                return predicted(node, confidence, route, None)
    return predicted(None, 0.0, "declined", reason)


def failure_causes(errors: Iterable[str]) -> list[dict[str, Any]]:
    """The failed rows grouped by cause (:func:`~eval_pipelines.core.chat.answer.failure_cause`):
    every cause as ``{cause, rows, example}`` (``example``: the first row's whole reason), the
    most rows first, a tie in the order the causes first appear."""
    rows: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for error in errors:
        cause = failure_cause(error)
        rows[cause] += 1
        examples.setdefault(cause, error)
    return [
        {"cause": cause, "rows": count, "example": examples[cause]}
        for cause, count in rows.most_common()
    ]
