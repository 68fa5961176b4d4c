"""Reading the small files users hand over (variants, configs, memo entries, labels).

Every failure is one :class:`InputError` naming the flag, the path and what is wrong with it:
missing, a directory, not UTF-8, not valid JSON or YAML.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from eval_pipelines.core.errors import InputError


def read_bytes(path: Path | str, what: str) -> bytes:
    """The file's bytes."""
    file = Path(path)
    if not file.exists():
        raise InputError(what, str(file), "file does not exist")
    if file.is_dir():
        raise InputError(what, str(file), "is a directory; give a file")
    try:
        return file.read_bytes()
    except OSError as error:
        raise InputError(what, str(file), f"cannot be read: {error.strerror}") from None


def read_text(path: Path | str, what: str) -> str:
    """The file's text, decoded as UTF-8."""
    data = read_bytes(path, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(
            what, str(path), f"is not UTF-8 text (byte {error.start} cannot be decoded)"
        ) from None


def read_json(path: Path | str, what: str) -> Any:
    """A JSON document."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(
            what, str(path), f"is not valid JSON: {error.msg} (line {error.lineno})"
        ) from None


def read_yaml(path: Path | str, what: str) -> Any:
    """A YAML (or JSON) document."""
    text = read_text(path, what)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise InputError(what, str(path), f"is not valid YAML: {problem}{where}") from None
