"""A case's own embeddings: read them, check them against the case's records, normalise.

Embeddings arrive as a Parquet file of ``record_key`` plus one fixed-length float vector
column, or as such a column in the records file (``embedding_column``). Reading turns the
column into a ``(n, dim)`` float32 matrix and refuses anything that is not one: missing
vectors, missing elements, vectors of different lengths, fewer than two dimensions.
:func:`check_embeddings` then checks the values and the keys against the records and returns
unit-length vectors in record order, the form every search expects.

Everything is vectorised (Arrow buffers, numpy, polars joins): a million 256-d vectors are
read and checked in seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.files import check_table_file

__all__ = ["check_embeddings", "embeddings_from_frame", "read_embeddings_file"]

# Rows checked and normalised per step: bounds the temporaries on million-row inputs.
_ROWS_PER_STEP = 65_536
# Keys quoted in an error message about many keys.
_KEYS_SHOWN = 5


def read_embeddings_file(
    embeddings_path: Path | str,
    *,
    key_column: str = "record_key",
    vector_column: str | None = None,
) -> tuple[list[str], npt.NDArray[np.float32]]:
    """Read a Parquet file of record keys and one fixed-length float vector per key.

    Parameters
    ----------
    embeddings_path
        Parquet file with the key column and a vector column of type ``List`` or ``Array`` of
        floats.
    key_column
        Column holding the record keys (cast to strings, as the records' keys are).
    vector_column
        Column holding the vectors; ``None`` picks the only other column and refuses when
        there is not exactly one.

    Returns
    -------
    keys : list of str
        One key per row, in file order.
    vectors : numpy.ndarray
        ``(len(keys), dim)`` float32, as stored (not yet normalised; see
        :func:`check_embeddings`).

    Raises
    ------
    InputError
        When the file cannot be read, a column is missing or ambiguous, or the vectors are not
        a fixed-length float matrix (naming the first offending key).
    """
    path = Path(embeddings_path)
    if not path.exists():
        raise InputError("embeddings_path", str(path), "file does not exist")
    check_table_file(path, "embeddings_path")
    try:
        columns = list(pl.read_parquet_schema(path))
    except (pl.exceptions.PolarsError, OSError) as error:
        raise InputError(
            "embeddings_path", str(path), f"could not be read as Parquet: {error}"
        ) from error
    if key_column not in columns:
        raise InputError(
            "embeddings_path", str(path), f"has no key column {key_column!r} (columns: {columns})"
        )
    if vector_column is None:
        others = [c for c in columns if c != key_column]
        if len(others) != 1:
            raise InputError(
                "embeddings_path",
                str(path),
                f"needs exactly one vector column besides {key_column!r} (columns: {columns}); "
                "name it explicitly",
            )
        vector_column = others[0]
    elif vector_column not in columns:
        raise InputError(
            "embeddings_path",
            str(path),
            f"has no vector column {vector_column!r} (columns: {columns})",
        )
    frame = pl.read_parquet(path, columns=[key_column, vector_column])
    return embeddings_from_frame(frame, key_column=key_column, embedding_column=vector_column)


def embeddings_from_frame(
    frame: pl.DataFrame, *, key_column: str, embedding_column: str
) -> tuple[list[str], npt.NDArray[np.float32]]:
    """Keys and vectors from two columns of a frame, e.g. a records file's embedding column.

    Parameters
    ----------
    frame
        A frame with both columns.
    key_column
        Column holding the record keys (cast to strings, as the records' keys are).
    embedding_column
        Column of type ``List`` or ``Array`` of floats, one vector per row.

    Returns
    -------
    keys : list of str
        One key per row, in frame order.
    vectors : numpy.ndarray
        ``(len(keys), dim)`` float32, as stored.

    Raises
    ------
    InputError
        As :func:`read_embeddings_file`.
    """
    for column in (key_column, embedding_column):
        if column not in frame.columns:
            raise InputError(
                "embedding_column" if column == embedding_column else "key_column",
                column,
                f"column not found (columns: {frame.columns})",
            )
    keys = frame.get_column(key_column).cast(pl.String)
    if keys.null_count():
        row = int(keys.is_null().arg_max() or 0)
        raise InputError(f"embeddings.{key_column}", None, f"every row needs a key (row {row})")
    key_list = keys.to_list()
    vectors = _series_matrix(frame.get_column(embedding_column), key_list, embedding_column)
    return key_list, vectors


def check_embeddings(
    record_keys: Sequence[str],
    keys: Sequence[str],
    vectors: npt.ArrayLike | pl.Series,
) -> npt.NDArray[np.float32]:
    """Check a case's embeddings against its records; return them normalised, in record order.

    Parameters
    ----------
    record_keys
        The case's record keys, unique; the output follows their order.
    keys
        The key of each vector.
    vectors
        One vector per key: a ``(len(keys), dim)`` float matrix, a polars ``List``/``Array``
        series, or a sequence of sequences (ragged ones are refused, naming the key).

    Returns
    -------
    numpy.ndarray
        ``(len(record_keys), dim)`` float32, C-contiguous, every row of unit L2 norm; row
        ``i`` is the vector of ``record_keys[i]``.

    Raises
    ------
    InputError
        Naming the field, the first offending key or value, and the rule, when: vectors have
        different lengths, a vector or element is missing, a value is not finite, a vector is
        all zeros, ``dim < 2``, a key repeats, a key is not a record, or records lack a vector.
    """
    key_list = [str(key) for key in keys] if not isinstance(keys, list) else keys
    matrix = _as_matrix(vectors, key_list)
    if matrix.shape[0] != len(key_list):
        raise InputError(
            "embeddings", f"{matrix.shape[0]} vectors", f"must match the {len(key_list)} keys"
        )
    order = _record_order(list(record_keys), key_list)
    return _normalised(matrix, order, key_list)


# --------------------------------------------------------------------------------------------
# Structure: a fixed-length float matrix
# --------------------------------------------------------------------------------------------


def _as_matrix(vectors: npt.ArrayLike | pl.Series, keys: list[str]) -> np.ndarray:
    """A 2-d float matrix from any accepted form, with the structural checks."""
    if isinstance(vectors, pl.Series):
        return _series_matrix(vectors, keys, "embeddings")
    if isinstance(vectors, np.ndarray) and vectors.dtype != object:
        if vectors.ndim != 2:
            raise InputError(
                "embeddings.shape", vectors.shape, "must be a 2-d matrix, one row per key"
            )
        if not np.issubdtype(vectors.dtype, np.floating):
            raise InputError("embeddings.dtype", str(vectors.dtype), "must hold floats")
        _check_dim(vectors.shape[1])
        return vectors
    # Sequences of sequences go through polars, whose List type keeps ragged rows and nulls
    # so that the structural check can name the offending key.
    try:
        values: Any = vectors
        series = pl.Series("embeddings", values, strict=False)
    except (TypeError, ValueError, pl.exceptions.PolarsError) as error:
        raise InputError(
            "embeddings", type(vectors).__name__, f"not a list of vectors: {error}"
        ) from error
    return _series_matrix(series, keys, "embeddings")


def _check_dim(dim: int) -> None:
    if dim < 2:
        raise InputError("embeddings.dim", dim, "vectors need at least 2 dimensions")


def _series_matrix(series: pl.Series, keys: list[str], field: str) -> np.ndarray:
    """``(n, dim)`` float32 from a ``List``/``Array`` of floats; refuses nulls and ragged rows."""
    dtype = series.dtype
    if not isinstance(dtype, pl.List | pl.Array) or not dtype.inner.is_float():
        raise InputError(
            f"{field}.dtype", str(dtype), "must be a List or Array of floats, one vector per row"
        )
    n = series.len()
    if n == 0:
        raise InputError(field, 0, "has no vectors")
    if n != len(keys):
        raise InputError(field, f"{n} vectors", f"must match the {len(keys)} keys")
    if series.null_count():
        row = int(series.is_null().arg_max() or 0)
        raise InputError(f"{field}[{keys[row]!r}]", None, "every record needs a vector")
    if isinstance(dtype, pl.Array):
        lengths = np.full(n, dtype.size, dtype=np.int64)
    else:
        lengths = series.list.len().to_numpy()
    dim = int(lengths[0])
    ragged = np.flatnonzero(lengths != dim)
    if ragged.size:
        row = int(ragged[0])
        raise InputError(
            f"{field}[{keys[row]!r}]",
            f"{int(lengths[row])} dimensions",
            f"every vector needs the same length as the first ({keys[0]!r}: {dim})",
        )
    _check_dim(dim)
    # Every row now has dim >= 2 elements, so exploding yields exactly n * dim values (an
    # empty list would have exploded to a null) and a null among them is a null element.
    values = series.explode()
    if values.null_count():
        position = int(values.is_null().arg_max() or 0)
        row = position // dim
        raise InputError(
            f"{field}[{keys[row]!r}][{position % dim}]", None, "vector elements must not be null"
        )
    flat = values.to_numpy()
    return np.ascontiguousarray(flat.reshape(n, dim), dtype=np.float32)


# --------------------------------------------------------------------------------------------
# Keys: unique, all records, only records
# --------------------------------------------------------------------------------------------


def _quoted(keys: Sequence[str]) -> str:
    shown = ", ".join(repr(k) for k in keys[:_KEYS_SHOWN])
    return shown + (", ..." if len(keys) > _KEYS_SHOWN else "")


def _record_order(record_keys: list[str], keys: list[str]) -> np.ndarray:
    """Row of ``keys`` holding each record's vector, refusing repeats, strangers and gaps."""
    records = pl.Series("key", record_keys, dtype=pl.String)
    if records.is_duplicated().any():
        repeated = records.filter(records.is_duplicated()).unique(maintain_order=True).to_list()
        raise InputError("record_keys", _quoted(repeated), "record keys must be unique")
    if keys == record_keys:
        # Vectors already in record order (e.g. computed from the records): nothing to join.
        return np.arange(len(record_keys), dtype=np.int64)
    given = pl.Series("key", keys, dtype=pl.String)
    repeated_mask = given.is_duplicated()
    if repeated_mask.any():
        repeated = given.filter(repeated_mask).unique(maintain_order=True).to_list()
        raise InputError(
            "embeddings.record_key",
            _quoted(repeated),
            f"{len(repeated)} keys appear more than once; give one vector per record",
        )
    joined = (
        pl.DataFrame({"key": given})
        .with_row_index("vector_row")
        .join(
            pl.DataFrame({"key": records}).with_row_index("record_row"),
            on="key",
            how="full",
            coalesce=True,
        )
    )
    strangers = joined.filter(pl.col("record_row").is_null()).get_column("key").to_list()
    if strangers:
        raise InputError(
            "embeddings.record_key",
            _quoted(strangers),
            f"{len(strangers)} keys are not records of the case",
        )
    missing = (
        joined.filter(pl.col("vector_row").is_null()).sort("record_row").get_column("key").to_list()
    )
    if missing:
        raise InputError(
            "embeddings",
            f"{len(missing)} of {len(record_keys)} records without a vector",
            f"every record needs a vector; first missing: {_quoted(missing)}",
        )
    return joined.sort("record_row").get_column("vector_row").to_numpy().astype(np.int64)


# --------------------------------------------------------------------------------------------
# Values: finite, not all zero; normalised
# --------------------------------------------------------------------------------------------


def _normalised(matrix: np.ndarray, order: np.ndarray, keys: list[str]) -> np.ndarray:
    """Rows ``matrix[order]`` as float32 unit vectors, refusing non-finite and zero rows."""
    n, dim = order.shape[0], matrix.shape[1]
    out = np.empty((n, dim), dtype=np.float32)
    for lo in range(0, n, _ROWS_PER_STEP):
        rows = order[lo : lo + _ROWS_PER_STEP]
        raw = matrix[rows]
        finite = np.isfinite(raw).all(axis=1)
        if not finite.all():
            row = int(rows[np.flatnonzero(~finite)[0]])
            raise InputError(
                f"embeddings[{keys[row]!r}]",
                "non-finite value",
                "vector elements must be finite (no NaN or infinity)",
            )
        with np.errstate(over="ignore"):
            block = raw.astype(np.float32)
            norms = np.sqrt(np.einsum("ij,ij->i", block, block))
        # float32 squares overflow above ~1e19 and underflow below ~1e-19 (and float64 input
        # may not fit float32 at all): redo those rows in float64 from the input rather than
        # refuse vectors that are merely large or tiny.
        odd = np.flatnonzero(~((norms > 0) & np.isfinite(norms)))
        if odd.size:
            wide = np.asarray(matrix[rows[odd]], dtype=np.float64)
            scale = np.abs(wide).max(axis=1)
            zero = np.flatnonzero(scale == 0)
            if zero.size:
                row = int(rows[odd[zero[0]]])
                raise InputError(
                    f"embeddings[{keys[row]!r}]",
                    "all-zero vector",
                    "a zero vector has no direction; give it a real embedding",
                )
            wide /= scale[:, None]
            wide /= np.linalg.norm(wide, axis=1)[:, None]
            block[odd] = wide.astype(np.float32)
            norms[odd] = 1.0
        block /= norms[:, None]
        out[lo : lo + rows.shape[0]] = block
    return out
