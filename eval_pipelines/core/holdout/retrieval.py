"""Where an evaluation searches evidence (or near-duplicates): the vector space and the search
backend, parsed from a spec's ``retrieval`` object and stored with it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.errors import InputError

SPACES = ("tfidf", "embedding")
BACKENDS = ("exact", "pynndescent", "auto")


@dataclass(frozen=True)
class Retrieval:
    """Where evidence (or near-duplicates) are searched: the vector space and the backend.

    Attributes
    ----------
    space
        ``tfidf`` (the case's hashed TF-IDF vectors) or ``embedding`` (the case's embeddings,
        pinned per evaluation).
    backend
        ``exact`` or ``pynndescent``, resolved when the evaluation is registered.
    requested
        What was asked for (``auto`` stays visible in the report after it is resolved).
    """

    space: str = "tfidf"
    backend: str = "exact"
    requested: str = "exact"

    @property
    def key(self) -> str:
        """Storage key of the evidence retrieved this way, e.g. ``embedding:pynndescent``."""
        return f"{self.space}:{self.backend}"

    @property
    def is_default(self) -> bool:
        return self == Retrieval()

    def to_json(self) -> dict[str, Any]:
        data = {"space": self.space, "backend": self.backend}
        if self.requested != self.backend:
            data["requested"] = self.requested
        return data


def retrieval_from_json(raw: dict[str, Any] | None) -> Retrieval:
    """Rebuild a stored retrieval (specs stored before embeddings have none: TF-IDF, exact)."""
    if raw is None:
        return Retrieval()
    return Retrieval(
        space=raw["space"], backend=raw["backend"], requested=raw.get("requested", raw["backend"])
    )


def parse_retrieval(
    raw: Any, *, where: str, n_records: int | None = None, n_queries: int | None = None
) -> Retrieval:
    """Parse ``{space, backend}``; ``auto`` is resolved from the case's size and the sample's
    by the measured cost model of
    :func:`eval_pipelines.core.embeddings.ann.choose_backend` (index build included).

    The approximate index serves the embedding space only: on sparse TF-IDF pynndescent builds
    its index far slower than the exact scan answers the whole sample, and recalls less (the
    figures: docs/embeddings.md, listed in docs/benchmarks.md under "Measured figures on other
    pages").
    """
    if raw is None:
        return Retrieval()
    if not isinstance(raw, dict):
        raise InputError(where, raw, "must be an object {space, backend}")
    unknown = set(raw) - {"space", "backend"}
    if unknown:
        key = sorted(unknown)[0]
        raise InputError(f"{where}.{key}", raw[key], "unknown; use space, backend")
    space = raw.get("space", "tfidf")
    if space not in SPACES:
        raise InputError(f"{where}.space", space, f"must be one of {', '.join(SPACES)}")
    requested = raw.get("backend", "exact")
    if requested not in BACKENDS:
        raise InputError(f"{where}.backend", requested, f"must be one of {', '.join(BACKENDS)}")
    if space == "tfidf" and requested == "pynndescent":
        raise InputError(
            f"{where}.backend",
            requested,
            "serves space embedding only: on sparse TF-IDF the exact scan is faster and "
            "exact (pynndescent measured 347 s to build at 100k records, recall@10 0.94)",
        )
    backend = requested
    if requested == "auto":
        backend = "exact"
        if space == "embedding" and n_records and n_queries:
            # Imported here: it loads numba, which only an `auto` request needs.
            from eval_pipelines.core.embeddings.ann import choose_backend

            backend = choose_backend("auto", n_records, n_queries)
    return Retrieval(space=space, backend=backend, requested=requested)
