"""The project's errors: one base, :class:`EvalPipelinesError`, under every error it raises
(``except EvalPipelinesError`` catches them all; each also keeps the built-in class it always
had, so ``except ValueError`` still catches bad input). Errors at the public boundary name the
field, the value and the rule. Interrupts (``EvalInterrupted``, ``RunInterrupted``) are
``KeyboardInterrupt`` subclasses instead: an ``except Exception`` must not swallow Ctrl-C."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# A parameter named in a message, as `name`: the CLI shows the flag that sets it instead.
PARAMETER_MENTION = re.compile(r"`([a-z][a-z0-9_]*)`")


class EvalPipelinesError(Exception):
    """The base of every error eval_pipelines raises.

    Messages name Python parameters (``field`` of an :class:`InputError`, and `name` in
    backticks in the text); :meth:`with_flags` gives the message with the CLI's flags."""

    def with_flags(self, flags: Mapping[str, str]) -> str:
        """The message with every parameter named in backticks shown as its flag."""
        return mention_flags(str(self), flags)


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

    def with_flags(self, flags: Mapping[str, str]) -> str:
        field = flags.get(self.field, self.field)
        return f"{field}={_short(self.value)!s}: {mention_flags(self.rule, flags)}"


class RunRefusal(InputError):
    """Input a run refused after it was submitted (checked against what the run read): nothing
    was kept. The run's message already names the field and the value, so it is shown as it
    is, not behind a ``field=None:`` prefix."""

    def __init__(self, field: str, message: str) -> None:
        ValueError.__init__(self, message)
        self.field, self.value, self.rule = field, None, message

    def with_flags(self, flags: Mapping[str, str]) -> str:
        return mention_flags(self.rule, flags)


class ConflictError(EvalPipelinesError, ValueError):
    """A request that contradicts stored state (the REST APIs' 409): nothing has been written."""


class NotFoundError(EvalPipelinesError, LookupError):
    """A case, evaluation, variant or memo entry that does not exist."""


def mention_flags(text: str, flags: Mapping[str, str]) -> str:
    """``text`` with each `parameter` that has a flag shown as that flag (others unchanged)."""
    return PARAMETER_MENTION.sub(lambda found: flags.get(found.group(1), found.group(0)), text)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
