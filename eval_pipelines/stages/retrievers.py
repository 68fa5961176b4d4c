"""The searchers an evaluation needs, one per retrieval (``space:backend``) it uses, with a
record of how each one ran: backend, time, whether its index was built, and for the
approximate backend the recall measured against the exact search and the queries that fell
back to it."""

from __future__ import annotations

import functools
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eval_pipelines.core.csr_rows import subset_csr_rows
from eval_pipelines.core.holdout.grouping import Searcher, text_searcher
from eval_pipelines.core.holdout.retrieval import Retrieval
from eval_pipelines.core.holdout.spec import HoldoutSpec
from eval_pipelines.core.text.search_result import SearchResult
from eval_pipelines.stages.embedding_index import load_or_build_ann, load_vectors
from eval_pipelines.stages.text_index import IndexHandle, OpenWarehouse

# Queries of the seeded probe on which the approximate backend is compared with exact search.
RECALL_PROBE = 200


@dataclass
class RetrievalLog:
    """How one retrieval ran in this evaluation (a row of ``eval_retrievals``)."""

    retrieval: Retrieval
    purpose: str
    seconds: float = 0.0
    queries: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "retrieval": self.retrieval.key,
            "purpose": self.purpose,
            "space": self.retrieval.space,
            "backend": self.retrieval.backend,
            "requestedBackend": self.retrieval.requested,
            "queries": self.queries,
            "seconds": round(self.seconds, 3),
            **self.details,
        }


class _Timed:
    """A searcher that adds its time and query count to a log."""

    def __init__(self, searcher: Searcher, log: RetrievalLog) -> None:
        self.searcher = searcher
        self.log = log

    def __call__(self, query_docs: np.ndarray, **options: Any) -> SearchResult:
        started = time.perf_counter()
        result = self.searcher(query_docs, **options)
        self.log.seconds += time.perf_counter() - started
        self.log.queries += len(query_docs)
        return result


class _Approximate:
    """pynndescent with over-fetch; on the first call it also measures recall@k against the
    exact dense search on a seeded probe of the same queries, with the same masks, unless
    ``probe`` is off (the retrieval is searched again, and measured, in another step)."""

    def __init__(
        self,
        index: Any,
        vectors: np.ndarray,
        *,
        seed: int,
        threads: int,
        log: RetrievalLog,
        probe: bool = True,
    ) -> None:
        self.index = index
        self.vectors = vectors
        self.seed = seed
        self.threads = threads
        self.log = log
        self.probe = probe

    def __call__(self, query_docs: np.ndarray, **options: Any) -> SearchResult:
        from eval_pipelines.core.embeddings.ann import search_ann
        from eval_pipelines.core.embeddings.dense import search_dense

        found = search_ann(self.index, self.vectors, query_docs, **options)
        self.log.details["fallbackQueries"] = (
            self.log.details.get("fallbackQueries", 0) + found.fallback_queries
        )
        if self.probe and "recallAtK" not in self.log.details and len(query_docs):
            rng = np.random.default_rng([self.seed, 20])
            probe = np.sort(rng.permutation(len(query_docs))[:RECALL_PROBE])
            indptr, indices = options.get("exclude_indptr"), options.get("exclude_indices")
            sub_indptr = sub_indices = None
            if indptr is not None and indices is not None:
                sub_indptr, sub_indices = subset_csr_rows(indptr, indices, probe)
            exact = search_dense(
                self.vectors,
                query_docs[probe],
                k=options["k"],
                near_duplicate_threshold=options.get("near_duplicate_threshold"),
                exclude_indptr=sub_indptr,
                exclude_indices=sub_indices,
                n_threads=self.threads,
            )
            self.log.details.update(
                recall_details(found.result.neighbours[probe], exact.neighbours, options["k"])
            )
        return found.result


def recall_details(approximate: np.ndarray, exact: np.ndarray, k: int) -> dict[str, Any]:
    """recall@k of approximate neighbour lists against exact ones (``-1`` = no neighbour)."""
    hits = total = 0
    for got, truth in zip(approximate, exact, strict=True):
        truth_set = set(truth[truth >= 0].tolist())
        hits += len(truth_set & set(got[got >= 0].tolist()))
        total += len(truth_set)
    return {
        "recallAtK": round(hits / total, 4) if total else None,
        "recallK": k,
        "recallProbeQueries": int(len(exact)),
        "recallAgainst": "exact dense search, same queries and leave-out masks",
    }


def retrieval_purposes(spec: HoldoutSpec) -> dict[Retrieval, str]:
    """Each retrieval the spec uses (the grouping's and each variant's) and what for:
    ``grouping``, ``evidence`` or ``grouping+evidence``."""
    wanted: dict[Retrieval, str] = {}
    if spec.grouping.mode == "nearDuplicate":
        wanted[spec.grouping.retrieval] = "grouping"
    for retrieval in spec.retrievals:
        wanted[retrieval] = "grouping+evidence" if retrieval in wanted else "evidence"
    return wanted


def evaluation_searchers(
    spec: HoldoutSpec,
    text: IndexHandle | None,
    open_warehouse: OpenWarehouse,
    *,
    index_dir: Path,
    threads: int,
    keys: Collection[str] | None = None,
    unprobed: Collection[str] = (),
) -> tuple[dict[str, Searcher], list[RetrievalLog]]:
    """A searcher per retrieval the spec uses (the grouping's and each variant's), or only
    per retrieval in ``keys``, so a step loads only the vectors and indexes it searches.

    ``text`` is needed only when a TF-IDF retrieval is built. An approximate retrieval in
    ``unprobed`` skips the recall probe: a step passes the retrieval that another step searches
    again and measures, so the probe runs once per evaluation.
    """
    searchers: dict[str, Searcher] = {}
    logs: list[RetrievalLog] = []
    vectors: np.ndarray | None = None
    for retrieval, purpose in retrieval_purposes(spec).items():
        if keys is not None and retrieval.key not in keys:
            continue
        log = RetrievalLog(retrieval, purpose)
        logs.append(log)
        if retrieval.space == "tfidf":
            assert text is not None, "a TF-IDF retrieval needs the text index"
            searchers[retrieval.key] = _Timed(text_searcher(text.index, n_threads=threads), log)
            log.details["indexBuilt"] = text.built
            continue
        assert spec.embeddings_version is not None
        if vectors is None:
            vectors = load_vectors(open_warehouse, index_dir, spec.case_id, spec.embeddings_version)
        log.details["embeddingsVersion"] = spec.embeddings_version
        if retrieval.backend == "exact":
            from eval_pipelines.core.embeddings.dense import search_dense

            exact = functools.partial(search_dense, vectors, n_threads=threads)
            searchers[retrieval.key] = _Timed(exact, log)
            continue
        handle = load_or_build_ann(
            index_dir, spec.case_id, spec.embeddings_version, vectors, n_threads=threads
        )
        log.details.update(indexBuilt=handle.built, indexSeconds=round(handle.seconds, 3))
        approximate = _Approximate(
            handle.index,
            vectors,
            seed=spec.seed,
            threads=threads,
            log=log,
            probe=retrieval.key not in unprobed,
        )
        searchers[retrieval.key] = _Timed(approximate, log)
    return searchers, logs
