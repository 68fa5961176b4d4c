"""A numpy generator that records the shape of each block of integers drawn from it: the
deterministic measure of a bootstrap's work (its wall time is a benchmark,
``benchmarks/suite_timings.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np


class CountingGenerator(np.random.Generator):
    """``np.random.default_rng(seed)``'s stream, with ``draws`` the shape of every
    ``integers`` call made on it."""

    def __init__(self, seed: int) -> None:
        super().__init__(np.random.PCG64(seed))
        self.draws: list[tuple[int, ...]] = []

    def integers(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        drawn = super().integers(*args, **kwargs)
        self.draws.append(np.shape(drawn))
        return drawn
