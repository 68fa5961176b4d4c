"""Evidence as sparse feature counts: what a predict sees of a row.

Each ``where`` binding contributes features named after its key:

- a text column (string values averaging more than 1.5 words over the training table) gives
  one feature per lower-cased word, counted;
- any other string, integer or boolean column gives one feature for its value;
- a float column gives its decile bin (edges from the training table's values, no target);
- a set column gives one feature per member;
- a null gives nothing (no evidence, never a "null" value).

The ``high`` profile adds conjunctions: adjacent word pairs within a text field, and value
pairs across the atomic fields. Group weights (profiles ``group`` and ``high``) scale each
field's features by m**-GROUP_EXPONENT, m its feature count in that row, so a field that
repeats correlated evidence (the words of one description) is not counted as m independent
clues. The exponent 1/4 was measured on the ICD-10-CM demo (fold 0 of 5, category from text:
log loss 1.66 -> 1.41, ECE 0.091 -> 0.019 against plain naive Bayes, same accuracy; 1/2
over-corrected to ECE 0.158); it is a measured choice, not a law.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import sparse

TEXT_WORDS = 1.5
FLOAT_BINS = 10
GROUP_EXPONENT = 0.25
_WORD = r"\w+"


@dataclass(frozen=True)
class FieldMode:
    """How one binding turns a value into features (decided on the training table)."""

    key: str
    mode: str  # "text" | "atomic" | "bins" | "members"
    edges: tuple[float, ...] = ()


def field_mode(key: str, kind: str, values: pl.Series) -> FieldMode:
    if kind == "string_list":
        return FieldMode(key, "members")
    if kind == "float":
        finite = values.drop_nulls().drop_nans().to_numpy()
        edges = np.unique(np.quantile(finite, np.linspace(0, 1, FLOAT_BINS + 1)[1:-1]))
        return FieldMode(key, "bins", tuple(float(e) for e in edges) if len(finite) else ())
    if kind == "string":
        words = values.drop_nulls().str.count_matches(_WORD)
        if len(words) and float(words.mean() or 0.0) > TEXT_WORDS:  # type: ignore[arg-type]
            return FieldMode(key, "text")
    return FieldMode(key, "atomic")


def _field_features(mode: FieldMode, values: pl.Series, *, conjunctions: bool) -> pl.DataFrame:
    """``(row, feature)`` pairs, one per occurrence, for one field's values."""
    row = pl.int_range(0, len(values), dtype=pl.UInt32, eager=True).alias("row")
    frame = pl.DataFrame([row, values.alias("value")])
    prefix = mode.key + "\x1f"
    if mode.mode == "text":
        words = pl.col("value").str.to_lowercase().str.extract_all(_WORD)
        tokens = frame.select("row", words.alias("words"))
        parts = [tokens.explode("words").select("row", feature=pl.lit(prefix) + pl.col("words"))]
        if conjunctions:
            pairs = tokens.select(
                "row",
                pair=pl.col("words").list.eval(
                    pl.element() + pl.lit("\x1e") + pl.element().shift(-1)
                ),
            )
            parts.append(
                pairs.explode("pair").select("row", feature=pl.lit(prefix) + pl.col("pair"))
            )
        out = pl.concat(parts)
    elif mode.mode == "members":
        out = frame.explode("value").select(
            "row", feature=pl.lit(prefix) + pl.col("value").cast(pl.String)
        )
    elif mode.mode == "bins":
        edges = np.asarray(mode.edges, dtype=np.float64)
        raw = values.cast(pl.Float64).to_numpy()
        finite = np.isfinite(raw)
        bins = np.searchsorted(edges, np.where(finite, raw, 0.0), side="right")
        out = pl.DataFrame(
            {
                "row": row.filter(pl.Series(finite)),
                "feature": [f"{prefix}bin{b}" for b in bins[finite]],
            }
        )
    else:
        out = frame.select("row", feature=pl.lit(prefix) + pl.col("value").cast(pl.String))
    return out.drop_nulls("feature")


def _atomic_pairs(parts: list[tuple[FieldMode, pl.DataFrame]]) -> list[pl.DataFrame]:
    atomic = [(m, f) for m, f in parts if m.mode in ("atomic", "bins")]
    pairs = []
    for i, (_, left) in enumerate(atomic):
        for _, right in atomic[i + 1 :]:
            joined = left.join(right, on="row", suffix="_r")
            pairs.append(
                joined.select(
                    "row", feature=pl.col("feature") + pl.lit("\x1d") + pl.col("feature_r")
                )
            )
    return pairs


def feature_frame(
    modes: list[FieldMode], values: list[pl.Series], *, conjunctions: bool
) -> pl.DataFrame:
    """``(row, field, feature, count)`` for every row, over all bindings."""
    parts = [
        (mode, _field_features(mode, series, conjunctions=conjunctions))
        for mode, series in zip(modes, values, strict=True)
    ]
    frames = [f.with_columns(field=pl.lit(i, pl.UInt32)) for i, (_, f) in enumerate(parts)]
    if conjunctions:
        offset = len(parts)
        frames += [
            f.with_columns(field=pl.lit(offset + i, pl.UInt32))
            for i, f in enumerate(_atomic_pairs(parts))
        ]
    if not frames:
        return pl.DataFrame(
            schema={"row": pl.UInt32, "field": pl.UInt32, "feature": pl.String, "count": pl.UInt32}
        )
    return pl.concat(frames).group_by("row", "field", "feature").len(name="count")


@dataclass(frozen=True)
class FeatureMatrices:
    """Counts (``counts``: for training) and group-weighted counts (``weighted``: what a
    prediction reads) of the rows, over ``vocabulary``'s feature ids."""

    counts: sparse.csr_matrix
    weighted: sparse.csr_matrix


def build_matrices(
    features: pl.DataFrame, n_rows: int, vocabulary: pl.DataFrame, *, grouped: bool
) -> FeatureMatrices:
    """Sparse matrices of ``features`` over the vocabulary's ids (``feature``, ``id``);
    features outside the vocabulary are dropped (never seen in training: no evidence)."""
    if grouped:
        # m counts all of the row's evidence in the field, known to training or not: a row's
        # weights depend on the row alone, not on which rows happen to be training rows.
        per_field = pl.col("count").sum().over("row", "field").cast(pl.Float64)
        weighted = features.with_columns(weight=pl.col("count") / per_field.pow(GROUP_EXPONENT))
    else:
        weighted = features.with_columns(weight=pl.col("count").cast(pl.Float64))
    known = weighted.join(vocabulary, on="feature", how="inner")
    rows = known.get_column("row").to_numpy()
    ids = known.get_column("id").to_numpy()
    shape = (n_rows, vocabulary.height)
    counts = sparse.csr_matrix(
        (known.get_column("count").to_numpy().astype(np.float64), (rows, ids)), shape=shape
    )
    weighted = sparse.csr_matrix((known.get_column("weight").to_numpy(), (rows, ids)), shape=shape)
    return FeatureMatrices(counts, weighted)


def vocabulary_of(features: pl.DataFrame) -> pl.DataFrame:
    """Feature ids in sorted feature order (deterministic)."""
    unique = features.select(pl.col("feature").unique().sort())
    return unique.with_columns(id=pl.int_range(0, unique.height, dtype=pl.Int64))
