"""Search inputs built to make equality with the brute-force reference hard, and the one
check of that equality: shared by the text index's tests (plain, pruned, sharded, segmented).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from eval_pipelines.core.text import inverted_index, search_result
from eval_pipelines.core.text import retrieval as rt

TEMPLATES = [
    "{fx} of {bone}, {side}, {enc}",
    "{fx} of shaft of {bone}, {side}",
    "Pain in {side} {joint}",
    "Osteoarthritis of {side} {joint}, stage {n}",
    "{burn} degree burn of {side} {joint}, {enc}",
    "Type {n} diabetes with {comp}",
    "Contusion of {side} {joint} {enc}",
]
FILL = {
    "fx": ["Displaced fracture", "Nondisplaced fracture", "Fracture", "Torus fracture", "Fx"],
    "bone": ["femur", "tibia", "fibula", "radius", "ulna", "humerus", "r femr"],
    "side": ["left", "right", "bilateral", "unspecified", "l", "r"],
    "enc": ["initial encounter", "subsequent encounter", "sequela", "init", "subs"],
    "joint": ["knee", "hip", "shoulder", "elbow", "wrist", "ankle"],
    "n": ["1", "2", "3", "4", "10"],
    "burn": ["First", "Second", "Third"],
    "comp": ["neuropathy", "nephropathy", "retinopathy", "ketoacidosis", "hyperosmolarity"],
}


def synthetic_texts(n: int, seed: int) -> list[str]:
    """Near-duplicate-rich texts: templates with swapped words, laterality and numbers."""
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    while len(texts) < n:
        template = TEMPLATES[int(rng.integers(len(TEMPLATES)))]
        values = {key: words[int(rng.integers(len(words)))] for key, words in FILL.items()}
        text = template.format(**values)
        if rng.random() < 0.1:
            # A word swap keeps the words but changes the bigrams.
            words = text.split()
            i, j = rng.integers(len(words), size=2)
            words[i], words[j] = words[j], words[i]
            text = " ".join(words)
        texts.append(text)
    # Edge rows: exact duplicates, empty texts, and a text sharing no feature with the rest.
    texts[10] = texts[11] = texts[12] = texts[13]
    texts[20] = ""
    texts[21] = "?!"
    texts[30] = "ǅǆǇ Ꙁꙁ"
    return texts


def random_matrix(seed: int, n_docs: int = 600, n_features: int = 80) -> sp.csr_matrix:
    """L2-normalised rows of small integer weights: ties, duplicates, empty rows."""
    rng = np.random.default_rng(seed)
    # Per-feature document frequency from very common to rare.
    density = np.concatenate(
        [rng.uniform(0.3, 0.8, 6), rng.uniform(0.02, 0.1, 30), rng.uniform(0.002, 0.01, 44)]
    )[:n_features]
    present = rng.random((n_docs, n_features)) < density
    weights = np.where(present, rng.integers(1, 4, size=(n_docs, n_features)), 0).astype(np.float32)
    weights[rng.choice(n_docs, max(1, n_docs // 40), replace=False)] = 0.0
    copies = rng.choice(n_docs, 2 * max(1, n_docs // 20), replace=False)
    half = copies.shape[0] // 2
    weights[copies[half:]] = weights[copies[:half]]
    norms = np.linalg.norm(weights, axis=1, keepdims=True)
    weights = np.divide(weights, norms, out=np.zeros_like(weights), where=norms > 0)
    return sp.csr_matrix(weights.astype(np.float32))


def exclusion_lists(
    index: inverted_index.TextIndex, queries: np.ndarray, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Leave-out lists that bite: part of each query's own top documents, plus noise."""
    rng = np.random.default_rng(seed)
    plain = rt.search_brute_force(index, queries, k=12)
    lists = []
    for row in range(queries.shape[0]):
        own = plain.neighbours[row, : int(rng.integers(0, 8))]
        noise = rng.integers(0, index.n_docs, int(rng.integers(0, 10)))
        lists.append(np.concatenate([own[own >= 0], noise]))
    indptr = np.concatenate([[0], np.cumsum([len(x) for x in lists])])
    return indptr, np.concatenate(lists).astype(np.int32)


def assert_same_search(a: search_result.SearchResult, b: search_result.SearchResult) -> None:
    for field in ("neighbours", "similarities", "near_duplicate_indptr", "near_duplicate_indices"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
        assert getattr(a, field).dtype == getattr(b, field).dtype, field
