"""Test-row selectors of spec 003, evaluated to a boolean mask over a view's positions.

- ``{"$index": i}``: the row at position ``i``; ``{"$index": {"$mod": [k, r]}}``: every row
  whose position is r modulo k (fold r of k, no overlap between folds).
- ``{"$sample": N}`` / ``{"$sample": {"n": N, "seed": S}}``: N rows drawn uniformly without
  replacement (seeded); ``{"$sample": {"n": n, "of": m, "seed": S}}``: n in every m rows, i.e.
  round(rows * n / m) rows drawn the same way.
- ``{"$hash": {"$mod": [k, r]}}``: rows whose key (the table's key column, else the whole row)
  hashes to r modulo k; with ``"field": COL`` rows sharing COL's value stay together.
  The hash is BLAKE2b-64 of the value's JSON text: stable across processes and releases.
- ``{"col": value}`` equality (on a set column: has the member), ``{"col": {"$lt": v, ...}}``
  comparisons (strings compare lexicographically; null never satisfies one, except ``$ne``),
  ``$and`` / ``$or`` lists, nested; several keys in one object all have to hold.

Positions inside a compound selector are still the row's position in the view, not among
the rows another condition kept.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.queries.query import hash_spec, mod_pair, sample_spec
from eval_pipelines.core.queries.source import column_kind
from eval_pipelines.core.queries.views import TableView

_NUMERIC = ("integer", "float")


def select_rows(view: TableView, selector: Mapping[str, Any], *, field: str) -> np.ndarray:
    """The positions of ``view`` that ``selector`` chooses, as a boolean mask."""
    mask = np.ones(view.n_rows, dtype=bool)
    for key, value in selector.items():
        at = f"{field}.{key}"
        if key == "$and":
            for i, part in enumerate(value):
                mask &= select_rows(view, part, field=f"{at}[{i}]")
        elif key == "$or":
            either = np.zeros(view.n_rows, dtype=bool)
            for i, part in enumerate(value):
                either |= select_rows(view, part, field=f"{at}[{i}]")
            mask &= either
        elif key == "$index":
            mask &= _index(view, value, field=at)
        elif key == "$sample":
            mask &= _sample(view, value, field=at)
        elif key == "$hash":
            mask &= _hash(view, value, field=at)
        else:
            mask &= condition_mask(view, key, value, field=at)
    return mask


def _index(view: TableView, value: Any, *, field: str) -> np.ndarray:
    positions = np.arange(view.n_rows)
    if isinstance(value, int):
        if value >= view.n_rows:
            raise InputError(
                field, value, f"is past the last row: {view.name!r} has {view.n_rows} rows here"
            )
        return positions == value
    k, r = mod_pair(f"{field}.$mod", value["$mod"])
    return positions % k == r


def _sample(view: TableView, value: Any, *, field: str) -> np.ndarray:
    n, of, seed = sample_spec(field, value)
    count = round(view.n_rows * n / of) if of is not None else n
    if count > view.n_rows:
        raise InputError(field, value, f"asks for {count} rows; there are {view.n_rows}")
    chosen = np.random.default_rng(seed).choice(view.n_rows, size=count, replace=False)
    mask = np.zeros(view.n_rows, dtype=bool)
    mask[chosen] = True
    return mask


def stable_hash(value: Any) -> int:
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def _hash(view: TableView, value: Any, *, field: str) -> np.ndarray:
    k, r, column = hash_spec(field, value)
    if column is not None:
        keys = view.column(column, field=f"{field}.field").to_list()
    elif view.source.key is not None:
        keys = view.column(view.source.key, field=field).to_list()
    else:
        keys = view.source.frame[view.rows.tolist()].rows()
    buckets = {}
    out = np.empty(len(keys), dtype=bool)
    for i, key in enumerate(keys):
        marker = json.dumps(key, default=str) if isinstance(key, list | tuple) else key
        if marker not in buckets:
            buckets[marker] = stable_hash(key) % k == r
        out[i] = buckets[marker]
    return out


def _check_operand(field: str, column: str, kind: str, operand: Any, op: str) -> None:
    if operand is None:
        return
    if kind in _NUMERIC:
        if isinstance(operand, bool) or not isinstance(operand, int | float):
            raise InputError(
                field, operand, f"column {column!r} is numeric; compare it to a number"
            )
    elif kind == "boolean":
        if not isinstance(operand, bool):
            raise InputError(field, operand, f"column {column!r} is true/false")
        if op in ("$lt", "$lte", "$gt", "$gte"):
            raise InputError(field, operand, f"column {column!r} is true/false: use equality")
    elif not isinstance(operand, str):
        raise InputError(field, operand, f"column {column!r} holds text; compare it to a string")


def condition_mask(view: TableView, column: str, value: Any, *, field: str) -> np.ndarray:
    """Rows whose ``column`` meets ``value`` (a literal for equality, or operators)."""
    series = view.column(column, field=field)
    kind = column_kind(series.dtype)
    if kind is None:
        raise InputError(field, column, "is a column of a type conditions cannot use")
    operations = value if isinstance(value, Mapping) else {"$eq": value}
    mask = np.ones(len(series), dtype=bool)
    for op, operand in operations.items():
        at = field if op == "$eq" else f"{field}.{op}"
        if kind == "string_list":
            if op not in ("$eq", "$in"):
                raise InputError(at, operand, f"column {column!r} holds sets: use a member or $in")
            members = operand if op == "$in" else [operand]
            for member in members:
                _check_operand(at, column, "string", member, op)
            hit = series.list.eval(pl.element().is_in(members)).list.any()
            mask &= hit.fill_null(False).to_numpy()
            continue
        if op == "$in":
            for item in operand:
                _check_operand(at, column, kind, item, op)
            mask &= series.is_in(operand).fill_null(False).to_numpy()
            continue
        _check_operand(at, column, kind, operand, op)
        if operand is None:
            nulls = series.is_null().to_numpy()
            mask &= ~nulls if op == "$ne" else nulls
            continue
        compared = {
            "$eq": series.__eq__,
            "$ne": series.__ne__,
            "$lt": series.__lt__,
            "$lte": series.__le__,
            "$gt": series.__gt__,
            "$gte": series.__ge__,
        }[op](operand)
        # Null never meets a comparison, but it is "not equal" to any value.
        mask &= compared.fill_null(op == "$ne").to_numpy()
    return mask
