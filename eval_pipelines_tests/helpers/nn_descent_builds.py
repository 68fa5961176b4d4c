"""The tests that build a pynndescent index in the pytest process, kept on one pytest worker.

Building an approximate index compiles pynndescent's NN-descent in the process that builds it,
and numba cannot cache that compilation (:mod:`eval_pipelines.core.embeddings.warmup`): every
test process that builds an index pays it once, and it is most of the time of the tests that
build one. Marked :data:`BUILDS_NN_DESCENT`, they share one ``xdist_group``, which ``make test``
(``--dist loadgroup``, :mod:`eval_pipelines_tests.helpers.xdist_groups`) sends to a single
worker: the suite compiles NN-descent once instead of once on each worker. Without
``--dist loadgroup`` (or without workers) the mark changes nothing.

The root ``conftest.py`` fails a test that is not marked and compiled NN-descent in its process
(:func:`nn_descent_compilations` grew during it), so a new test that builds an index joins the
group instead of compiling again on the other worker. A test process that only loads a built
index (``small_case_ann_indexes`` copies prebuilt files for CLI subprocesses) compiles nothing.
"""

from __future__ import annotations

import sys

import pytest

from eval_pipelines_tests.helpers.xdist_groups import group_names

GROUP = "nn_descent_builds"
BUILDS_NN_DESCENT = pytest.mark.xdist_group(GROUP)


def nn_descent_compilations() -> int:
    """How many specialisations of pynndescent's NN-descent this process has compiled (0 while
    pynndescent is not imported)."""
    module = sys.modules.get("pynndescent.pynndescent_")
    if module is None:
        return 0
    return len(module.nn_descent.signatures)


def in_group(item: pytest.Item) -> bool:
    """Whether the test carries :data:`BUILDS_NN_DESCENT`."""
    return GROUP in group_names(item)
