"""Decision intents: the contract a cost verdict is read under (specification 004, "The cost
bar: explicit decision intent").

``cost_optimization``
    The lever is meant to make each task cheaper: ``cheaper`` needs the always-valid
    interval of the difference in cost per task below zero and the claim's quality not
    ``inferior``. No budget: a budget pass is not a cheaper task.
``required_migration``, ``product_improvement``
    The lever is adopted for another reason (a model retired, a feature added); its cost
    is read against an explicit total-cost budget per task when one is declared:
    ``within_budget`` or ``over_budget``, never called savings.

A claim without an intent gets no cost verdict (``no_intent``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.errors import InputError

__all__ = [
    "COST_OPTIMIZATION",
    "INTENTS",
    "PRODUCT_IMPROVEMENT",
    "REQUIRED_MIGRATION",
    "DecisionIntent",
    "decision_intent",
]

COST_OPTIMIZATION = "cost_optimization"
REQUIRED_MIGRATION = "required_migration"
PRODUCT_IMPROVEMENT = "product_improvement"
INTENTS = (COST_OPTIMIZATION, REQUIRED_MIGRATION, PRODUCT_IMPROVEMENT)
#: The intents a budget may be declared with.
BUDGET_INTENTS = (REQUIRED_MIGRATION, PRODUCT_IMPROVEMENT)
CURRENCY = re.compile(r"[A-Z]{3}")


@dataclass(frozen=True)
class DecisionIntent:
    """A claim's declared decision intent. Build it with :func:`decision_intent` (or
    :meth:`from_json`), which checks it; the constructor does not.

    Attributes
    ----------
    kind
        One of :data:`INTENTS`.
    budget
        The most the treated arm may cost per task (its total cost per cluster), > 0; only
        with ``required_migration`` or ``product_improvement``. None: no budget.
    currency
        The budget's currency (3 upper-case letters); with a budget only.
    """

    kind: str
    budget: float | None = None
    currency: str | None = None

    def to_json(self) -> dict[str, Any]:
        """camelCase, as stored with the claim."""
        return {"kind": self.kind, "budget": self.budget, "currency": self.currency}

    @classmethod
    def from_json(cls, document: Mapping[str, Any], *, field: str = "intent") -> DecisionIntent:
        """The intent :meth:`to_json` wrote, checked again (a stored document is input too)."""
        if not isinstance(document, Mapping):
            raise InputError(field, document, "must be an object {kind, budget, currency}")
        unknown = sorted(set(document) - {"kind", "budget", "currency"})
        if unknown:
            raise InputError(f"{field}.{unknown[0]}", document[unknown[0]], "unknown key")
        return decision_intent(
            document.get("kind"),
            budget=document.get("budget"),
            currency=document.get("currency"),
            field=field,
        )

    def words(self) -> str:
        """The intent as a report line shows it: ``required_migration, budget 0.0200 USD per
        task``."""
        if self.budget is None:
            return self.kind
        return f"{self.kind}, budget {self.budget:.4g} {self.currency} per task"


def decision_intent(
    kind: Any, *, budget: Any = None, currency: Any = None, field: str = "intent"
) -> DecisionIntent:
    """A checked :class:`DecisionIntent`.

    Parameters
    ----------
    kind
        One of :data:`INTENTS`.
    budget
        A finite number > 0, or None. Refused with ``cost_optimization``: its bar is a
        cheaper task, which no budget replaces.
    currency
        3 upper-case letters, required with a budget and refused without one.
    field
        How the error names the intent (``intent``; the CLI names its flags).

    Raises
    ------
    InputError
        Naming the field (``intent.kind``, ``intent.budget``, ``intent.currency``), the value
        and the rule.

    Examples
    --------
    >>> from eval_pipelines.core.lift.intents import decision_intent
    >>> decision_intent("required_migration", budget=0.02, currency="USD").words()
    'required_migration, budget 0.02 USD per task'
    """
    if kind not in INTENTS:
        raise InputError(f"{field}.kind", kind, f"must be one of {', '.join(INTENTS)}")
    if budget is None:
        if currency is not None:
            raise InputError(
                f"{field}.currency", currency, "a currency goes with a budget; give both or neither"
            )
        return DecisionIntent(kind)
    if kind not in BUDGET_INTENTS:
        raise InputError(
            f"{field}.budget",
            budget,
            f"a budget is declared only with {' or '.join(BUDGET_INTENTS)}: {kind} is read "
            "against a lower cost per task, which no budget replaces",
        )
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not math.isfinite(budget):
        raise InputError(f"{field}.budget", budget, "must be a finite number > 0")
    if budget <= 0:
        raise InputError(f"{field}.budget", budget, "must be a finite number > 0")
    if currency is None:
        raise InputError(
            f"{field}.currency", currency, "required with a budget (3 upper-case letters, e.g. USD)"
        )
    if not isinstance(currency, str) or CURRENCY.fullmatch(currency) is None:
        raise InputError(
            f"{field}.currency", currency, "must be 3 upper-case letters (ISO 4217, e.g. USD)"
        )
    return DecisionIntent(kind, float(budget), currency)
