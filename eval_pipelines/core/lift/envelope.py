"""Whether a claim's two arms ran the same model invocation: the execution-envelope rule of a
cost claim (specification 004, "Cost and quality always refer to the same retained model
invocation, over the complete execution envelope").

Every contrasted row (treated and lever_holdout, of the claim's scope and epoch) must log
every envelope element (:data:`~eval_pipelines.core.lift.cost_columns.ENVELOPE`); otherwise
the claim is ineligible, ``envelope_incomplete: <element>``. The arms must then agree on
each element the lever does not declare it changes: the set of the element's values in the
treated rows equals the set in the lever_holdout rows; otherwise ``envelope_mismatch:
<element>``. The first element in :data:`ENVELOPE` order is named.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import polars as pl

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.cost_columns import ENVELOPE

__all__ = [
    "ELIGIBLE",
    "ENVELOPE",
    "INCOMPLETE",
    "MISMATCH",
    "Eligibility",
    "envelope_eligibility",
    "parse_lever_changes",
]

INCOMPLETE = "envelope_incomplete"
MISMATCH = "envelope_mismatch"
#: Costs logged in more than one currency, or a budget in another currency than the costs:
#: no exchange rate is applied, so nothing is compared.
CURRENCY_MISMATCH = "currency_mismatch"


@dataclass(frozen=True)
class Eligibility:
    """Whether a claim's cost may be read.

    Attributes
    ----------
    eligible
        True when every contrasted row is complete and the arms agree.
    reason
        ``envelope_incomplete: tools``, ``envelope_mismatch: response_format``,
        ``envelope_incomplete: cost``, ``currency_mismatch: currency``; None when eligible.
    element
        The element named (an envelope element, ``cost`` or ``currency``); None when eligible.
    detail
        What was seen, in plain words, with row counts only (never a cost).
    """

    eligible: bool
    reason: str | None = None
    element: str | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "eligible": self.eligible,
            "reason": self.reason,
            "element": self.element,
            "detail": self.detail,
        }


ELIGIBLE = Eligibility(True)


def ineligible(kind: str, element: str, detail: str) -> Eligibility:
    """An :class:`Eligibility` that refuses, ``kind: element``."""
    return Eligibility(False, f"{kind}: {element}", element, detail)


def parse_lever_changes(
    value: str | Iterable[str] | None, *, field: str = "lever_changes"
) -> tuple[str, ...]:
    """The envelope elements a lever declares it changes, checked: a comma-separated text
    (``model,provider``) or names; each one of :data:`ENVELOPE`, in that order, once.

    Raises
    ------
    InputError
        Naming the unknown element.

    Examples
    --------
    >>> from eval_pipelines.core.lift.envelope import parse_lever_changes
    >>> parse_lever_changes("provider, model")
    ('model', 'provider')
    """
    if value is None:
        return ()
    names = [n.strip() for n in value.split(",") if n.strip()] if isinstance(value, str) else value
    chosen = set()
    for name in names:
        if name not in ENVELOPE:
            raise InputError(field, name, f"must name envelope elements: {', '.join(ENVELOPE)}")
        chosen.add(name)
    return tuple(element for element in ENVELOPE if element in chosen)


def envelope_eligibility(
    treated_rows: pl.DataFrame, control_rows: pl.DataFrame, *, lever_changes: Iterable[str] = ()
) -> Eligibility:
    """Whether the arms' rows ran the same execution envelope, but for ``lever_changes``.

    Parameters
    ----------
    treated_rows, control_rows
        The contrasted rows of each arm (resolved or not). A missing envelope column counts
        as an element no row logs.
    lever_changes
        The elements the lever declares it changes (:func:`parse_lever_changes`): they must
        be logged, and may differ between the arms.

    Returns
    -------
    Eligibility
        The first incomplete element (in :data:`ENVELOPE` order), else the first element the
        arms disagree on, else :data:`ELIGIBLE`. An arm with no rows has nothing to disagree
        with: only completeness is checked then (the cost reads insufficient anyway).
    """
    changes = parse_lever_changes(lever_changes)
    arms = {"treated": treated_rows, "lever_holdout": control_rows}
    for element in ENVELOPE:
        missing = {arm: _missing(rows, element) for arm, rows in arms.items()}
        if any(missing.values()):
            counts = " and ".join(
                f"{missing[arm]} of {rows.height} {arm} rows" for arm, rows in arms.items()
            )
            return ineligible(
                INCOMPLETE,
                element,
                f"{counts} do not log {element}: a cost is read only over the complete "
                "execution envelope",
            )
    if treated_rows.height == 0 or control_rows.height == 0:
        return ELIGIBLE
    for element in ENVELOPE:
        if element in changes:
            continue
        treated, control = _values(treated_rows, element), _values(control_rows, element)
        if treated != control:
            return ineligible(
                MISMATCH,
                element,
                f"the treated rows log {len(treated)} value(s) of {element} and the "
                f"lever_holdout rows {len(control)}, not the same set ("
                f"{_difference_words(treated, control)}); the lever declares it changes "
                f"{', '.join(changes) if changes else 'no envelope element'}",
            )
    return ELIGIBLE


def _missing(rows: pl.DataFrame, element: str) -> int:
    if element not in rows.columns:
        return rows.height
    return rows.get_column(element).null_count()


def _values(rows: pl.DataFrame, element: str) -> frozenset[Any]:
    return frozenset(rows.get_column(element).unique().to_list())


def _difference_words(treated: frozenset[Any], control: frozenset[Any]) -> str:
    """Which values only one arm logs (at most 3 each): envelope values are digests and
    names, never costs."""

    def shown(values: frozenset[Any]) -> str:
        listed = sorted(str(v) for v in values)
        return ", ".join(listed[:3]) + (f" and {len(listed) - 3} more" if len(listed) > 3 else "")

    parts = []
    if treated - control:
        parts.append(f"only treated: {shown(treated - control)}")
    if control - treated:
        parts.append(f"only lever_holdout: {shown(control - treated)}")
    return "; ".join(parts)
