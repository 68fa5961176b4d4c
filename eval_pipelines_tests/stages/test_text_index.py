"""The stage-side index cache: built once, memory-mapped, reused in process, rebuilt safely."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from eval_pipelines.core.text import index_files, inverted_index
from eval_pipelines.core.text import retrieval as rt
from eval_pipelines.core.text import segments as sg
from eval_pipelines.stages import text_index as ti
from eval_pipelines_tests.helpers.text_search import synthetic_texts


@pytest.fixture(autouse=True)
def _empty_cache() -> Iterator[None]:
    ti.clear_index_cache()
    yield
    ti.clear_index_cache()


def test_index_is_built_once_then_reused(tmp_path: Path) -> None:
    texts = synthetic_texts(500, seed=3)
    first = ti.load_or_build_index(tmp_path, "case", "v1", texts)
    assert first.built
    assert first.path == tmp_path / "case-v1.tfidf" and first.path.is_dir()
    # Even a fresh build is handed out memory-mapped, read-only.
    assert not first.index.segments[0].docs.data.flags.writeable
    second = ti.load_or_build_index(tmp_path, "case", "v1", texts)
    assert not second.built
    assert second.index is first.index  # from the in-process cache, not reopened
    ti.clear_index_cache()
    third = ti.load_or_build_index(tmp_path, "case", "v1", texts)
    assert not third.built and third.index is not first.index
    queries = np.arange(0, 500, 9)
    for a in (first, third):
        np.testing.assert_array_equal(
            rt.search(a.index, queries, k=5).neighbours,
            rt.search(inverted_index.build_text_index(a.index.matrix()), queries, k=5).neighbours,
        )


def test_a_rebuilt_index_is_not_served_from_the_cache(tmp_path: Path) -> None:
    texts = synthetic_texts(300, seed=4)
    cached = ti.load_or_build_index(tmp_path, "case", "v1", texts)
    # Another process replaces the directory (same name, new contents).
    sg.write_segmented_index(texts[:100], cached.path)
    reopened = ti.load_or_build_index(tmp_path, "case", "v1", texts[:100])
    assert not reopened.built
    assert reopened.index.n_docs == 100


def test_old_npz_files_are_never_read_and_removed_once_rebuilt(tmp_path: Path) -> None:
    texts = synthetic_texts(200, seed=5)
    old = tmp_path / "case-v1.npz"
    old.write_bytes(b"not an index")
    other_version = tmp_path / "case-v9.npz"
    other_version.write_bytes(b"not an index either")
    assert ti.load_or_build_index(tmp_path, "case", "v1", texts).built
    assert not old.exists()
    assert other_version.exists()  # only the version just rebuilt


def test_broken_and_unsegmented_directories_are_rebuilt(tmp_path: Path) -> None:
    texts = synthetic_texts(200, seed=5)
    broken = tmp_path / "case-v2.tfidf"
    broken.mkdir()
    (broken / "shape.npy").write_bytes(b"garbage")
    handle = ti.load_or_build_index(tmp_path, "case", "v2", texts)
    assert handle.built and handle.index.n_docs == 200
    # An index of the unsegmented format (one directory of arrays) is rebuilt as segments.
    unsegmented = tmp_path / "case-v3.tfidf"
    index_files.save_text_index(inverted_index.build_text_index(handle.index.matrix()), unsegmented)
    rebuilt = ti.load_or_build_index(tmp_path, "case", "v3", texts)
    assert rebuilt.built and (unsegmented / "starts.npy").exists()


@pytest.mark.exhaustive
def test_a_large_case_is_built_in_segments(tmp_path: Path) -> None:
    texts = synthetic_texts(500, seed=6)
    handle = ti.load_or_build_index(tmp_path, "case", "v1", texts, segment_docs=128)
    assert [s.n_docs for s in handle.index.segments] == [128, 128, 128, 116]
    whole = ti.load_or_build_index(tmp_path, "case", "v2", texts)
    queries = np.arange(0, 500, 3)
    expected = rt.search(whole.index, queries, k=8, near_duplicate_threshold=0.95)
    found = rt.search(handle.index, queries, k=8, near_duplicate_threshold=0.95)
    np.testing.assert_array_equal(found.neighbours, expected.neighbours)
    np.testing.assert_array_equal(found.near_duplicate_indices, expected.near_duplicate_indices)
