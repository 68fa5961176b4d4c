"""Classifiers: the contract, the registry and the built-in ``knn-vote``.

Contract: ``classify(records, evidence, memo, config, *, tree) -> list[Prediction]`` where a
prediction holds a code (possibly partial, or none: a decline), a confidence, a routing flag
(``auto``, ``review``, ``declined``), the candidate codes with scores and usage. Other
classifiers plug in by name with :func:`register_classifier`; :func:`route_for` routes the way
docs/figures.md, "Holdout evaluation (000)", defines it, so a plug-in can route the same way.

Confidence (one number per row, the one routing uses): the *support* of the prediction at the
shallowest target depth, i.e. the share of the evidence weight held by evidence records whose
label lies under the prediction's ancestor at that depth (at the prediction's own depth when it
stops above it; 0 without a prediction). Weights are the strategy's (cosine for ``weighted``,
one each for ``majority``) after the memo rules. For ``weighted`` and ``majority`` this is the
vote share at the shallowest target depth. For ``nearest`` the top remaining record decides
the code, and the support is counted one vote each over the retrieved records (the share the
code's target-depth ancestor would have under ``majority``), since the deciding vote's own
share is always 1. A prediction reaching below the target depth is not less confident for it:
deeper levels are not what routing decides on.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import polars as pl

from eval_pipelines.core.holdout.classify_config import ClassifyConfig
from eval_pipelines.core.holdout.memo import MemoEntry
from eval_pipelines.core.plugins import PluginError, resolve_classifier
from eval_pipelines.core.tree import CodeTree

ROUTES = ("auto", "review", "declined")


@dataclass(frozen=True)
class RecordToClassify:
    record_key: str
    text: str
    metadata: dict[str, Any]


class Neighbour(NamedTuple):
    """One retrieved evidence record (already outside the sampled record's leave-out set).

    A named tuple rather than a dataclass: a classify step makes one per retrieved record
    (100,000 for 5,000 records at 20 candidates), and a tuple is made twice as fast.
    """

    record_key: str
    similarity: float
    label_node: str


@dataclass(frozen=True)
class Prediction:
    """One classified record.

    Attributes
    ----------
    confidence
        Support of ``code`` at the shallowest target depth (module docstring); routing uses
        this number and no other.
    candidates
        ``{code, score, votes}`` per evidence label that voted: its share of the vote and how
        many evidence records cast it (``votes`` is absent for plug-ins that do not count).
    requested_candidates
        Evidence records the variant asked for (its ``candidates`` setting).
    effective_candidates
        Evidence records retrieval supplied for this row (at most ``requested_candidates``),
        whether or not they voted: a row falls short only when retrieval found fewer.
    memo_applied
        Ids of the memo entries whose ``when`` matched the record (the rules that fired).
    tokens, input_tokens, output_tokens
        What a model-backed classifier spent on the record (all 0 for knn-vote); ``tokens``
        is the total when a classifier cannot split it.
    """

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
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def votes(self) -> int | None:
        """Evidence records whose vote counted (None when the candidates carry no counts)."""
        return candidate_votes(self.candidates)


def neighbours_by_record(
    rows: Iterable[tuple[str, str, float, str]],
) -> dict[str, list[Neighbour]]:
    """Retrieved evidence per classified record from ``(record_key, evidence_key,
    similarity, evidence label node)`` rows, in rank order."""
    neighbours: dict[str, list[Neighbour]] = {}
    for record_key, evidence_key, similarity, label_node in rows:
        neighbours.setdefault(record_key, []).append(
            Neighbour(evidence_key, float(similarity), label_node)
        )
    return neighbours


EVIDENCE_COLUMNS = ("sample_key", "evidence_key", "similarity", "label_node")


def neighbours_from_frame(evidence: pl.DataFrame) -> dict[str, list[Neighbour]]:
    """:func:`neighbours_by_record` of an evidence frame (:data:`EVIDENCE_COLUMNS`, in rank
    order within each sampled record).

    Classify steps receive their evidence as such a frame: it crosses a process boundary far
    faster than a few hundred thousand ``Neighbour`` objects do.
    """
    return neighbours_by_record(
        zip(*(evidence.get_column(column).to_list() for column in EVIDENCE_COLUMNS), strict=True)
    )


def evidence_tree(tree: CodeTree, evidence: pl.DataFrame, memo: Iterable[MemoEntry]) -> CodeTree:
    """The tree cut down to what the vote can reach: the labels of the evidence (a frame with
    a ``label_node`` column) and the codes the memo rules name (voting walks only these
    paths)."""
    touched = set(evidence.get_column("label_node").unique().to_list())
    touched |= {code for entry in memo for code in entry.rule.codes}
    return tree.restricted_to(touched)


def candidate_votes(candidates: Sequence[dict[str, Any]]) -> int | None:
    """Sum of the candidates' ``votes``; 0 for no candidates, None when a candidate has none."""
    if any("votes" not in candidate for candidate in candidates):
        return None
    return sum(int(candidate["votes"]) for candidate in candidates)


def route_for(
    code: str | None, confidence: float, *, target: int, auto_above: float, tree: CodeTree
) -> str:
    """``declined`` when the code does not reach depth ``target`` (the shallowest target
    depth), else ``auto`` when ``confidence >= auto_above``, else ``review``."""
    if tree.ancestor_at(code, target) is None:
        return "declined"
    return "auto" if confidence >= auto_above else "review"


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
# How many tokens a classifier expects to spend per record under a config (0 for the
# built-in knn-vote, which calls no model): what `eval holdout` estimates before a run.
TokenEstimate = Callable[[ClassifyConfig], int]
_TOKEN_ESTIMATES: dict[str, TokenEstimate] = {}


def register_classifier(
    name: str, classifier: Classifier, *, tokens_per_record: int | TokenEstimate = 0
) -> None:
    """Make a classifier available to variants as ``config.classifier = name``, declaring
    the tokens it expects to spend per record (a number, or a function of the config)."""
    _REGISTRY[name] = classifier
    if callable(tokens_per_record):
        _TOKEN_ESTIMATES[name] = tokens_per_record
    else:
        fixed = int(tokens_per_record)

        def constant(config: ClassifyConfig) -> int:
            return fixed

        _TOKEN_ESTIMATES[name] = constant


def tokens_per_record(name: str, config: ClassifyConfig) -> int:
    """The classifier's declared token estimate per record (0 when it declared none).

    A plug-in declares it as its ``tokens_per_record`` attribute: a number, or a function of
    the config (core.plugins; docs/plugins.md).
    """
    estimate = _TOKEN_ESTIMATES.get(name)
    if estimate is not None:
        return int(estimate(config))
    if name in _REGISTRY:
        return 0
    try:
        classifier, _ = resolve_classifier(name)
    except PluginError:
        return 0  # refused where the spec is parsed, naming the field
    declared = getattr(classifier, "tokens_per_record", 0)
    return int(declared(config) if callable(declared) else declared)


def get_classifier(name: str) -> Classifier:
    """The registered classifier, else the plug-in ``name`` names (an entry point of
    ``eval_pipelines.classifiers`` or ``package.module:function``, see core.plugins)."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    try:
        classifier, _ = resolve_classifier(name)
    except PluginError as error:
        raise KeyError(f"classifier={name!r}: {error}; registered: {sorted(_REGISTRY)}") from None
    return classifier  # type: ignore[return-value]


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
    ancestor at that level (weights: similarity, one each, or the nearest remaining record
    only); descent stops when the winner's share of the total vote falls below
    ``decline_below``. The prediction's confidence is its support at the shallowest target
    depth (module docstring): for ``weighted`` and ``majority`` the vote share there. Routing
    (:func:`route_for`) uses that confidence: ``declined`` above the shallowest target depth,
    else ``auto`` at or above ``auto_above``, else ``review``. Memo rules run first:
    ``decline`` and ``assign`` decide outright (confidence 0 and 1); ``exclude`` drops evidence
    under a code; ``prefer`` multiplies its weight.
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

    def decided(
        code: str | None, confidence: float, candidates: list[dict[str, Any]]
    ) -> Prediction:
        confidence = round(confidence, 6)
        return Prediction(
            record_key=record.record_key,
            code=code,
            confidence=confidence,
            route=route_for(
                code, confidence, target=target, auto_above=config.auto_above, tree=tree
            ),
            candidates=candidates,
            requested_candidates=config.candidates,
            # What retrieval supplied, voters or not (memo rules and strategy decide the votes).
            effective_candidates=len(pool),
            memo_applied=[entry.entry_id for entry in matched],
        )

    for entry in matched:
        if entry.rule.action == "decline":
            return decided(None, 0.0, [])
    for entry in matched:
        if entry.rule.action == "assign":
            assigned = entry.rule.codes[0]
            return decided(assigned, 1.0, [{"code": assigned, "score": 1.0, "votes": 0}])

    # Support weights: what the confidence is measured with; the vote uses them too, except
    # that under ``nearest`` only the top remaining record votes.
    support = _weights(pool, config.strategy)
    # Each evidence label's ancestors, looked up once: the vote below walks them level by level.
    label_paths = [tree.paths.get(item.label_node, ()) for item in pool]
    for entry in matched:
        for index, path in enumerate(label_paths):
            under = any(_under(path, tree.path(code)) for code in entry.rule.codes)
            if under and entry.rule.action == "exclude":
                support[index] = 0.0
            elif under and entry.rule.action == "prefer":
                support[index] *= entry.rule.boost
    if config.strategy == "nearest":
        first = next((i for i, w in enumerate(support) if w > 0), None)
        weights = [1.0 if i == first else 0.0 for i in range(len(pool))]
    else:
        weights = list(support)
    total = sum(weights)
    if total <= 0:
        return decided(None, 0.0, [])

    label_scores: dict[str, float] = defaultdict(float)
    label_votes: dict[str, int] = defaultdict(int)
    for item, weight in zip(pool, weights, strict=True):
        if weight > 0:
            label_scores[item.label_node] += weight
            label_votes[item.label_node] += 1
    candidates = [
        {"code": code, "score": round(score / total, 6), "votes": label_votes[code]}
        for code, score in sorted(label_scores.items(), key=lambda kv: (-kv[1], kv[0]))
    ]

    alive = [i for i, w in enumerate(weights) if w > 0]
    code: str | None = None
    for depth in range(1, tree.max_depth + 1):
        tally: dict[str, float] = defaultdict(float)
        for i in alive:
            if len(label_paths[i]) >= depth:
                tally[label_paths[i][depth - 1]] += weights[i]
        if not tally:
            break
        best, score = min(tally.items(), key=lambda kv: (-kv[1], kv[0]))
        if score / total < config.decline_below:
            break
        code = best
        alive = [
            i for i in alive if len(label_paths[i]) >= depth and label_paths[i][depth - 1] == best
        ]

    if code is None:
        return decided(None, 0.0, candidates)
    return decided(code, _support_share(tree.path(code), target, label_paths, support), candidates)


def _under(path: tuple[str, ...], ancestor_path: tuple[str, ...]) -> bool:
    """Whether the node with ``path`` lies under (or is) the node with ``ancestor_path``."""
    depth = len(ancestor_path)
    return len(path) >= depth and path[depth - 1] == ancestor_path[-1]


def _support_share(
    code_path: tuple[str, ...],
    target: int,
    label_paths: list[tuple[str, ...]],
    support: list[float],
) -> float:
    """Share of the support weight held by evidence whose label lies under the code's
    ancestor at depth ``target`` (under the code itself when it is shallower)."""
    total = sum(support)
    scored = code_path[: min(target, len(code_path))]
    under = sum(
        weight
        for path, weight in zip(label_paths, support, strict=True)
        if weight > 0 and _under(path, scored)
    )
    return under / total if total > 0 else 0.0


def _weights(pool: list[Neighbour], strategy: str) -> list[float]:
    """Support weights: cosine for ``weighted``, one each for ``majority`` and ``nearest``."""
    if strategy == "weighted":
        return [max(item.similarity, 0.0) for item in pool]
    return [1.0 for _ in pool]


register_classifier("knn-vote", knn_vote)
