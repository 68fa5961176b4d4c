"""Which rows a query trains on and which it tests: the experiment of spec 003.

- ``test`` (hold-out): the selector picks positions of the evaluated scope; those rows are
  hidden from training, so ``trainSamples = total - testSamples``.
- ``testSource`` (resubstitution): test rows come from ``testSource.from`` (default the
  scope), filtered by ``where`` and windowed by ``offset``/``limit``; training is the whole
  scope, so ``trainSamples = total``.

Operator conditions in a predict's ``where`` narrow the training rows further (a cutoff).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from eval_pipelines.core.queries.query import Query
from eval_pipelines.core.queries.selectors import condition_mask, select_rows
from eval_pipelines.core.queries.source import Source
from eval_pipelines.core.queries.views import TableView


@dataclass(frozen=True)
class SourceRef:
    """A source an evaluation read, at the version it read."""

    name: str
    kind: str
    version: str
    n_rows: int

    def to_json(self) -> dict[str, str | int]:
        return {"name": self.name, "kind": self.kind, "version": self.version, "rows": self.n_rows}


class Resolver:
    """Resolves table names once each and remembers what was read."""

    def __init__(self, resolve: Callable[[str], Source]) -> None:
        self._resolve = resolve
        self._sources: dict[str, Source] = {}

    def __call__(self, name: str) -> Source:
        if name not in self._sources:
            self._sources[name] = self._resolve(name)
        return self._sources[name]

    def refs(self) -> tuple[SourceRef, ...]:
        return tuple(SourceRef(s.name, s.kind, s.version, s.n_rows) for s in self._sources.values())

    def view(self, name: str) -> TableView:
        return TableView(self(name), self)


@dataclass(frozen=True)
class Plan:
    """Training pool and test rows of one evaluation."""

    scope: TableView  # the evaluated rows (a tenant's, when nested); training comes from here
    test_view: TableView  # where test rows are read (the scope under hold-out)
    test_positions: np.ndarray  # positions in test_view, in table order
    train_mask: np.ndarray  # over scope positions
    holdout: bool

    @property
    def total(self) -> int:
        return self.scope.n_rows

    @property
    def test_samples(self) -> int:
        return len(self.test_positions)

    @property
    def train_samples(self) -> int:
        return int(self.train_mask.sum())


def scope_view(query: Query, resolver: Resolver) -> TableView:
    """``evaluate.from``, narrowed by each nested ``where`` in turn."""
    view = resolver.view(query.scope.table)
    for i, condition in enumerate(query.scope.filters):
        view = view.narrowed(select_rows(view, condition, field=f"evaluate.from.where[{i}]"))
    return view


def condition_pool(query: Query, scope: TableView) -> np.ndarray:
    """Scope rows that meet the predict's operator conditions (all rows without any)."""
    pool = np.ones(scope.n_rows, dtype=bool)
    for key, condition in query.conditions:
        pool &= condition_mask(scope, key, condition, field=f"evaluate.where.{key}")
    return pool


def make_plan(query: Query, resolver: Resolver, scope: TableView, test: object = None) -> Plan:
    """The plan of ``query`` (with ``test`` replacing its selector, for fold sweeps)."""
    pool = condition_pool(query, scope)
    if query.test_source is None:
        mask = select_rows(scope, test if test is not None else query.test, field="test")  # type: ignore[arg-type]
        return Plan(scope, scope, np.flatnonzero(mask), pool & ~mask, holdout=True)
    source = query.test_source
    view = resolver.view(source.table) if source.table is not None else scope
    mask = (
        select_rows(view, source.where, field="testSource.where")
        if source.where is not None
        else np.ones(view.n_rows, dtype=bool)
    )
    positions = np.flatnonzero(mask)[source.offset :]
    if source.limit is not None:
        positions = positions[: source.limit]
    return Plan(scope, view, positions, pool, holdout=False)
