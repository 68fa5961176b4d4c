"""The exposure arms, the teaching arms, and the fail-closed step from one to the other.

Every request is stamped with one :class:`ExposureArm`. Only three of them may teach a lever:
:class:`TeachingArm` is a separate enum holding exactly those three, so a ``holdout`` or
``lever_holdout`` value cannot be represented where a teaching arm is expected (a type
checker rejects an ``ExposureArm`` there), and :func:`teaching_arm` -- the one conversion --
raises :class:`HoldoutFactNotRetrievableError` instead of dropping such a row, because a
silent drop would be indistinguishable from "there were none".
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from eval_pipelines.core.errors import EvalPipelinesError, InputError

__all__ = [
    "ARMS",
    "TEACHING_ARMS",
    "ExposureArm",
    "HoldoutFactNotRetrievableError",
    "TeachingArm",
    "artifact_arm",
    "parse_arm",
    "teaching_arm",
]


class ExposureArm(StrEnum):
    """The closed set of arms a request can land in, stamped at dispatch and never changed.

    Attributes
    ----------
    TREATED
        Served the lever under live confirmation.
    PRE_LEVER
        Outside the standing holdout while no lever is being confirmed.
    IMPORTED
        Facts imported from outside live traffic (never produced by :func:`assign`).
    HOLDOUT
        The standing holdout: served the frozen baseline, never touched by a lever.
    LEVER_HOLDOUT
        Outside the standing holdout but served the frozen baseline while a lever is confirmed:
        the contrast arm of a live confirmation.
    """

    TREATED = "treated"
    PRE_LEVER = "pre_lever"
    IMPORTED = "imported"
    HOLDOUT = "holdout"
    LEVER_HOLDOUT = "lever_holdout"


class TeachingArm(StrEnum):
    """The arms whose facts may feed a lever. Deliberately not a subset type of ExposureArm:
    ``holdout`` and ``lever_holdout`` are not members, so they cannot be expressed."""

    TREATED = "treated"
    PRE_LEVER = "pre_lever"
    IMPORTED = "imported"


#: Every exposure arm, in a fixed order; ``ARMS[code]`` decodes :func:`assign_many` codes.
ARMS: tuple[ExposureArm, ...] = tuple(ExposureArm)

#: The values of the teaching arms.
TEACHING_ARMS: frozenset[str] = frozenset(arm.value for arm in TeachingArm)


class HoldoutFactNotRetrievableError(EvalPipelinesError):
    """A non-teaching arm (``holdout``, ``lever_holdout``) was handed to the exemplar path."""


def parse_arm(value: ExposureArm | str, *, field: str = "exposure_arm") -> ExposureArm:
    """The :class:`ExposureArm` named by ``value``.

    Raises
    ------
    InputError
        When ``value`` is not one of the arms (the message lists the closed set).
    """
    if isinstance(value, ExposureArm):
        return value
    if isinstance(value, str):
        try:
            return ExposureArm(value)
        except ValueError:
            pass
    closed = ", ".join(arm.value for arm in ARMS)
    raise InputError(field, value, f"must be one of the exposure arms: {closed}")


def artifact_arm(arms: Iterable[ExposureArm | str]) -> ExposureArm | None:
    """The arm of an artifact, derived from the arms of its requests.

    Returns
    -------
    ExposureArm or None
        The arm every request shares; None when the requests disagree (a mixed artifact is
        ineligible: it can never anchor a contrast) or when there are no requests.

    Raises
    ------
    InputError
        When any value is not an exposure arm.
    """
    distinct = {parse_arm(arm) for arm in arms}
    return distinct.pop() if len(distinct) == 1 else None


def teaching_arm(arm: ExposureArm | TeachingArm | str) -> TeachingArm:
    """The teaching arm of a fact, failing closed on the arms that may not teach.

    Raises
    ------
    HoldoutFactNotRetrievableError
        For ``holdout`` and ``lever_holdout``: such a fact never reaches a lever, and it is
        never dropped silently either.
    InputError
        When ``arm`` is not an exposure arm at all.
    """
    if isinstance(arm, TeachingArm):
        return arm
    parsed = parse_arm(arm)
    if parsed.value not in TEACHING_ARMS:
        raise HoldoutFactNotRetrievableError(
            f"exposure_arm={parsed.value!r} is not a teaching arm "
            f"({', '.join(sorted(TEACHING_ARMS))}): its facts may not reach a lever"
        )
    return TeachingArm(parsed.value)
