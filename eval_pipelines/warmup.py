"""Compile and cache the numeric kernels once (``make install`` runs this), so the first
evaluation does not pay the JIT cost."""

from __future__ import annotations

import time

import numpy as np

from eval_pipelines.core.text.retrieval import build_text_index, search
from eval_pipelines.core.text.vectorize import fit_transform


def main() -> None:
    started = time.perf_counter()
    texts = ["warm up the kernels", "warm the kernels up", "another text", "kernels"]
    _, matrix = fit_transform(texts)
    index = build_text_index(matrix)
    search(index, np.arange(len(texts)), k=2, near_duplicate_threshold=0.9)
    print(f"numeric kernels ready in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
