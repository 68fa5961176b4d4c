"""Compile and cache the core's numeric kernels once: ``python -m eval_pipelines.core.warmup``
(``make install`` runs it), so the first evaluation does not pay the JIT cost."""

from __future__ import annotations

import time

from eval_pipelines.core.embeddings.warmup import warm_up_dense
from eval_pipelines.core.text.warmup import warm_up_sparse


def main() -> None:
    started = time.perf_counter()
    warm_up_sparse()
    # The dense search and pynndescent (a build, queries, save and load): pynndescent's own
    # kernels take minutes to compile cold, which a user's first command must never pay.
    warm_up_dense()
    print(f"numeric kernels ready in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
