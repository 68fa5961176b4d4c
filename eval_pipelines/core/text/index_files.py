"""An index stored as a directory of ``.npy`` files, memory-mapped read-only on load (opening it
costs milliseconds and processes share the pages), and replaced atomically (written to a staged
directory, fsynced, then exchanged with the old one)."""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from eval_pipelines.core.text.inverted_index import TextIndex, feature_bounds

_INDEX_FILES = (
    "docs_data",
    "docs_indices",
    "docs_indptr",
    "postings_data",
    "postings_indices",
    "postings_indptr",
    "feature_max",
    "shape",
)


def fsync_path(path: Path) -> None:
    """fsync a file or a directory (a directory's entries are durable only once it is)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically with Linux ``renameat2(RENAME_EXCHANGE)``.

    Returns False where that call is unavailable (other systems, old C libraries, file
    systems without support), so the caller can fall back to two renames.
    """
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def replace_directory(new: Path, path: Path) -> None:
    """Move the complete directory ``new`` to ``path``, replacing what was there.

    A plain rename is atomic but refuses a non-empty target, so an existing index is swapped
    out atomically where the system allows (then deleted), else set aside first; in that
    fallback a crash between the two renames leaves no index at ``path`` (the caller
    rebuilds) and the old one under a hidden name, never a half-written one.
    """
    try:
        os.rename(new, path)
        return
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
    if _exchange(new, path):
        # ``new`` now names the old index.
        shutil.rmtree(new, ignore_errors=True)
        return
    aside = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".old"))
    os.replace(path, aside)
    os.rename(new, path)
    shutil.rmtree(aside, ignore_errors=True)


def save_text_index(index: TextIndex, path: Path) -> None:
    """Write an index as a directory of ``.npy`` files, atomically.

    The files go to a temporary directory next to ``path``, are flushed to disk, and the
    directory then takes the place of ``path``, so a reader or a crash sees either the old
    index or the new one, never half of one. Readers holding the old index memory-mapped keep
    reading it: its files are unlinked, not overwritten.

    Parameters
    ----------
    index
        The index to store.
    path
        Destination directory (by convention named ``*.tfidf``).
    """
    path = Path(path)
    arrays = {
        "docs_data": index.docs.data,
        "docs_indices": index.docs.indices,
        "docs_indptr": index.docs.indptr,
        "postings_data": index.postings.data,
        "postings_indices": index.postings.indices,
        "postings_indptr": index.postings.indptr,
        "feature_max": feature_bounds(index),
        "shape": np.asarray(index.docs.shape, dtype=np.int64),
    }
    with staged_directory(path) as staging:
        for name, array in arrays.items():
            save_array(staging / f"{name}.npy", array)


@contextmanager
def staged_directory(path: Path) -> Iterator[Path]:
    """A temporary directory next to ``path`` to write into; when the block completes it is
    flushed and takes the place of ``path`` whole (:func:`replace_directory`), and when the
    block fails it is removed, leaving ``path`` as it was."""
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        yield staging
        fsync_path(staging)
        replace_directory(staging, path)
        fsync_path(path.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def save_array(path: Path, array: np.ndarray) -> None:
    """Write one ``.npy`` file and flush it to disk."""
    with open(path, "wb") as handle:
        np.save(handle, np.ascontiguousarray(array), allow_pickle=False)
        handle.flush()
        os.fsync(handle.fileno())


def load_text_index(path: Path) -> TextIndex:
    """Open an index written by :func:`save_text_index`, memory-mapped read-only.

    Nothing is read up front: pages load on first use and are shared with every other
    process that maps the same files.

    Parameters
    ----------
    path
        The index directory.

    Returns
    -------
    TextIndex
        The stored index; its arrays are read-only memory maps.

    Raises
    ------
    FileNotFoundError
        When ``path`` is not a complete index directory (e.g. a file of an older format).
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: not an index directory")
    arrays = {
        name: np.load(path / f"{name}.npy", mmap_mode="r", allow_pickle=False)
        for name in _INDEX_FILES
    }
    n_docs, n_features = (int(v) for v in arrays["shape"])
    docs = sp.csr_matrix(
        (arrays["docs_data"], arrays["docs_indices"], arrays["docs_indptr"]),
        shape=(n_docs, n_features),
        copy=False,
    )
    postings = sp.csr_matrix(
        (arrays["postings_data"], arrays["postings_indices"], arrays["postings_indptr"]),
        shape=(n_features, n_docs),
        copy=False,
    )
    docs.has_sorted_indices = True
    postings.has_sorted_indices = True
    return TextIndex(docs=docs, postings=postings, n_docs=n_docs, feature_max=arrays["feature_max"])
