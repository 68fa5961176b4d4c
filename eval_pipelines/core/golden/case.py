"""Scoring one case: its stored labels against its run's output.

Rules (docs/golden.md, "Scoring", states them for users):

- Each labelled header field is one scored item, matched or missed.
- Table rows are matched by position, or by key columns when the case names them (duplicate
  keys pair up in order). Each labelled cell of a matched row is one item; each labelled cell
  of a row with no extracted counterpart is a miss; each extracted row no labelled row matched
  (an invented row) is one miss of its own, so no case reaches 100% with one present.
- A label whose field (or, inside a row, column) is no longer in the schema is stale: listed,
  never scored, never a miss. So is a label whose shape no longer fits its field (a header
  field that became a table). A label naming a bare column is left out, also not a miss.
- ``errored``: the run produced no output, or no label resolves against the schema.
  ``passed``: every scored item matched. ``failed``: otherwise. ``skipped`` and ``disabled``
  are assigned by the runner.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.golden.shares import json_share
from eval_pipelines.core.golden.values import values_match
from eval_pipelines.core.results import JsonResult
from eval_pipelines.core.workflows.schema import Column, Field, Schema

STATUSES = ("passed", "failed", "errored", "skipped", "disabled")
ITEM_KINDS = ("field", "cell", "missing_row_cell", "invented_row")


@dataclass(frozen=True)
class ScoredItem(JsonResult):
    """One scored comparison.

    Attributes
    ----------
    field_id, column_id
        The header field or table (``column_id`` None for a header field or invented row).
    row
        For ``cell`` and ``missing_row_cell``, the labelled row's index; for ``invented_row``,
        the extracted row's index; None for a header field.
    kind
        One of ``ITEM_KINDS``.
    expected, actual
        The label and the extracted value as given (an invented row's ``actual`` is the row).
    matched
        Whether they match after normalisation.
    """

    field_id: str
    column_id: str | None
    row: int | None
    kind: str
    expected: Any
    actual: Any
    matched: bool

    @property
    def key(self) -> str:
        """The per-field breakdown row this item counts in: ``field`` or ``table.column``."""
        return self.field_id if self.column_id is None else f"{self.field_id}.{self.column_id}"

    def to_json(self) -> dict[str, Any]:
        return {
            "fieldId": self.field_id,
            "columnId": self.column_id,
            "row": self.row,
            "kind": self.kind,
            "expected": self.expected,
            "actual": self.actual,
            "matched": self.matched,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScoredItem:
        return cls(
            field_id=data["fieldId"],
            column_id=data["columnId"],
            row=data["row"],
            kind=data["kind"],
            expected=data["expected"],
            actual=data["actual"],
            matched=bool(data["matched"]),
        )


@dataclass(frozen=True)
class CaseScore(JsonResult):
    """One case's result.

    Attributes
    ----------
    status
        One of ``STATUSES``.
    reason
        Why a case errored, was skipped or disabled; None for passed and failed.
    items
        Every scored comparison.
    stale
        Distinct paths of labels that no longer fit the schema: a field id, or
        ``table.column`` for a cell whose column is gone.
    bare_columns
        Column ids labelled on their own, left out of the score.
    """

    status: str
    reason: str | None
    items: tuple[ScoredItem, ...] = ()
    stale: tuple[str, ...] = ()
    bare_columns: tuple[str, ...] = ()

    @property
    def scored(self) -> int:
        return len(self.items)

    @property
    def correct(self) -> int:
        return sum(item.matched for item in self.items)

    @property
    def accuracy(self) -> float | None:
        """Correct over scored, None when nothing was scored (never measured is not zero)."""
        return self.correct / self.scored if self.items else None

    def to_json(self) -> dict[str, Any]:
        """The accuracy of fewer than 20 values reads ``insufficient_evidence`` beside its
        counts, as every golden share (:func:`~eval_pipelines.core.golden.shares.json_share`)."""
        return {
            "status": self.status,
            "reason": self.reason,
            "scored": self.scored,
            "correct": self.correct,
            "accuracy": json_share(self.accuracy, self.scored),
            "items": [item.to_json() for item in self.items],
            "stale": list(self.stale),
            "bareColumns": list(self.bare_columns),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CaseScore:
        """Rebuild a stored result (``scored``, ``correct``, ``accuracy`` are derived)."""
        return cls(
            status=data["status"],
            reason=data.get("reason"),
            items=tuple(ScoredItem.from_json(item) for item in data.get("items", ())),
            stale=tuple(data.get("stale", ())),
            bare_columns=tuple(data.get("bareColumns", ())),
        )


def skipped_case(reason: str) -> CaseScore:
    """A case the run stopped before reaching: outside the pass rate and the accuracy."""
    return CaseScore(status="skipped", reason=reason)


def disabled_case(reason: str = "case disabled") -> CaseScore:
    """A case left out of the run on purpose, its labels kept."""
    return CaseScore(status="disabled", reason=reason)


def score_case(
    schema: Schema,
    labels: Mapping[str, Any],
    output: Mapping[str, Any] | None,
    *,
    key_columns: Mapping[str, tuple[str, ...]],
    output_error: str | None = None,
) -> CaseScore:
    """Score one case's output against its labels.

    Parameters
    ----------
    schema
        The scored node's schema as the run used it.
    labels
        Stored labels (see :func:`eval_pipelines.core.golden.labels.resolve_labels`).
    output
        The node's output keyed by field id (a table is a list of rows keyed by column id),
        or None when the run produced nothing.
    key_columns
        Table id to the column ids its rows are matched by; others match by position.
    output_error
        Why there is no output, reported in the errored reason.

    Returns
    -------
    CaseScore
    """
    stale: list[str] = []
    bare: list[str] = []
    headers: list[Field] = []
    tables: list[tuple[Field, list[dict[str, Any]]]] = []
    for field_id, label in labels.items():
        field = schema.field(field_id)
        if field is None:
            (bare if schema.table_of_column(field_id) is not None else stale).append(field_id)
        elif field.is_table and isinstance(label, list):
            tables.append((field, _live_rows(field, label, stale)))
        elif not field.is_table and not isinstance(label, Mapping | list):
            headers.append(field)
        else:
            stale.append(field_id)
    stale_paths = tuple(dict.fromkeys(stale))  # a gone column is listed once, not per row
    bare_columns = tuple(bare)
    if output is None:
        reason = f"no output: {output_error or 'the run produced nothing'}"
        return CaseScore("errored", reason, (), stale_paths, bare_columns)
    if not headers and not tables:
        reason = f"no label resolves against the schema: {len(stale_paths)} stale"
        if bare:
            reason += f", {len(bare)} bare column{'s' if len(bare) != 1 else ''} left out"
        return CaseScore("errored", reason, (), stale_paths, bare_columns)
    items = []
    for field in headers:
        expected, actual = labels[field.id], output.get(field.id)
        matched = values_match(expected, actual, field.type)
        items.append(ScoredItem(field.id, None, None, "field", expected, actual, matched))
    for table, rows in tables:
        items.extend(_score_table(table, rows, output.get(table.id), key_columns.get(table.id)))
    status = "passed" if all(item.matched for item in items) else "failed"
    return CaseScore(status, None, tuple(items), stale_paths, bare_columns)


def _live_rows(table: Field, rows: list[Any], stale: list[str]) -> list[dict[str, Any]]:
    """Labelled rows without the cells of columns the table no longer has (those are stale)."""
    live = []
    for row in rows:
        cells = dict(row) if isinstance(row, Mapping) else {}
        for column_id in list(cells):
            if table.column(column_id) is None:
                stale.append(f"{table.id}.{column_id}")
                del cells[column_id]
        live.append(cells)
    return live


def _score_table(
    table: Field,
    labelled: list[dict[str, Any]],
    extracted: Any,
    keys: tuple[str, ...] | None,
) -> list[ScoredItem]:
    # The output is normalised upstream; a malformed table reads as no rows, a bad row as empty.
    raw_rows = extracted if isinstance(extracted, list) else []
    rows = [r if isinstance(r, Mapping) else {} for r in raw_rows]
    # A key column dropped from the schema cannot match anything; its cells are already stale,
    # so match on the key columns that remain, or by position when none does.
    live_keys = [column for k in keys or () if (column := table.column(k)) is not None]
    if live_keys:
        pairs = _match_by_key(labelled, rows, live_keys)
    else:
        pairs = _by_position(labelled, rows)
    items: list[ScoredItem] = []
    for index, row in enumerate(labelled):
        partner = pairs.get(index)
        for column_id, expected in row.items():
            column = table.column(column_id)
            assert column is not None  # stale cells were removed by _live_rows
            if partner is None:
                items.append(
                    ScoredItem(
                        table.id, column_id, index, "missing_row_cell", expected, None, False
                    )
                )
                continue
            actual = rows[partner].get(column_id)
            matched = values_match(expected, actual, column.type)
            items.append(ScoredItem(table.id, column_id, index, "cell", expected, actual, matched))
    claimed = set(pairs.values())
    items.extend(
        ScoredItem(table.id, None, position, "invented_row", None, dict(row), False)
        for position, row in enumerate(rows)
        if position not in claimed
    )
    return items


def _by_position(labelled: list[dict[str, Any]], rows: list[Mapping[str, Any]]) -> dict[int, int]:
    return {index: index for index in range(min(len(labelled), len(rows)))}


def _match_by_key(
    labelled: list[dict[str, Any]], rows: list[Mapping[str, Any]], keys: list[Column]
) -> dict[int, int]:
    """Labelled row index to extracted row index; each extracted row is used at most once, so
    duplicate keys pair up in order."""
    pairs: dict[int, int] = {}
    free = list(range(len(rows)))
    for index, row in enumerate(labelled):
        partner = next(
            (
                position
                for position in free
                if all(
                    values_match(row.get(key.id), rows[position].get(key.id), key.type)
                    for key in keys
                )
            ),
            None,
        )
        if partner is not None:
            pairs[index] = partner
            free.remove(partner)
    return pairs
