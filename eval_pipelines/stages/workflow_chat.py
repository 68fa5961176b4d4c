"""The chat client of a workflow run: what a ``chat`` node's steps call their model through.

:func:`step_context` gives the :class:`~eval_pipelines.core.workflows.nodes.StepContext` a
golden run or a test run hands to its steps: ``call_chat(settings, requests, stop)`` answers
through :func:`~eval_pipelines.stages.chat_calls.run_chat_calls` with the run's warehouse
(its ``chat_calls`` cache: a call answered once is never paid again, even when the step
itself was not cached because the run was killed before it stored its steps). The API key is
read from the environment of the process the step runs in, by ``run_chat_calls``; it is never
part of the context.

A golden run runs four cases at a time, each step one call; the node's ``concurrency`` caps
the calls in flight per endpoint across them, and across every other run on the machine
calling that endpoint (each request holds one of the endpoint's slots:
:mod:`~eval_pipelines.stages.endpoint_slots`), so ``concurrency: 1`` makes the calls one at a
time. Waiting for a slot and waiting between retries end as soon as the run is stopped, and
so does waiting for a call in flight: the step raises
:class:`~eval_pipelines.core.workflows.step_worker.StepCanceled` at once (its case is
recorded as not reached) and leaves the call to end on its own in a daemon thread (an answer
that still arrives is stored in the cache, so it is never paid twice; the process exiting
ends the connection).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from eval_pipelines.core.chat.request import ChatRequest
from eval_pipelines.core.chat.settings import ChatSettings
from eval_pipelines.core.workflows.nodes import StepContext
from eval_pipelines.core.workflows.step_worker import StepCanceled
from eval_pipelines.settings import WarehouseLocation
from eval_pipelines.stages.chat_calls import ChatCallsResult, run_chat_calls

STOP_POLL_SECONDS = 0.1


class WorkflowChat:
    """``call_chat`` of a run over ``warehouse``."""

    def __init__(self, warehouse: WarehouseLocation) -> None:
        self.warehouse = warehouse

    def __call__(
        self,
        settings: ChatSettings,
        requests: list[ChatRequest],
        stop: threading.Event | None = None,
    ) -> ChatCallsResult:
        if stop is None:
            return run_chat_calls(self.warehouse, settings, requests)
        outcome: list[ChatCallsResult | BaseException] = []

        def calls() -> None:
            try:
                outcome.append(
                    run_chat_calls(
                        self.warehouse, settings, requests, stop=stop, sleep=_sleeper(stop)
                    )
                )
            except BaseException as error:  # handed to the step's thread
                outcome.append(error)

        worker = threading.Thread(target=calls, name="chat-step", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(STOP_POLL_SECONDS)
            if worker.is_alive() and stop.is_set():
                raise StepCanceled("canceled while a chat call was in flight")
        result = outcome[0]
        if isinstance(result, BaseException):
            raise result
        return result


def _sleeper(stop: threading.Event | None) -> Any:
    if stop is None:
        return time.sleep
    return lambda seconds: stop.wait(seconds)


def step_context(warehouse: WarehouseLocation) -> StepContext:
    """The context of a run's steps over ``warehouse``."""
    return StepContext(call_chat=WorkflowChat(warehouse))
