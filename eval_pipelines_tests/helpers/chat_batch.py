"""A batch of classification requests for the chat-call tests, and a script running one in a
separate process (``python -m eval_pipelines_tests.helpers.chat_batch WAREHOUSE CONFIG_JSON N``),
so a test can kill it with SIGKILL halfway: :func:`holding` takes the warehouse from it,
:func:`until_stalled` waits for the moment to kill, :func:`answers_kept` counts what the killed
batch kept."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from eval_pipelines.core.chat.request import ChatRequest, build_request, classification_messages
from eval_pipelines.core.chat.settings import ChatSettings, parse_chat_settings
from eval_pipelines.stages.chat_calls import run_chat_calls
from eval_pipelines.stages.chat_journal import journal_directory, read_journal
from eval_pipelines.storage.chat_cache import cached_calls, count_calls
from eval_pipelines.storage.warehouse import WarehouseBusy, connect

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


@contextmanager
def holding(warehouse: Path) -> Iterator[None]:
    """Hold the warehouse's lock in this process, taken the first moment a batch's writer lets
    go of it (``connect``'s own wait backs off up to a second, which a fast batch outruns)."""
    deadline = time.monotonic() + 60
    with ExitStack() as held:
        while True:
            try:
                held.enter_context(connect(warehouse, wait_seconds=0))
                break
            except WarehouseBusy:
                assert time.monotonic() < deadline, f"{warehouse} stayed locked"
                time.sleep(0.005)
        yield


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


def answers_kept(warehouse: Path, *, secret: str | None = None) -> int:
    """The answers a killed batch kept: in the warehouse, or in a journal it left (each once),
    checking that no journal holds ``secret`` when one is given."""
    journaled: set[str] = set()
    directory = journal_directory(warehouse)
    for path in directory.iterdir() if directory.exists() else ():
        data = path.read_bytes()
        assert secret is None or secret.encode() not in data, path
        journaled.update(call.key for call in read_journal(data, path))
    with connect(warehouse, read_only=True) as conn:
        also_stored = cached_calls(conn, sorted(journaled))
        return count_calls(conn) + len(journaled - also_stored.keys())


def main() -> None:
    warehouse, config, n = Path(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
    settings = parse_chat_settings(config, os.environ)
    run_chat_calls(warehouse, settings, batch(settings, n))


if __name__ == "__main__":
    main()
