"""The classify step of a ``chat`` holdout variant: every sampled record asked of the model
(``trials`` times), through the warehouse's call cache.

Per record: the memo entries in force whose ``when`` matches are its ``memo_applied``; a
matching ``decline`` or ``assign`` decides the row outright, as it does for knn-vote (no call);
``exclude`` removes the codes under it from the candidates offered; every entry's
``instruction`` text is in the prompt (``prefer`` acts through its instruction only). The
candidates offered are the distinct labels of the variant's retrieved evidence (leave-out
applied), with their tree titles, so the candidate ceiling keeps its meaning. Trial 1's
answers are the variant's predictions; all trials are returned for ``variant_trials`` (a row
a memo rule decided is the same in every trial).

A bad answer, a code outside the tree, a call that failed after its retries or an endpoint
that is down is a failed row with its reason, never a failed step. Progress (calls done of
total, tokens so far, calls from the cache, ETA) goes to ``log`` at most every
:data:`PROGRESS_SECONDS` and at the end.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from eval_pipelines.core.chat.cost import call_cost
from eval_pipelines.core.chat.request import ChatRequest, build_request
from eval_pipelines.core.errors import ConflictError
from eval_pipelines.core.holdout.chat_classify import (
    chat_messages,
    failure_causes,
    offered_candidates,
    prediction_from_answer,
    supplied_evidence,
)
from eval_pipelines.core.holdout.chat_estimate import no_price_reason, variant_settings
from eval_pipelines.core.holdout.classify import (
    Prediction,
    neighbours_from_frame,
    route_for,
)
from eval_pipelines.core.holdout.memo import MemoEntry
from eval_pipelines.core.tree import CodeTree
from eval_pipelines.settings import parse_warehouse
from eval_pipelines.stages.chat_calls import ChatProgress, run_chat_calls
from eval_pipelines.stages.classify_task import ClassifyTask
from eval_pipelines.storage.holdout import TRIALS_SCHEMA

PROGRESS_SECONDS = 2.0


@dataclass(frozen=True)
class ChatClassified:
    predictions: list[Prediction]
    trials: pl.DataFrame
    usage: dict[str, Any]


def _under(tree: CodeTree, code: str, ancestor: str) -> bool:
    path, above = tree.paths.get(code), tree.paths.get(ancestor)
    return path is not None and above is not None and path[: len(above)] == above


def _decided(
    record_key: str, code: str | None, matched: list[MemoEntry], task: ClassifyTask, supplied: int
) -> Prediction:
    """A row a memo rule decides outright (``decline``: no code; ``assign``: its code)."""
    config = task.variant.config
    target = min(config.target_depth) if config.target_depth else task.tree.max_depth
    confidence = 0.0 if code is None else 1.0
    return Prediction(
        record_key=record_key,
        code=code,
        confidence=confidence,
        route=route_for(
            code, confidence, target=target, auto_above=config.auto_above, tree=task.tree
        ),
        candidates=[] if code is None else [{"code": code, "score": 1.0}],
        requested_candidates=config.candidates,
        effective_candidates=supplied,
        memo_applied=[entry.entry_id for entry in matched],
    )


def progress_line(name: str, state: ChatProgress, trials: int) -> str:
    """``chat variant NAME: 120/400 calls (x2 trials), 1 failed, 30 from cache, 12,345 tokens
    so far, ETA 14 s``."""
    eta = state.eta_seconds
    per = f" (x{trials} trials)" if trials > 1 else ""
    return (
        f"chat variant {name}: {state.done:,}/{state.total:,} calls{per}, "
        f"{state.failed:,} failed, {state.from_cache:,} from cache, {state.tokens:,} tokens "
        f"so far, ETA {'unknown' if eta is None else f'{eta:.0f} s'}"
    )


def classify_chat(
    task: ClassifyTask,
    *,
    environ: Mapping[str, str] | None = None,
    log: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
) -> ChatClassified:
    """Classify the task's records with its chat settings (``environ``, default
    ``os.environ``, holds the API key variable)."""
    if task.warehouse is None:
        raise ConflictError(
            f"variant {task.variant.name!r}: the chat classifier needs the warehouse (its "
            "call cache); this step was given none"
        )
    environment = os.environ if environ is None else environ
    config = task.variant.config
    settings = variant_settings(config, environment, where=f"variant {task.variant.name}.config")
    neighbours = neighbours_from_frame(task.evidence)
    decided: dict[str, Prediction] = {}
    asked: list[tuple[str, list[tuple[str, float]], int, list[str], list[ChatRequest]]] = []
    for record in task.records:
        retrieved = neighbours.get(record.record_key, [])
        supplied = supplied_evidence(retrieved, config.candidates)
        matched = [e for e in task.memo if e.rule.matches(record.text, record.metadata)]
        ruling = next((e for e in matched if e.rule.action in ("decline", "assign")), None)
        if ruling is not None:
            code = ruling.rule.codes[0] if ruling.rule.action == "assign" else None
            decided[record.record_key] = _decided(record.record_key, code, matched, task, supplied)
            continue
        offered = offered_candidates(retrieved, config.candidates)
        excluded = [c for e in matched if e.rule.action == "exclude" for c in e.rule.codes]
        offered = [o for o in offered if not any(_under(task.tree, o[0], x) for x in excluded)]
        messages = chat_messages(settings, record.text, offered, task.memo, task.titles)
        requests = [
            build_request(settings, messages, trial=trial)
            for trial in range(1, settings.trials + 1)
        ]
        asked.append(
            (record.record_key, offered, supplied, [e.entry_id for e in matched], requests)
        )

    last_said = [0.0]

    def on_progress(state: ChatProgress) -> None:
        now = time.monotonic()
        if log is not None and (
            state.done == state.total or now - last_said[0] >= PROGRESS_SECONDS
        ):
            last_said[0] = now
            log(progress_line(task.variant.name, state, settings.trials))

    all_requests = [request for *_, requests in asked for request in requests]
    result = run_chat_calls(
        parse_warehouse(task.warehouse),
        settings,
        all_requests,
        environ=environment,
        stop=stop,
        progress=on_progress,
    )
    answers = iter(result.answers)
    predictions: dict[str, Prediction] = dict(decided)
    trial_rows: list[dict[str, Any]] = []
    for record_key, offered, supplied, applied, requests in asked:
        for request in requests:
            answer = next(answers)
            prediction = prediction_from_answer(
                record_key,
                answer.content,
                answer.failure,
                offered,
                supplied=supplied,
                config=config,
                tree=task.tree,
                input_tokens=answer.input_tokens,
                output_tokens=answer.output_tokens,
            )
            prediction = replace(prediction, memo_applied=applied)  # the rules that matched
            trial_rows.append(
                {
                    "variant": task.variant.name,
                    "record_key": record_key,
                    "trial": request.trial,
                    "code": prediction.code,
                    "confidence": prediction.confidence,
                    "route": prediction.route,
                    "error": prediction.error,
                }
            )
            if request.trial == 1:
                predictions[record_key] = prediction
    # A row a memo rule decided is the same in every trial.
    for prediction in decided.values():
        trial_rows.extend(
            {
                "variant": task.variant.name,
                "record_key": prediction.record_key,
                "trial": trial,
                "code": prediction.code,
                "confidence": prediction.confidence,
                "route": prediction.route,
                "error": None,
            }
            for trial in range(1, settings.trials + 1)
        )
    ordered = [predictions[record.record_key] for record in task.records]
    counters = result.counters
    answered = [a for a in result.answers if a.failure is None]
    input_tokens = sum(a.input_tokens for a in answered)
    output_tokens = sum(a.output_tokens for a in answered)
    cost = call_cost(settings.prices, settings.model, input_tokens, output_tokens)
    no_price = None if cost is not None else no_price_reason(settings)
    usage = {
        # Every trial's answer counts: what the variant's answers took, as the endpoint
        # reported them (answers read from the cache count the tokens they took when made).
        "classifyCalls": len(all_requests),
        "tokens": input_tokens + output_tokens,
        "inputTokens": input_tokens,
        "outputTokens": output_tokens,
        "chat": {
            "model": settings.model,
            "trials": settings.trials,
            "calls": len(all_requests),
            "decidedByMemo": len(decided),
            "callsMade": counters.answered,
            "callsFromCache": counters.from_cache,
            "callsFailed": counters.failed,
            "requestsSent": counters.requests_sent,
            "retries": counters.retries,
            # Why the variant's rows failed (trial 1, as scored), by cause: a bad answer is a
            # failed row though its call was answered, so these rows can outnumber callsFailed.
            "failureReasons": failure_causes(p.error for p in ordered if p.error is not None),
            "cost": cost,
            "costReason": no_price,
            # What this run paid: the calls it made (answers from the cache cost nothing).
            "spent": {
                "inputTokens": counters.input_tokens,
                "outputTokens": counters.output_tokens,
                "cost": counters.cost,
                "costReason": None if counters.cost is not None else no_price,
            },
            "estimate": task.estimate,
        },
    }
    trials = pl.DataFrame(trial_rows, schema=TRIALS_SCHEMA)
    return ChatClassified(ordered, trials, usage)
