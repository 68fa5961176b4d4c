"""Reading the files users hand over (variants, configs, memo entries, queries, labels,
workflows, templates): the one bounded reader every command uses.

Every failure is one :class:`InputError` naming the flag, the path and what is wrong with it:
missing, a directory, too large, not UTF-8, not valid JSON or YAML, nested too deep, or holding
a non-finite number.

Bounds, and why. A JSON or YAML document is at most :data:`MAX_DOCUMENT_BYTES` (1 MiB; the
largest the project ships is 2 KB) and nests at most :data:`MAX_DEPTH` (64) levels: the parsers
recurse, so a file nested a few thousand levels deep ended in a ``RecursionError`` traceback,
and PyYAML's pure-Python parser reads about 50,000 tokens a second, so a 10 MB memo file ran
for minutes. A document also holds at most :data:`MAX_NODES` values counted as they would be
expanded (YAML aliases can multiply a small file into billions of values), and refers to
itself nowhere. Other files (extraction documents) are at most :data:`MAX_FILE_BYTES`, and
table files (records, trees, data tables, logs, embeddings) :data:`MAX_TABLE_BYTES`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    import polars as pl

from eval_pipelines.core.errors import InputError

MAX_DOCUMENT_BYTES = 1 << 20
MAX_FILE_BYTES = 256 << 20
MAX_TABLE_BYTES = 4 << 30
MAX_DEPTH = 64
MAX_NODES = 200_000
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_bytes(path: Path | str, what: str, *, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The file's bytes, refused past ``max_bytes`` (read no further than that)."""
    file = Path(path)
    if not file.exists():
        raise InputError(what, str(file), "file does not exist")
    if file.is_dir():
        raise InputError(what, str(file), "is a directory; give a file")
    try:
        with file.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as error:
        raise InputError(what, str(file), f"cannot be read: {error.strerror}") from None
    if len(data) > max_bytes:
        raise InputError(what, str(file), f"is larger than {_size(max_bytes)}; give a smaller file")
    return data


def read_text(path: Path | str, what: str, *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The file's text, decoded as UTF-8."""
    data = read_bytes(path, what, max_bytes=max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(
            what, str(path), f"is not UTF-8 text (byte {error.start} cannot be decoded)"
        ) from None


def read_json(path: Path | str, what: str) -> Any:
    """A JSON document, within the document bounds."""
    return parse_json_text(read_text(path, what, max_bytes=MAX_DOCUMENT_BYTES), what, str(path))


def read_yaml(path: Path | str, what: str) -> Any:
    """A YAML (or JSON) document, within the document bounds."""
    return parse_yaml_text(read_text(path, what, max_bytes=MAX_DOCUMENT_BYTES), what, str(path))


def parse_json_text(text: str, what: str, value: Any) -> Any:
    """A JSON document from text (a file's, or one given on the command line); refusals name
    ``what`` and ``value``. ``NaN`` and ``Infinity`` are refused, as is an overflowing
    literal such as ``1e999`` (by :func:`check_document`, which names where they are)."""
    _check_length(text, what, value)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(
            what, value, f"is not valid JSON: {error.msg} (line {error.lineno})"
        ) from None
    except RecursionError:
        raise InputError(what, value, _TOO_DEEP) from None
    check_document(document, what, value)
    return document


def parse_json_line(line: str | bytes, number: int, what: str, value: Any) -> Any:
    """One line of a JSON Lines file (a log, an audit file), refused as
    :func:`parse_json_text` refuses a document (not JSON, nested too deep, a non-finite number
    named by its path), the refusal naming the line: ``line 3: holds nan at outcome: ...``.
    A table file's line has no document size bound (the file has :data:`MAX_TABLE_BYTES`)."""
    try:
        parsed = json.loads(line)
    except UnicodeDecodeError as error:
        rule = f"is not UTF-8 text (byte {error.start} cannot be decoded)"
        raise InputError(what, value, f"line {number}: {rule}") from None
    except json.JSONDecodeError as error:
        raise InputError(what, value, f"line {number}: not valid JSON ({error.msg})") from None
    except RecursionError:
        raise InputError(what, value, f"line {number}: {_TOO_DEEP}") from None
    try:
        check_document(parsed, what, value)
    except InputError as error:
        raise InputError(what, value, f"line {number}: {error.rule}") from None
    return parsed


def check_json_object_lines(
    lines: Iterable[tuple[int, str | bytes]], what: str, value: Any
) -> None:
    """Refuse the first of these numbered JSON Lines lines that is not a JSON object
    (:func:`parse_json_line`), naming it: for a file polars' reader refused without saying
    which line."""
    for number, line in lines:
        parsed = parse_json_line(line, number, what, value)
        if not isinstance(parsed, dict):
            raise InputError(
                what, value, f"line {number}: must be a JSON object, not {parsed!r:.40}"
            )


def parse_yaml_text(text: str, what: str, value: Any) -> Any:
    """A YAML (or JSON) document from text; refusals name ``what`` and ``value``."""
    _check_length(text, what, value)
    try:
        # The nesting is measured on the parser's events first (a flat loop), so a deep
        # document is refused before the recursive composer could overflow the stack.
        depth = 0
        for event in yaml.parse(text, Loader=_YAML_LOADER):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise InputError(what, value, _TOO_DEEP)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        document = yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as error:
        error = _pure_yaml_error(text) or error
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        if "nesting depth" in problem:  # libyaml's own limit (1,000) came first
            raise InputError(what, value, _TOO_DEEP) from None
        raise InputError(what, value, f"is not valid YAML: {problem}{where}") from None
    except RecursionError:
        raise InputError(what, value, _TOO_DEEP) from None
    check_document(document, what, value)
    return document


def read_json_lines(path: Path, what: str) -> pl.DataFrame:
    """A JSON Lines table file as polars reads it; a file polars refuses is refused naming its
    first bad line (:func:`check_json_object_lines`: a NaN literal, a line nested too deep,
    not UTF-8) where that is what polars refused, else polars' error is raised."""
    import polars as pl

    try:
        return pl.read_ndjson(path, infer_schema_length=None)
    except pl.exceptions.PolarsError:
        lines = path.read_bytes().split(b"\n")
        numbered = ((n, line) for n, line in enumerate(lines, start=1) if line.strip())
        check_json_object_lines(numbered, what, str(path))
        raise


_TOO_DEEP = f"nests deeper than {MAX_DEPTH} levels"


def _pure_yaml_error(text: str) -> yaml.YAMLError | None:
    """The pure-Python parser's error for a document libyaml refused: its messages are the
    ones users (and tests) know ("expected the node content, but found '-'"); libyaml words
    the same problem differently. Only a refused document pays for this second parse."""
    try:
        yaml.load(text, Loader=yaml.SafeLoader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as error:
        return error
    except RecursionError:
        return None
    return None


def check_document(document: Any, what: str, value: Any) -> None:
    """Refuse a parsed document (or one a Python caller passes) that nests deeper than
    :data:`MAX_DEPTH`, holds more than :data:`MAX_NODES` values as expanded, refers to
    itself, or holds a non-finite number (its path is named).

    Iterative, and each shared container (a YAML alias) is measured once, so neither depth nor
    aliases can make the check itself slow or overflow the stack.
    """
    # Post-order walk over containers: (depth below, expanded values) per container id.
    measured: dict[int, tuple[int, int]] = {}
    open_ids: set[int] = set()
    stack: list[tuple[Any, str, bool]] = [(document, "", False)]
    while stack:
        item, path, children_done = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                at = path.lstrip(".") or "its top"
                raise InputError(
                    what, value, f"holds {item} at {at}: numbers must be finite (NaN, infinity)"
                )
            continue
        if not isinstance(item, dict | list):
            continue
        key = id(item)
        children = (
            [(v, f"{path}.{k}") for k, v in item.items()]
            if isinstance(item, dict)
            else [(v, f"{path}[{i}]") for i, v in enumerate(item)]
        )
        if children_done:
            open_ids.discard(key)
            depth, nodes = 1, 1
            for child, _ in children:
                below = measured.get(id(child)) if isinstance(child, dict | list) else None
                if below is not None:
                    depth, nodes = max(depth, below[0] + 1), nodes + below[1]
                else:
                    nodes += 1
            if depth > MAX_DEPTH:
                raise InputError(what, value, _TOO_DEEP)
            if nodes > MAX_NODES:
                raise InputError(what, value, f"holds more than {MAX_NODES:,} values")
            measured[key] = (depth, nodes)
            continue
        if key in measured:
            continue
        if key in open_ids:
            raise InputError(what, value, f"refers to itself at {path or 'its top'}")
        if len(open_ids) >= MAX_DEPTH:
            raise InputError(what, value, _TOO_DEEP)
        open_ids.add(key)
        stack.append((item, path, True))
        stack.extend((child, at, False) for child, at in reversed(children))


def check_table_file(path: Path, what: str) -> None:
    """Refuse a table file (Parquet, CSV, JSON Lines) larger than :data:`MAX_TABLE_BYTES`: it is
    read whole into memory, where it takes several times its size on disk. (Nesting needs no
    check here: polars refuses JSON deeper than its own limit with an error.)"""
    if path.is_file() and path.stat().st_size > MAX_TABLE_BYTES:
        raise InputError(what, str(path), f"is larger than {MAX_TABLE_BYTES >> 30} GiB")


def _check_length(text: str, what: str, value: Any) -> None:
    if len(text) > MAX_DOCUMENT_BYTES:
        raise InputError(what, value, f"is larger than {_size(MAX_DOCUMENT_BYTES)}")


def _size(n_bytes: int) -> str:
    return f"{n_bytes >> 20} MiB" if n_bytes >= 1 << 20 else f"{n_bytes >> 10} KiB"
