"""Comparing two evaluation runs, keyed by case id and field id so it survives renames."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.golden.case import CaseScore
from eval_pipelines.core.golden.shares import json_difference, json_share
from eval_pipelines.core.golden.summary import RunScore
from eval_pipelines.core.results import JsonResult


@dataclass(frozen=True)
class FieldDelta(JsonResult):
    """One breakdown row on both sides; ``delta`` is ``b - a``, None unless both scored it.

    The attributes keep the exact ratios; :meth:`to_json` writes a share, or a delta, with a
    side of fewer than 20 values as ``insufficient_evidence`` beside both sides' counts."""

    key: str
    accuracy_a: float | None
    accuracy_b: float | None
    scored_a: int
    scored_b: int
    correct_a: int
    correct_b: int
    delta: float | None

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        document["accuracyA"] = json_share(self.accuracy_a, self.scored_a)
        document["accuracyB"] = json_share(self.accuracy_b, self.scored_b)
        document["delta"] = json_difference(self.delta, self.scored_a, self.scored_b)
        return document


@dataclass(frozen=True)
class CaseChange(JsonResult):
    """A case whose status differs; a side the case is absent from reads None (its counts 0).
    :meth:`to_json` writes an accuracy of fewer than 20 values as ``insufficient_evidence``
    beside its counts."""

    case_id: str
    status_a: str | None
    status_b: str | None
    accuracy_a: float | None
    accuracy_b: float | None
    scored_a: int
    correct_a: int
    scored_b: int
    correct_b: int

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        document["accuracyA"] = json_share(self.accuracy_a, self.scored_a)
        document["accuracyB"] = json_share(self.accuracy_b, self.scored_b)
        return document


@dataclass(frozen=True)
class CompareResult(JsonResult):
    """Run ``b`` against run ``a``.

    Attributes
    ----------
    field_accuracy_delta, pass_rate_delta
        ``b - a`` of the run figures, None when either side has none; exact here, written
        ``insufficient_evidence`` by :meth:`to_json` when either side has fewer than 20
        observations (values scored; documents passed or failed).
    field_scored_a, field_scored_b, pass_rate_n_a, pass_rate_n_b
        Each side's n of those figures.
    fields
        Per-field deltas, largest regression first; rows scored on one side only (delta None)
        last, by key.
    cases
        Cases whose status changed: passed to failed first, then the rest, each by case id.
    """

    field_accuracy_delta: float | None
    pass_rate_delta: float | None
    fields: tuple[FieldDelta, ...]
    cases: tuple[CaseChange, ...]
    field_scored_a: int
    field_scored_b: int
    pass_rate_n_a: int
    pass_rate_n_b: int

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        document["fieldAccuracyDelta"] = json_difference(
            self.field_accuracy_delta, self.field_scored_a, self.field_scored_b
        )
        document["passRateDelta"] = json_difference(
            self.pass_rate_delta, self.pass_rate_n_a, self.pass_rate_n_b
        )
        return document


def compare_runs(
    a: RunScore,
    a_cases: Mapping[str, CaseScore],
    b: RunScore,
    b_cases: Mapping[str, CaseScore],
) -> CompareResult:
    """Per-field deltas and changed cases of run ``b`` relative to run ``a``.

    Parameters
    ----------
    a, b
        The two runs' figures (``a`` the baseline).
    a_cases, b_cases
        Each run's case results keyed by case id.

    Returns
    -------
    CompareResult
    """
    a_rows = {row.key: row for row in a.fields}
    b_rows = {row.key: row for row in b.fields}
    deltas = []
    for key in dict.fromkeys([*a_rows, *b_rows]):
        left, right = a_rows.get(key), b_rows.get(key)
        accuracy_a = left.accuracy if left else None
        accuracy_b = right.accuracy if right else None
        deltas.append(
            FieldDelta(
                key=key,
                accuracy_a=accuracy_a,
                accuracy_b=accuracy_b,
                scored_a=left.scored if left else 0,
                scored_b=right.scored if right else 0,
                correct_a=left.correct if left else 0,
                correct_b=right.correct if right else 0,
                delta=_difference(accuracy_a, accuracy_b),
            )
        )
    # Most negative delta first; a row without a delta has nothing to rank, so it goes last.
    deltas.sort(key=lambda d: (d.delta is None, d.delta or 0.0, d.key))
    changes = []
    for case_id in sorted({*a_cases, *b_cases}):
        left_case, right_case = a_cases.get(case_id), b_cases.get(case_id)
        status_a = left_case.status if left_case else None
        status_b = right_case.status if right_case else None
        if status_a != status_b:
            changes.append(
                CaseChange(
                    case_id=case_id,
                    status_a=status_a,
                    status_b=status_b,
                    accuracy_a=left_case.accuracy if left_case else None,
                    accuracy_b=right_case.accuracy if right_case else None,
                    scored_a=left_case.scored if left_case else 0,
                    correct_a=left_case.correct if left_case else 0,
                    scored_b=right_case.scored if right_case else 0,
                    correct_b=right_case.correct if right_case else 0,
                )
            )
    # A document that used to pass and now fails is the regression a reviewer looks for first.
    changes.sort(key=lambda c: not (c.status_a == "passed" and c.status_b == "failed"))
    return CompareResult(
        field_accuracy_delta=_difference(a.field_accuracy, b.field_accuracy),
        pass_rate_delta=_difference(a.pass_rate, b.pass_rate),
        fields=tuple(deltas),
        cases=tuple(changes),
        field_scored_a=a.field_scored,
        field_scored_b=b.field_scored,
        pass_rate_n_a=a.pass_rate_n,
        pass_rate_n_b=b.pass_rate_n,
    )


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a
