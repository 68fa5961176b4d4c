"""The learned-exemplar container, keyed on the teaching arms only.

The index is arm-typed at its definition rather than filtered at each read site: its keys
are :class:`TeachingArm` members, so a ``holdout`` or ``lever_holdout`` exemplar is a type
error, and at run time anything that is not a ``TeachingArm`` instance -- an
``ExposureArm`` (even ``ExposureArm.TREATED``) or a plain string -- is refused with
:class:`HoldoutFactNotRetrievableError` before anything is stored. Convert a stamped arm
with :func:`~eval_pipelines.core.lift.arms.teaching_arm`, which fails closed.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from eval_pipelines.core.lift.arms import HoldoutFactNotRetrievableError, TeachingArm

__all__ = ["ExemplarIndex"]

E = TypeVar("E")


def _checked(arm: object) -> TeachingArm:
    if type(arm) is not TeachingArm:
        shown = arm.value if hasattr(arm, "value") else arm
        raise HoldoutFactNotRetrievableError(
            f"arm={shown!r} ({type(arm).__name__}) is not a TeachingArm: the exemplar index "
            "holds teaching arms only; convert a stamped arm with teaching_arm(), which "
            "refuses holdout and lever_holdout"
        )
    return arm


class ExemplarIndex(Generic[E]):
    """Exemplars grouped by the teaching arm they were learned from, in insertion order.

    Examples
    --------
    >>> index: ExemplarIndex[str] = ExemplarIndex()
    >>> index.add(TeachingArm.TREATED, "worked example")
    >>> index.exemplars(TeachingArm.TREATED)
    ('worked example',)
    """

    def __init__(self) -> None:
        self._by_arm: dict[TeachingArm, list[E]] = {}

    def add(self, arm: TeachingArm, exemplar: E) -> None:
        """Store ``exemplar`` under ``arm``.

        Raises
        ------
        HoldoutFactNotRetrievableError
            When ``arm`` is not a :class:`TeachingArm` instance; nothing is stored.
        """
        self._by_arm.setdefault(_checked(arm), []).append(exemplar)

    def exemplars(self, arm: TeachingArm) -> tuple[E, ...]:
        """The exemplars stored under ``arm``, oldest first (empty when there are none).

        Raises
        ------
        HoldoutFactNotRetrievableError
            When ``arm`` is not a :class:`TeachingArm` instance: asking for holdout exemplars
            is an error, never an empty answer.
        """
        return tuple(self._by_arm.get(_checked(arm), ()))

    def arms(self) -> frozenset[TeachingArm]:
        """The teaching arms that hold at least one exemplar."""
        return frozenset(self._by_arm)

    def __len__(self) -> int:
        return sum(len(items) for items in self._by_arm.values())

    def __repr__(self) -> str:
        counts = ", ".join(f"{arm.value}={len(items)}" for arm, items in self._by_arm.items())
        return f"ExemplarIndex({counts})"
