"""A text index built, stored and opened a segment (a range of documents) at a time.

One index over every record holds the documents' rows and their posting lists at once, and
building it holds both in memory: about 2.4 GB per million records, so ten million would not
fit on a 24 GB machine. A segmented index fits the IDF on every text first (one pass that
keeps no rows, :func:`~eval_pipelines.core.text.vectorize.fit`), then vectorises, indexes and
writes one segment at a time, so building needs the memory of one segment, and a search reads
one segment's files at a time (:func:`~eval_pipelines.core.text.retrieval.search` merges the
segments exactly). Every segment is weighted with the same IDF, so its rows are the rows of
the unsegmented matrix and every search result is the unsegmented one.

On disk the index is a directory: ``starts.npy`` (the first document of each segment, then the
number of documents) and one ``segment-NNNNN`` directory per segment in the format of
:func:`~eval_pipelines.core.text.index_files.save_text_index`. It is written to a temporary
directory and moved into place whole, so a reader or a crash sees the old index or the new
one, never part of one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from eval_pipelines.core.text.index_files import (
    load_text_index,
    save_array,
    save_text_index,
    staged_directory,
)
from eval_pipelines.core.text.inverted_index import SegmentedIndex, build_text_index
from eval_pipelines.core.text.vectorize import (
    DEFAULT_N_FEATURES,
    fit,
    fit_transform,
    transform,
)

# A million documents per segment: building one holds about 2.4 GB of rows and postings
# (plus the texts), and the demo's 130,525 records stay one segment.
DEFAULT_SEGMENT_DOCS = 1 << 20
_STARTS = "starts.npy"


def segment_ranges(n_docs: int, segment_docs: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` of each segment of ``n_docs`` documents: full segments of
    ``segment_docs``, then the rest; one empty range when there are no documents."""
    if segment_docs < 1:
        raise ValueError(f"segment_docs={segment_docs}: must be at least 1")
    if n_docs < 0:
        raise ValueError(f"n_docs={n_docs}: must not be negative")
    return [(lo, min(lo + segment_docs, n_docs)) for lo in range(0, n_docs, segment_docs)] or [
        (0, 0)
    ]


def _segment_dir(path: Path, number: int) -> Path:
    return path / f"segment-{number:05d}"


def write_segmented_index(
    texts: Sequence[str],
    path: Path,
    *,
    segment_docs: int = DEFAULT_SEGMENT_DOCS,
    n_features: int = DEFAULT_N_FEATURES,
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """Vectorise texts and write their index, a segment at a time, atomically.

    Parameters
    ----------
    texts
        The corpus in document order.
    path
        Destination directory (by convention named ``*.tfidf``); an index already there is
        replaced whole once the new one is complete.
    segment_docs
        Documents per segment (the last one holds the rest).
    n_features
        Hash buckets of the vectoriser, a power of two.
    progress
        Called with (segments written, segments in all) after each segment.
    """
    path = Path(path)
    ranges = segment_ranges(len(texts), segment_docs)
    if len(ranges) == 1:
        # One segment: the texts are hashed once, not once to fit and again to transform.
        _, whole = fit_transform(texts, n_features=n_features)

        def rows(lo: int, hi: int) -> sp.csr_matrix:
            return whole

    else:
        model = fit(texts, n_features=n_features)

        def rows(lo: int, hi: int) -> sp.csr_matrix:
            return transform(model, texts[lo:hi])

    with staged_directory(path) as staging:
        for number, (lo, hi) in enumerate(ranges):
            # One segment's rows and postings in memory at a time.
            save_text_index(build_text_index(rows(lo, hi)), _segment_dir(staging, number))
            if progress is not None:
                progress(number + 1, len(ranges))
        save_array(
            staging / _STARTS,
            np.array([lo for lo, _ in ranges] + [len(texts)], dtype=np.int64),
        )


def load_segmented_index(path: Path) -> SegmentedIndex:
    """Open an index written by :func:`write_segmented_index`, memory-mapped read-only.

    Raises
    ------
    FileNotFoundError
        When ``path`` is not a segmented index (missing, or an index of an older format).
    ValueError
        When its segments do not hold the documents ``starts.npy`` says they do.
    """
    path = Path(path)
    starts = np.load(path / _STARTS, allow_pickle=False)
    index = SegmentedIndex(
        tuple(load_text_index(_segment_dir(path, number)) for number in range(len(starts) - 1))
    )
    if not np.array_equal(index.starts, starts):
        raise ValueError(
            f"{path}: segments start at {index.starts.tolist()}, starts.npy says {starts.tolist()}"
        )
    return index
