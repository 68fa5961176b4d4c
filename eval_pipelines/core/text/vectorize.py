"""Hashed TF-IDF vectors of short texts: word 1-2 grams plus padded char 3-5 grams.

Every text is lower-cased with :meth:`str.lower`, encoded as UTF-8 and cut into *word tokens*:
maximal runs of bytes that are ASCII letters or digits or any byte >= 128 (so the bytes of a
non-ASCII character never split a word). The features of a text are

* word unigrams (each token),
* word bigrams (each pair of consecutive tokens, joined by one space),
* char n-grams for n = 3, 4, 5 of each token padded with one space on each side, as
  scikit-learn's ``analyzer="char_wb"`` does, but over bytes rather than code points. A padded
  token is at least 3 bytes long, so it yields every n-gram of length 3..min(5, len(padded));
  a padded token of exactly n bytes yields itself once as its n-gram, which is sklearn's
  "short word counted once" rule.

Each feature is hashed with 32-bit FNV-1a over a one-byte family prefix followed by its bytes,
and the hash is masked to ``n_features`` (a power of two). The prefix keeps the families apart
by construction: a unigram ``"abc"`` and the char trigram ``"abc"`` are different byte strings.

Weights are sublinear TF (``1 + ln(count)``) times smooth IDF (``ln((1 + N) / (1 + df)) + 1``,
as scikit-learn), and every row is L2-normalised. Rows without features stay all-zero.

The fast path is a set of numba kernels over one concatenated byte buffer with int64 text
offsets; :func:`_features_reference` is the plain-Python oracle the tests compare them with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from eval_pipelines.core.text import numba_cache

numba_cache.configure()

DEFAULT_N_FEATURES = 2**20
DEFAULT_BATCH_SIZE = 50_000

_FNV_OFFSET = 2166136261
_FNV_PRIME = 16777619
_MASK32 = 0xFFFFFFFF
# Family prefixes: hashed before a feature's bytes so that the three families cannot share
# an input byte string.
_PREFIX_UNIGRAM = 1
_PREFIX_BIGRAM = 2
_PREFIX_CHAR = 3
_SPACE = 32
_CHAR_MIN_N = 3
_CHAR_MAX_N = 5
# Rows up to this length are insertion-sorted; longer ones radix-sorted (see _sort_row).
_INSERTION_SORT_MAX = 24
# Rows per parallel task of _sort_merge, which allocates its scratch once per task.
_ROWS_PER_TASK = 256


@dataclass(frozen=True)
class TfidfModel:
    """What :func:`transform` needs to vectorise new texts like the fitted ones.

    Attributes
    ----------
    idf
        Smooth inverse document frequency per hashed feature, float32, shape ``(n_features,)``.
        Features never seen while fitting get the IDF of ``df = 0``.
    n_features
        Number of hash buckets (a power of two).
    """

    idf: np.ndarray
    n_features: int


# --------------------------------------------------------------------------------------------
# Reference implementation (test oracle)
# --------------------------------------------------------------------------------------------


def _is_word_byte(byte: int) -> bool:
    """Whether a byte belongs to a word token (ASCII letter or digit, or any byte >= 128)."""
    return 48 <= byte <= 57 or 65 <= byte <= 90 or 97 <= byte <= 122 or byte >= 128


def _fnv1a(data: bytes) -> int:
    """32-bit FNV-1a hash of a byte string."""
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK32
    return h


def _tokens_reference(data: bytes) -> list[bytes]:
    """Maximal runs of word bytes, in order."""
    tokens: list[bytes] = []
    start = -1
    for pos, byte in enumerate(data):
        if _is_word_byte(byte):
            if start < 0:
                start = pos
        elif start >= 0:
            tokens.append(data[start:pos])
            start = -1
    if start >= 0:
        tokens.append(data[start:])
    return tokens


def _features_reference(text: str, n_features: int = DEFAULT_N_FEATURES) -> dict[int, int]:
    """Hashed feature counts of one text, written for clarity rather than speed.

    Parameters
    ----------
    text
        The raw text (lower-cased here).
    n_features
        Number of hash buckets (a power of two).

    Returns
    -------
    dict[int, int]
        Feature id -> count; colliding features add up.
    """
    mask = n_features - 1
    counts: dict[int, int] = {}

    def add(prefix: int, data: bytes) -> None:
        key = _fnv1a(bytes([prefix]) + data) & mask
        counts[key] = counts.get(key, 0) + 1

    tokens = _tokens_reference(text.lower().encode("utf-8"))
    for token in tokens:
        add(_PREFIX_UNIGRAM, token)
    for first, second in zip(tokens, tokens[1:], strict=False):
        add(_PREFIX_BIGRAM, first + b" " + second)
    for token in tokens:
        padded = b" " + token + b" "
        for n in range(_CHAR_MIN_N, _CHAR_MAX_N + 1):
            if len(padded) < n:
                break
            for start in range(len(padded) - n + 1):
                add(_PREFIX_CHAR, padded[start : start + n])
    return counts


# --------------------------------------------------------------------------------------------
# numba kernels
# --------------------------------------------------------------------------------------------


@numba.njit(cache=True, inline="always")
def _fnv_step(h: int, byte: int) -> int:
    """One FNV-1a round; int64 arithmetic with a 32-bit mask (numba widens uint32 anyway)."""
    return ((h ^ byte) * _FNV_PRIME) & _MASK32


@numba.njit(cache=True, inline="always")
def _word_byte(byte: int) -> bool:
    """Same rule as :func:`_is_word_byte`, lower-case letters tested first (most frequent)."""
    return (
        (byte >= 97 and byte <= 122)
        or (byte >= 48 and byte <= 57)
        or byte >= 128
        or (byte >= 65 and byte <= 90)
    )


@numba.njit(cache=True)
def _count_features(buf: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Pass 1: number of (not yet merged) features per text, as row starts (length n + 1)."""
    n_texts = offsets.shape[0] - 1
    starts = np.zeros(n_texts + 1, dtype=np.int64)
    for row in range(n_texts):
        total = 0
        n_tokens = 0
        pos = offsets[row]
        end = offsets[row + 1]
        while pos < end:
            if not _word_byte(buf[pos]):
                pos += 1
                continue
            token_start = pos
            while pos < end and _word_byte(buf[pos]):
                pos += 1
            padded = pos - token_start + 2
            n_tokens += 1
            total += 1
            for n in range(_CHAR_MIN_N, _CHAR_MAX_N + 1):
                if padded >= n:
                    total += padded - n + 1
        if n_tokens > 1:
            total += n_tokens - 1
        starts[row + 1] = starts[row] + total
    return starts


@numba.njit(cache=True, parallel=True)
def _fill_features(
    buf: np.ndarray, offsets: np.ndarray, starts: np.ndarray, mask: int, out: np.ndarray
) -> None:
    """Pass 2: write the hashed feature ids of text ``row`` into ``out[starts[row]:...]``."""
    n_texts = offsets.shape[0] - 1
    h_char0 = _fnv_step(_FNV_OFFSET, _PREFIX_CHAR)
    h_uni0 = _fnv_step(_FNV_OFFSET, _PREFIX_UNIGRAM)
    h_bi0 = _fnv_step(_FNV_OFFSET, _PREFIX_BIGRAM)
    for row in numba.prange(n_texts):
        w = starts[row]
        pos = offsets[row]
        end = offsets[row + 1]
        # Hash state of "bigram prefix + previous token + space", continued over the next
        # token's bytes so each bigram costs only the second token's length.
        h_bigram_left = -1
        while pos < end:
            if not _word_byte(buf[pos]):
                pos += 1
                continue
            token_start = pos
            while pos < end and _word_byte(buf[pos]):
                pos += 1
            token_end = pos
            h_uni = h_uni0
            h_bi_next = h_bi0
            h_bi = h_bigram_left
            for i in range(token_start, token_end):
                b = buf[i]
                h_uni = _fnv_step(h_uni, b)
                h_bi_next = _fnv_step(h_bi_next, b)
                if h_bigram_left >= 0:
                    h_bi = _fnv_step(h_bi, b)
            out[w] = h_uni & mask
            w += 1
            if h_bigram_left >= 0:
                out[w] = h_bi & mask
                w += 1
            h_bigram_left = _fnv_step(h_bi_next, _SPACE)
            # Char n-grams of " token ": from each start, extend one hash through lengths
            # 3, 4, 5, emitting at each length that still fits in the padded token.
            padded = token_end - token_start + 2
            for s in range(padded - _CHAR_MIN_N + 1):
                h = h_char0
                stop = min(_CHAR_MAX_N, padded - s)
                for j in range(stop):
                    p = s + j
                    if p == 0 or p == padded - 1:
                        b = _SPACE
                    else:
                        b = buf[token_start + p - 1]
                    h = _fnv_step(h, b)
                    if j >= _CHAR_MIN_N - 1:
                        out[w] = h & mask
                        w += 1


@numba.njit(cache=True, inline="always")
def _sort_row(
    ids: np.ndarray, lo: int, hi: int, scratch: np.ndarray, histogram: np.ndarray
) -> None:
    """Sort ``ids[lo:hi]`` (non-negative) in place: insertion sort for short rows, else an
    LSD radix sort on bytes (one counting pass for every digit, then one scatter per digit).

    A row holds ~100-300 ids; a comparison sort mispredicts about every other branch there,
    the radix sort has no data-dependent branches and was 3-4x faster on the demo texts.
    """
    n = hi - lo
    if n <= _INSERTION_SORT_MAX:
        for i in range(lo + 1, hi):
            x = ids[i]
            j = i - 1
            while j >= lo and ids[j] > x:
                ids[j + 1] = ids[j]
                j -= 1
            ids[j + 1] = x
        return
    n_digits = histogram.shape[0]
    histogram[:, :] = 0
    for i in range(lo, hi):
        x = ids[i]
        for d in range(n_digits):
            histogram[d, (x >> (8 * d)) & 255] += 1
    in_ids = True
    for d in range(n_digits):
        total = 0
        for b in range(256):
            count = histogram[d, b]
            histogram[d, b] = total
            total += count
        shift = 8 * d
        if in_ids:
            for i in range(lo, hi):
                x = ids[i]
                b = (x >> shift) & 255
                scratch[histogram[d, b]] = x
                histogram[d, b] += 1
        else:
            for i in range(n):
                x = scratch[i]
                b = (x >> shift) & 255
                ids[lo + histogram[d, b]] = x
                histogram[d, b] += 1
        in_ids = not in_ids
    if not in_ids:
        ids[lo:hi] = scratch[:n]


@numba.njit(cache=True, parallel=True)
def _sort_merge(
    starts: np.ndarray, ids: np.ndarray, counts: np.ndarray, n_digits: int
) -> np.ndarray:
    """Sort each row's feature ids and merge repeats in place: the unique ids of a row move
    to the front of its segment, their counts to the same places of ``counts``.

    Returns the rows' starts in the merged layout (length n + 1, int64).
    """
    n_rows = starts.shape[0] - 1
    n_unique = np.zeros(n_rows + 1, dtype=np.int64)
    longest = 0
    for row in range(n_rows):
        longest = max(longest, starts[row + 1] - starts[row])
    n_tasks = (n_rows + _ROWS_PER_TASK - 1) // _ROWS_PER_TASK
    for task in numba.prange(n_tasks):
        # Scratch per task of rows rather than per row: an allocation per row costs as
        # much as sorting it.
        scratch = np.empty(longest, dtype=ids.dtype)
        histogram = np.empty((n_digits, 256), dtype=np.int64)
        for row in range(task * _ROWS_PER_TASK, min(n_rows, (task + 1) * _ROWS_PER_TASK)):
            lo = starts[row]
            hi = starts[row + 1]
            if hi == lo:
                continue
            _sort_row(ids, lo, hi, scratch, histogram)
            u = lo
            counts[u] = 1
            for i in range(lo + 1, hi):
                if ids[i] == ids[u]:
                    counts[u] += 1
                else:
                    u += 1
                    ids[u] = ids[i]
                    counts[u] = 1
            n_unique[row + 1] = u - lo + 1
    return np.cumsum(n_unique)


@numba.njit(cache=True, parallel=True)
def _compact(
    starts: np.ndarray,
    ids: np.ndarray,
    counts: np.ndarray,
    indptr: np.ndarray,
    indices: np.ndarray,
    tf: np.ndarray,
) -> None:
    """Copy each row's merged ids to ``indices[indptr[row]:...]`` and their sublinear TF
    (``1 + ln(count)``) to the same places of ``tf``."""
    for row in numba.prange(starts.shape[0] - 1):
        src = starts[row]
        dst = indptr[row]
        for i in range(indptr[row + 1] - dst):
            indices[dst + i] = ids[src + i]
            tf[dst + i] = 1.0 + np.log(np.float64(counts[src + i]))


@numba.njit(cache=True)
def _add_document_frequencies(df: np.ndarray, indices: np.ndarray) -> None:
    """Add one to ``df`` per index: the document frequency, as indices are unique per row.

    A plain loop: ``np.bincount`` first copies int32 indices to int64 and scans them twice
    for their range, which made it 4x slower than this.
    """
    for i in range(indices.shape[0]):
        df[indices[i]] += 1


@numba.njit(cache=True, parallel=True)
def _weight_rows(
    indptr: np.ndarray, indices: np.ndarray, values: np.ndarray, idf: np.ndarray
) -> None:
    """Turn ``values`` from TF into TF times IDF divided by the row's L2 norm, in place (rows
    without features have no values)."""
    n_rows = indptr.shape[0] - 1
    for row in numba.prange(n_rows):
        lo = indptr[row]
        hi = indptr[row + 1]
        norm = 0.0
        for i in range(lo, hi):
            value = np.float64(values[i]) * np.float64(idf[indices[i]])
            norm += value * value
        if norm > 0.0:
            scale = 1.0 / np.sqrt(norm)
            for i in range(lo, hi):
                values[i] = np.float64(values[i]) * np.float64(idf[indices[i]]) * scale


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def _check_n_features(n_features: int) -> None:
    if n_features < 2 or n_features > 2**31 or n_features & (n_features - 1):
        raise ValueError(f"n_features={n_features}: must be a power of two between 2 and 2**31")


def _encode(texts: Sequence[str]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """Lower-case and UTF-8 encode texts into one buffer plus int64 offsets (length n + 1)."""
    encoded = [text.lower().encode("utf-8") for text in texts]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(chunk) for chunk in encoded], out=offsets[1:])
    buf = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    if buf.shape[0] == 0:
        # numba wants a real array even when every text is empty.
        buf = np.zeros(1, dtype=np.uint8)
    return buf, offsets


def _n_digits(n_features: int) -> int:
    """Bytes the radix sort looks at: enough for feature ids below ``n_features``."""
    return max(1, ((n_features - 1).bit_length() + 7) // 8)


def _raw_feature_counts(texts: Sequence[str], batch_size: int) -> list[int]:
    """Features of each batch of texts before repeats are merged (bounds on its nonzeros)."""
    return [
        int(_count_features(*_encode(texts[lo:hi]))[-1])
        for lo, hi in _batches(len(texts), batch_size)
    ]


def _shrink(array: np.ndarray, size: int) -> np.ndarray:
    """The first ``size`` items of an array this module allocated, giving the rest back.

    Shrinking in place (``realloc``) frees the unused tail without copying what is kept;
    an array that cannot be resized in place is sliced instead (its tail was never written,
    so it holds no resident memory either way).
    """
    try:
        array.resize(size, refcheck=False)
    except ValueError:
        return array[:size]
    return array


def _term_frequency_rows(
    texts: Sequence[str], n_features: int, batch_size: int, df: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR arrays of texts: int64 indptr, int32 sorted unique indices, float32 sublinear TF.

    Batches write straight into one pair of arrays sized by a first, cheap counting pass
    (the merge can only shrink a row), so the nonzeros are held once: no per-batch parts
    and no concatenation, which used to more than double the peak memory of a large corpus
    (3.0 GB over a 1.2 GB matrix at 1M records, now 1.3 GB). With ``df``, each batch's
    features are added to it (document frequencies).
    """
    n_digits = _n_digits(n_features)
    raw_counts = _raw_feature_counts(texts, batch_size)
    indptr = np.zeros(len(texts) + 1, dtype=np.int64)
    indices = np.empty(sum(raw_counts), dtype=np.int32)
    tf = np.empty(sum(raw_counts), dtype=np.float32)
    # Scratch for the raw ids and their counts, reused by every batch: touching fresh pages
    # costs about as much as filling them, so fresh arrays per batch were a third of the time.
    raw_ids = np.empty(max(raw_counts, default=0), dtype=np.int32)
    raw_counts_scratch = np.empty(raw_ids.shape[0], dtype=np.int32)
    nnz = 0
    for lo, hi in _batches(len(texts), batch_size):
        buf, offsets = _encode(texts[lo:hi])
        starts = _count_features(buf, offsets)
        ids = raw_ids[: starts[-1]]
        counts = raw_counts_scratch[: starts[-1]]
        _fill_features(buf, offsets, starts, n_features - 1, ids)
        rows = _sort_merge(starts, ids, counts, n_digits)
        added = int(rows[-1])
        _compact(starts, ids, counts, rows, indices[nnz : nnz + added], tf[nnz : nnz + added])
        if df is not None:
            _add_document_frequencies(df, indices[nnz : nnz + added])
        indptr[lo + 1 : hi + 1] = rows[1:] + nnz
        nnz += added
    return indptr, _shrink(indices, nnz), _shrink(tf, nnz)


def _term_frequencies(
    texts: Sequence[str], n_features: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR arrays (int64 indptr, int32 sorted unique indices, float32 sublinear TF) of texts."""
    return _term_frequency_rows(texts, n_features, max(1, len(texts)))


def _csr(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, n_features: int
) -> sp.csr_matrix:
    """A float32 CSR matrix over these arrays, with int32 indices while nnz allows it."""
    # scipy keeps indices and indptr in one dtype; int32 while nnz allows it halves the memory.
    index_dtype = np.int32 if indices.shape[0] < 2**31 else np.int64
    matrix = sp.csr_matrix(
        (data, indices.astype(index_dtype, copy=False), indptr.astype(index_dtype)),
        shape=(indptr.shape[0] - 1, n_features),
        copy=False,
    )
    matrix.has_sorted_indices = True
    return matrix


def _batches(n: int, batch_size: int) -> list[tuple[int, int]]:
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size}: must be at least 1")
    return [(lo, min(lo + batch_size, n)) for lo in range(0, n, batch_size)]


def fit_transform(
    texts: Sequence[str],
    *,
    n_features: int = DEFAULT_N_FEATURES,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> tuple[TfidfModel, sp.csr_matrix]:
    """Fit IDF weights on texts and return them with the texts' TF-IDF rows.

    Parameters
    ----------
    texts
        The corpus, one string per row.
    n_features
        Number of hash buckets, a power of two.
    batch_size
        Texts tokenised at a time; bounds the scratch memory of the raw feature ids.

    Returns
    -------
    tuple[TfidfModel, scipy.sparse.csr_matrix]
        The model, and an ``(len(texts), n_features)`` float32 CSR matrix with int32 sorted
        unique indices and L2-normalised rows (all-zero for texts without word bytes).
    """
    _check_n_features(n_features)
    df = np.zeros(n_features, dtype=np.int64)
    indptr, indices, values = _term_frequency_rows(texts, n_features, batch_size, df)
    n_docs = len(texts)
    idf = _idf(df, n_docs)
    _weight_rows(indptr, indices, values, idf)
    return TfidfModel(idf=idf, n_features=n_features), _csr(indptr, indices, values, n_features)


def fit(
    texts: Sequence[str],
    *,
    n_features: int = DEFAULT_N_FEATURES,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> TfidfModel:
    """Fit IDF weights on texts without keeping their rows.

    The same model as :func:`fit_transform` gives, in the memory of one batch's rows: for a
    corpus whose matrix does not fit in memory, fit here, then :func:`transform` it a part at
    a time (each part's rows equal the corresponding rows of ``fit_transform``).

    Parameters
    ----------
    texts
        The corpus, one string per row.
    n_features
        Number of hash buckets, a power of two.
    batch_size
        Texts tokenised at a time.

    Returns
    -------
    TfidfModel
        The IDF weights.
    """
    _check_n_features(n_features)
    df = np.zeros(n_features, dtype=np.int64)
    for lo, hi in _batches(len(texts), batch_size):
        _term_frequency_rows(texts[lo:hi], n_features, batch_size, df)
    return TfidfModel(idf=_idf(df, len(texts)), n_features=n_features)


def _idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    """Smooth IDF (scikit-learn's ``smooth_idf=True``) as float32."""
    return (np.log((1.0 + n_docs) / (1.0 + df)) + 1.0).astype(np.float32)


def transform(
    model: TfidfModel, texts: Sequence[str], *, batch_size: int = DEFAULT_BATCH_SIZE
) -> sp.csr_matrix:
    """TF-IDF rows of texts under a fitted model.

    Parameters
    ----------
    model
        The output of :func:`fit_transform`.
    texts
        Texts to vectorise.
    batch_size
        Texts tokenised at a time.

    Returns
    -------
    scipy.sparse.csr_matrix
        ``(len(texts), model.n_features)`` float32 CSR, L2-normalised rows.
    """
    _check_n_features(model.n_features)
    idf = np.ascontiguousarray(model.idf, dtype=np.float32)
    if idf.shape != (model.n_features,):
        raise ValueError(f"model.idf.shape={idf.shape}: must be ({model.n_features},)")
    indptr, indices, values = _term_frequency_rows(texts, model.n_features, batch_size)
    _weight_rows(indptr, indices, values, idf)
    return _csr(indptr, indices, values, model.n_features)
