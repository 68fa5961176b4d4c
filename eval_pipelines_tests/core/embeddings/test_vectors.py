"""Reading and checking a case's own embeddings: every refusal names the field, the offending
key or value, and the rule; accepted vectors come back unit-length in record order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from eval_pipelines.core.embeddings.vectors import (
    check_embeddings,
    embeddings_from_frame,
    read_embeddings_file,
)
from eval_pipelines.core.errors import InputError

KEYS = ["a", "b", "c", "d"]


def _matrix(seed: int = 0, n: int = 4, dim: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


@pytest.mark.parametrize("kind", ["array", "list"])
def test_reads_array_and_list_columns(tmp_path: Path, kind: str) -> None:
    matrix = _matrix()
    series = pl.Series("vector", matrix, dtype=pl.Array(pl.Float32, 3))
    if kind == "list":
        series = series.cast(pl.List(pl.Float64))
    path = tmp_path / "emb.parquet"
    pl.DataFrame({"record_key": KEYS, "vector": series}).write_parquet(path)
    keys, vectors = read_embeddings_file(path)
    assert keys == KEYS
    assert vectors.dtype == np.float32 and vectors.flags.c_contiguous
    np.testing.assert_array_equal(vectors, matrix)


def test_refuses_an_ambiguous_vector_column_naming_the_columns(tmp_path: Path) -> None:
    path = tmp_path / "emb.parquet"
    pl.DataFrame(
        {"record_key": KEYS, "v1": _matrix().tolist(), "v2": _matrix(1).tolist()}
    ).write_parquet(path)
    with pytest.raises(InputError, match=r"exactly one vector column.*'v1', 'v2'"):
        read_embeddings_file(path)
    keys, vectors = read_embeddings_file(path, vector_column="v2")
    np.testing.assert_allclose(vectors, _matrix(1))
    with pytest.raises(InputError, match="no key column 'id'"):
        read_embeddings_file(path, key_column="id")
    with pytest.raises(InputError, match="no vector column 'v3'"):
        read_embeddings_file(path, vector_column="v3")
    with pytest.raises(InputError, match="does not exist"):
        read_embeddings_file(tmp_path / "missing.parquet")


def test_embedding_column_of_a_records_frame_with_integer_keys() -> None:
    frame = pl.DataFrame({"id": [1, 2, 3, 4], "text": ["w"] * 4, "emb": _matrix().tolist()})
    keys, vectors = embeddings_from_frame(frame, key_column="id", embedding_column="emb")
    # Keys become strings, as the records' keys do.
    assert keys == ["1", "2", "3", "4"]
    assert vectors.shape == (4, 3)
    with pytest.raises(InputError, match="column not found"):
        embeddings_from_frame(frame, key_column="id", embedding_column="embedding")


def test_refuses_ragged_vectors_naming_the_key_and_both_lengths() -> None:
    frame = pl.DataFrame({"k": KEYS, "v": [[1.0, 2.0], [1.0, 2.0], [1.0, 2.0, 3.0], [1.0, 2.0]]})
    with pytest.raises(InputError) as error:
        embeddings_from_frame(frame, key_column="k", embedding_column="v")
    assert error.value.field == "v['c']"
    assert "3 dimensions" in str(error.value) and "'a': 2" in str(error.value)
    with pytest.raises(InputError, match=r"embeddings\['b'\].*same length"):
        check_embeddings(KEYS[:2], KEYS[:2], [[1.0, 2.0], [1.0, 2.0, 3.0]])


def test_refuses_missing_vectors_and_missing_elements() -> None:
    with pytest.raises(InputError, match=r"v\['b'\]=None: every record needs a vector"):
        embeddings_from_frame(
            pl.DataFrame({"k": KEYS[:2], "v": [[1.0, 2.0], None]}),
            key_column="k",
            embedding_column="v",
        )
    with pytest.raises(InputError, match=r"v\['b'\]\[1\]=None: vector elements must not be null"):
        embeddings_from_frame(
            pl.DataFrame({"k": KEYS[:2], "v": [[1.0, 2.0], [3.0, None]]}),
            key_column="k",
            embedding_column="v",
        )
    with pytest.raises(InputError, match="every row needs a key"):
        embeddings_from_frame(
            pl.DataFrame({"k": ["a", None], "v": [[1.0, 2.0], [3.0, 4.0]]}),
            key_column="k",
            embedding_column="v",
        )


def test_refuses_non_float_columns_and_fewer_than_two_dimensions() -> None:
    with pytest.raises(InputError, match="must be a List or Array of floats"):
        embeddings_from_frame(
            pl.DataFrame({"k": KEYS[:2], "v": ["x", "y"]}), key_column="k", embedding_column="v"
        )
    with pytest.raises(InputError, match="at least 2 dimensions"):
        embeddings_from_frame(
            pl.DataFrame({"k": KEYS[:2], "v": [[1.0], [2.0]]}), key_column="k", embedding_column="v"
        )
    with pytest.raises(InputError, match="at least 2 dimensions"):
        check_embeddings(KEYS, KEYS, np.ones((4, 1)))


def test_returns_unit_vectors_in_record_order() -> None:
    matrix = _matrix(n=4, dim=5)
    records = ["c", "a", "d", "b"]
    out = check_embeddings(records, KEYS, matrix)
    assert out.dtype == np.float32 and out.flags.c_contiguous
    expected = matrix[[2, 0, 3, 1]] / np.linalg.norm(matrix[[2, 0, 3, 1]], axis=1, keepdims=True)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)


def test_huge_and_tiny_vectors_are_normalised_not_refused() -> None:
    # float32 squares of these overflow / underflow; the check redoes them in float64.
    matrix = np.array([[3e30, 4e30], [3e-30, 4e-30], [3e300, 4e300]])
    out = check_embeddings(["a", "b", "c"], ["a", "b", "c"], matrix)
    np.testing.assert_allclose(out, [[0.6, 0.8]] * 3, rtol=1e-6)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_refuses_non_finite_values_naming_the_key(bad: float) -> None:
    matrix = _matrix()
    matrix[2, 1] = bad
    with pytest.raises(InputError, match=r"embeddings\['c'\].*must be finite"):
        check_embeddings(KEYS, KEYS, matrix)


def test_refuses_an_all_zero_vector_naming_the_key() -> None:
    matrix = _matrix()
    matrix[3] = 0.0
    with pytest.raises(InputError, match=r"embeddings\['d'\]='all-zero vector'"):
        check_embeddings(KEYS, KEYS, matrix)


def test_refuses_repeated_unknown_and_missing_keys() -> None:
    matrix = _matrix()
    with pytest.raises(InputError, match=r"'b'.*1 keys appear more than once"):
        check_embeddings(KEYS, ["a", "b", "b", "d"], matrix)
    with pytest.raises(InputError, match=r"'x'.*1 keys are not records of the case"):
        check_embeddings(KEYS, ["a", "b", "x", "d"], matrix)
    records = KEYS + [f"r{i}" for i in range(10)]
    with pytest.raises(InputError) as error:
        check_embeddings(records, KEYS, matrix)
    message = str(error.value)
    assert "10 of 14 records without a vector" in message
    assert "'r0', 'r1', 'r2', 'r3', 'r4', ..." in message
    with pytest.raises(InputError, match="must match the 3 keys"):
        check_embeddings(KEYS[:3], KEYS[:3], matrix)


@pytest.mark.slow
def test_a_million_vectors_check_quickly() -> None:
    """Vectorised: 1M x 256 (2 GB in and out) in a few seconds, not minutes."""
    n, dim = 1_000_000, 256
    matrix = np.ones((n, dim), dtype=np.float32)
    keys = [f"r{i:07d}" for i in range(n)]
    out = check_embeddings(keys, keys, matrix)
    assert out.shape == (n, dim)
    np.testing.assert_allclose(out[-1], 1 / 16)
