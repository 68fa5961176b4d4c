"""The project's errors: one base, :class:`EvalPipelinesError`, under every error it raises
(``except EvalPipelinesError`` catches them all; each also keeps the built-in class it always
had, so ``except ValueError`` still catches bad input). Errors at the public boundary name the
field, the value and the rule. Interrupts (``EvalInterrupted``, ``RunInterrupted``) are
``KeyboardInterrupt`` subclasses instead: an ``except Exception`` must not swallow Ctrl-C."""

from __future__ import annotations

from typing import Any


class EvalPipelinesError(Exception):
    """The base of every error eval_pipelines raises."""


class InputError(EvalPipelinesError, ValueError):
    """Bad input: nothing has been written.

    Parameters
    ----------
    field
        The field (or column, or flag) that holds the bad value.
    value
        The offending value, as given.
    rule
        The rule it breaks, phrased so that the fix is obvious.
    """

    def __init__(self, field: str, value: Any, rule: str) -> None:
        self.field = field
        self.value = value
        self.rule = rule
        super().__init__(f"{field}={_short(value)!s}: {rule}")


class ConflictError(EvalPipelinesError, ValueError):
    """A request that contradicts stored state (the REST APIs' 409): nothing has been written."""


class NotFoundError(EvalPipelinesError, LookupError):
    """A case, evaluation, variant or memo entry that does not exist."""


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
