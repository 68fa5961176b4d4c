"""Seeded sample of labelled records."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eval_pipelines.core.hashing import hash_strings


@dataclass(frozen=True)
class Sample:
    """A drawn sample.

    Attributes
    ----------
    positions
        Row positions (in the case's records ordered by ``record_key``), in draw order.
    keys
        The sampled record keys, in draw order.
    sample_hash
        Hash of the sorted sampled keys: equal hashes mean equal samples.
    requested_size, size
        What was asked for and what was drawn (smaller only when the case has fewer records).
    seed
        The seed the draw used.
    """

    positions: np.ndarray
    keys: tuple[str, ...]
    sample_hash: str
    requested_size: int
    size: int
    seed: int


def draw_sample(record_keys: list[str], sample_size: int, *, seed: int) -> Sample:
    """Draw ``sample_size`` records uniformly without replacement, reproducibly for a seed.

    ``record_keys`` must be sorted, so the draw does not depend on storage order: the same
    case version, seed and size always give the same sample, whatever the grouping.
    """
    if record_keys != sorted(record_keys):
        raise ValueError("record_keys must be sorted so the sample is reproducible")
    rng = np.random.default_rng(seed)
    size = min(sample_size, len(record_keys))
    positions = rng.choice(len(record_keys), size=size, replace=False).astype(np.int64)
    keys = tuple(record_keys[i] for i in positions)
    return Sample(
        positions=positions,
        keys=keys,
        sample_hash=hash_strings(sorted(keys)),
        requested_size=sample_size,
        size=size,
        seed=seed,
    )
