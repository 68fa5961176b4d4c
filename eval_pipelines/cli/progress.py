"""Progress lines on stderr for the command running (see :mod:`eval_pipelines.core.progress`):
shown when stderr is a terminal (or ``EVAL_PIPELINES_PROGRESS=1``), never with ``--json``."""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TextIO

from eval_pipelines.core import progress


def command_label(args: argparse.Namespace, argv: Sequence[str]) -> str:
    """``eval holdout``, ``golden run``, ``evaluate``: the command as typed."""
    words = list(argv)
    group = str(getattr(args, "group", "") or "eval-pipelines")
    if group not in words:
        return group
    rest = words[words.index(group) + 1 :]
    return f"{group} {rest[0]}" if rest and not rest[0].startswith("-") else group


@contextmanager
def _terminal_stderr() -> Iterator[TextIO]:
    """The process's stderr as it is now. A run executed in this process points file
    descriptor 2 at its log files while a step runs: a copy of the descriptor keeps writing
    to the terminal."""
    try:
        descriptor = sys.stderr.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        yield sys.stderr  # not a file (captured in memory): write where stderr writes
        return
    stream = os.fdopen(os.dup(descriptor), "w", buffering=1)
    try:
        yield stream
    finally:
        stream.close()


@contextmanager
def command_progress(args: argparse.Namespace, argv: Sequence[str]) -> Iterator[None]:
    """Show the command's progress for the block, when a person is watching."""
    if not progress.wanted(sys.stderr, as_json=bool(getattr(args, "json", False))):
        yield
        return
    with _terminal_stderr() as stream:
        with progress.reporting(progress.Reporter(command_label(args, argv), stream)):
            yield
