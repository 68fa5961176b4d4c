"""Which sampled records belong together when a difference is resampled.

Records that were held out together (one is on another's leave-out list: the same group
field, or near-duplicates) are not independent evidence: a paired interval that treated
them as such would be too narrow. They form one cluster, and the bootstrap resamples
clusters (000's grouping, carried into the statistics).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def sample_clusters(
    sample_keys: Sequence[str], held_out_together: Iterable[tuple[str, str]]
) -> list[int]:
    """A cluster number per sampled record (in ``sample_keys`` order): the connected
    components of "held out together" among the sampled records.

    Parameters
    ----------
    sample_keys
        The evaluation's sampled record keys.
    held_out_together
        ``(sample_key, excluded_key)`` pairs of the leave-out lists; pairs whose excluded
        record was not sampled link nothing.
    """
    position = {key: i for i, key in enumerate(sample_keys)}
    parent = list(range(len(sample_keys)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in held_out_together:
        if a in position and b in position:
            ra, rb = root(position[a]), root(position[b])
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    roots = [root(i) for i in range(len(sample_keys))]
    numbering: dict[int, int] = {}
    return [numbering.setdefault(r, len(numbering)) for r in roots]
