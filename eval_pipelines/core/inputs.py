"""Rules every input shares: the one name pattern, and finite numbers only.

Names (case ids, memo entry ids, variant names, workflow and golden-set names, the workspace ids
and levers ``lift settings`` stores, and who did something: ``--by``) become parts of partition
keys, file names, Dagster tags, step keys, stored records and markdown tables, so they are one token
of safe characters: 1-64 letters, digits, ``_``, ``.`` or ``-``, starting with a letter or a
digit. The check matches the whole string (``fullmatch``): a pattern ending in ``$`` used with
``re.match`` also accepts a final newline.

Numbers are finite: JSON and YAML can spell NaN and infinity (``NaN``, ``Infinity``, ``.nan``,
``.inf``, ``1e999``), and Python callers can pass them. A NaN compares false with everything,
so a range check such as ``boost <= 0`` lets it through and the number then poisons every sum
it enters; it is refused where it is read, naming its path.
"""

from __future__ import annotations

import math
import re
from typing import Any

from eval_pipelines.core.errors import InputError

NAME_MAX = 64
NAME_PATTERN = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{NAME_MAX - 1}}}")
NAME_RULE = f"1-{NAME_MAX} letters, digits, '_', '.' or '-', starting with a letter or digit"


def is_name(value: Any) -> bool:
    """Whether ``value`` is a string that follows the one name pattern."""
    return isinstance(value, str) and NAME_PATTERN.fullmatch(value) is not None


def check_name(value: Any, field: str, what: str = "a name") -> str:
    """``value`` if it follows the name pattern, else :class:`InputError` naming ``field``."""
    if not is_name(value):
        raise InputError(field, value, f"{what} is {NAME_RULE}")
    return value


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is a finite ``int`` or ``float`` (a ``bool`` is not a number here)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def reject_non_finite(value: Any, field: str) -> None:
    """Refuse a NaN or infinite float anywhere in ``value`` (mappings and lists walked, without
    recursion, so any depth is safe), naming its path: ``field.key[2]``."""
    stack: list[tuple[Any, str]] = [(value, field)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                raise InputError(
                    path, item, "must be a finite number (NaN and infinity are refused)"
                )
        elif isinstance(item, dict):
            stack.extend((v, f"{path}.{k}") for k, v in reversed(item.items()))
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(item))))
