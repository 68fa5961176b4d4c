"""``maxTime`` (spec 003): a deadline, and the chunks of test rows scored under it.

Rows are scored in vectorised chunks; the deadline is checked before each chunk, and a chunk
is sized to take at most about half the time left, from the time per row the chunk before it
took (the first chunk is one row; a small chunk's fixed cost only overstates the time per
row, which makes the next chunk smaller, not later). So a run stops within a few rows' time of
its budget, however small, while a run with time to spare pays one one-row chunk before its
full-size chunks (its cost: docs/benchmarks.md, "Measured figures on other pages").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator


class Deadline:
    """``seconds`` from the moment it is made, read on ``clock``."""

    def __init__(self, seconds: float, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.start = clock()
        self.seconds = seconds

    def elapsed(self) -> float:
        return self.clock() - self.start

    def remaining(self) -> float:
        return self.seconds - self.elapsed()

    def expired(self) -> bool:
        return self.remaining() < 0


class PacedChunks:
    """``(start, stop)`` ranges covering rows ``0..n``, each yielded only while the deadline
    has not passed; ``truncated`` says whether rows were left when it did."""

    def __init__(self, n: int, max_rows: int, deadline: Deadline) -> None:
        self.n = n
        self.max_rows = max(1, max_rows)
        self.deadline = deadline
        self.truncated = False

    def __iter__(self) -> Iterator[tuple[int, int]]:
        clock = self.deadline.clock
        start, size, per_row = 0, 1, -1.0
        while start < self.n:
            left = self.deadline.remaining()
            if left < 0:
                self.truncated = True
                return
            if per_row >= 0:  # after the first chunk: fit half of the time left
                fits = int(left / 2 / per_row) if per_row > 0 else self.max_rows
                size = max(1, min(self.max_rows, fits))
            stop = min(self.n, start + size)
            began = clock()
            yield start, stop
            per_row = (clock() - began) / (stop - start)
            start = stop
