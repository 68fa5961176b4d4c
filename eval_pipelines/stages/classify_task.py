"""What one variant's classify step needs (:class:`ClassifyTask`): built by the holdout stage
(:mod:`eval_pipelines.stages.holdout_classify`) and the grouping sweep, read by every
classifier, the chat one (:mod:`eval_pipelines.stages.chat_classify`) included."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from eval_pipelines.core.holdout.classify import RecordToClassify
from eval_pipelines.core.holdout.memo import MemoEntry
from eval_pipelines.core.holdout.spec import Variant
from eval_pipelines.core.tree import CodeTree


@dataclass(frozen=True)
class ClassifyTask:
    """Everything one variant's classify step needs, so the step never opens the warehouse
    (except a ``chat`` variant's, which keeps its calls in the warehouse's call cache).

    ``titles`` (chat only) are the tree titles of the codes the variant can offer (the labels
    of its evidence); ``warehouse`` (chat only) is the warehouse file holding the cache;
    ``estimate`` (chat only) is the variant's token and cost estimate made before the run.
    A chat variant's ``tree`` is the whole pinned tree (the model may answer any code)."""

    eval_id: str
    position: int
    variant: Variant
    records: list[RecordToClassify]
    evidence: pl.DataFrame
    memo: list[MemoEntry]
    memo_version: str
    tree: CodeTree
    titles: dict[str, str] = field(default_factory=dict)
    warehouse: str | None = None
    estimate: dict[str, Any] | None = None
