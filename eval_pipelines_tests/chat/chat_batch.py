"""A batch of classification requests for the chat-call tests, and a script running one in a
separate process (``python -m eval_pipelines_tests.chat.chat_batch WAREHOUSE CONFIG_JSON N``),
so a test can kill it with SIGKILL halfway; :func:`until_stalled` waits for the moment to."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from eval_pipelines.core.chat.request import ChatRequest, build_request, classification_messages
from eval_pipelines.core.chat.settings import ChatSettings, parse_chat_settings
from eval_pipelines.stages.chat_calls import run_chat_calls

CANDIDATES = [("01.1", "Growing of cereals"), ("47.1", "Retail sale in stores")]


def batch(settings: ChatSettings, n: int, *, trials: int = 1) -> list[ChatRequest]:
    texts = [
        f"record {i}: " + ("growing cereals on a farm" if i % 2 else "retail sale in stores")
        for i in range(n)
    ]
    return [
        build_request(settings, classification_messages(settings, text, CANDIDATES), trial=t)
        for text in texts
        for t in range(1, trials + 1)
    ]


def until_stalled(count: Callable[[], int], target: int, *, quiet: float = 0.5) -> None:
    """Wait until ``count()`` (a server's requests) reaches ``target`` or stops growing for
    ``quiet`` seconds: a batch whose threads all wait on the warehouse sends nothing more."""
    last, since = count(), time.monotonic()
    deadline = since + 60
    while count() < target:
        assert time.monotonic() < deadline, "the count neither grew nor stopped"
        now, seen = time.monotonic(), count()
        if seen != last:
            last, since = seen, now
        elif now - since >= quiet:
            return
        time.sleep(0.01)


def main() -> None:
    warehouse, config, n = Path(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
    settings = parse_chat_settings(config, os.environ)
    run_chat_calls(warehouse, settings, batch(settings, n))


if __name__ == "__main__":
    main()
