"""The ``invoice2data`` node: regex templates (invoice2data 1.0.1) over a document's text.

Configuration (the node mapping besides ``id``, ``type``, ``cost``, ``schema``)::

    templates: [{issuer: ACME, keywords: [ACME Ltd], fields: {amount: 'Total:\\s+([\\d.]+)'}}]
    template_files: [templates/acme.yml]          # relative to the workflow file's folder
    builtin_templates: [com.flipkart.WSRetail.json]  # bundled with invoice2data
    time_limit: 30                                # seconds per step (optional, default 30)

Preparing folds all three into one ``templates`` list of template mappings, each with its
``template_name`` (inline: ``templates[i]`` unless it sets one; a file: its file name; a
bundled template: the name given, e.g. ``fr/com.amazon.aws.yml`` where two folders hold that
file name), so the revision pins every template's content. Every regular expression is
compiled then, with the engine invoice2data runs (stdlib ``re`` unless
``INVOICE2DATA_REGEX_ENGINE=regex``), and a bad one is reported with its path; so is a field
regex with several capturing groups, which invoice2data turns into "no value" at run time.

Running matches the templates against the document's text the way
``invoice2data.extract_data`` does (highest ``priority`` first, first whose keywords all
occur) and extracts from the text already read: nothing is re-read, so a field's ``area``
(a PDF region re-extracted by poppler) falls back to the whole text. It runs in a worker
process with a time limit (:mod:`~eval_pipelines.core.workflows.step_worker`): a regex that
backtracks catastrophically fails that document's step ("timed out after 30 s") instead of
hanging the run. The patterns keep invoice2data's own semantics (stdlib ``re``), not RE2's:
RE2 reads ``\\s``, ``\\w``, ``\\d`` as ASCII (a no-break space, ``é`` or an Arabic digit would stop
matching), reads ``$`` as the very end of the text, and cannot compile ``\\Z``, ``\\u`` or
lookarounds (17 of the ~2,300 regexes of invoice2data's 215 bundled templates).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import invoice2data.extract
from invoice2data.extract import _regex as invoice2data_regex

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.files import read_json, read_yaml
from eval_pipelines.core.workflows.invoice2data_extract import build_template, extract
from eval_pipelines.core.workflows.nodes import Document, reject_unknown_keys
from eval_pipelines.core.workflows.output import to_jsonable
from eval_pipelines.core.workflows.step_worker import (
    DEFAULT_TIME_LIMIT_SECONDS,
    run_step,
    time_limit_of,
)

BUILTIN_DIR = Path(invoice2data.extract.__file__).parent / "templates"
CONFIG_KEYS = ("templates", "template_files", "builtin_templates", "time_limit")
TEMPLATE_SUFFIXES = (".yml", ".yaml", ".json")
VALUE_TYPES = ("int", "float", "date", "datetime")
GROUPS = ("sum", "min", "max", "first", "last", "join")
PARSERS = ("lines", "regex", "static")


class Invoice2DataNode:
    """Node type ``invoice2data``."""

    def prepare(self, config: dict[str, Any], where: str, base_dir: Path) -> dict[str, Any]:
        reject_unknown_keys(config, CONFIG_KEYS, where)
        named: list[tuple[str, str, dict[str, Any]]] = []  # (path, template name, template)
        for index, template in enumerate(_list(config, "templates", where)):
            at = f"{where}.templates[{index}]"
            if not isinstance(template, dict):
                raise InputError(at, template, "a template is a mapping with keywords and fields")
            name = template.get("template_name", f"templates[{index}]")
            if not isinstance(name, str) or not name.strip():
                raise InputError(f"{at}.template_name", name, "must be a non-empty string")
            named.append((at, name, template))
        for index, file_name in enumerate(_list(config, "template_files", where)):
            at = f"{where}.template_files[{index}]"
            named.append((at, *_template_file(file_name, at, base_dir)))
        for index, builtin in enumerate(_list(config, "builtin_templates", where)):
            at = f"{where}.builtin_templates[{index}]"
            named.append((at, builtin, _builtin_template(builtin, at)))
        if not named:
            raise InputError(
                where,
                sorted(config),
                "give at least one template: templates, template_files or builtin_templates",
            )
        prepared = []
        seen: dict[str, str] = {}
        for at, name, template in named:
            if name in seen:
                raise InputError(
                    at, name, f"template names must be unique; already used by {seen[name]}"
                )
            seen[name] = at
            prepared.append(check_template({**template, "template_name": name}, at))
        # Only when given: revisions saved before the limit existed keep their ids.
        limit = {} if "time_limit" not in config else {"time_limit": time_limit_of(config, where)}
        return {"templates": prepared, **limit}

    def run(
        self,
        config: dict[str, Any],
        document: Document,
        upstream: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, Any]:
        # In a worker process with a time limit: a template regex that backtracks
        # catastrophically fails this document's step instead of hanging the run.
        output = run_step(
            extract,
            config["templates"],
            document.text,
            str(document.path or document.name),
            seconds=float(config.get("time_limit", DEFAULT_TIME_LIMIT_SECONDS)),
        )
        return to_jsonable(output)


def _list(config: dict[str, Any], key: str, where: str) -> list[Any]:
    value = config.get(key, [])
    if not isinstance(value, list):
        raise InputError(f"{where}.{key}", value, "must be a list")
    return value


def _template_file(file_name: Any, at: str, base_dir: Path) -> tuple[str, dict[str, Any]]:
    if not isinstance(file_name, str) or not file_name.endswith(TEMPLATE_SUFFIXES):
        raise InputError(
            at, file_name, f"a template file is a path ending {', '.join(TEMPLATE_SUFFIXES)}"
        )
    path = base_dir / file_name
    template = read_json(path, at) if file_name.endswith(".json") else read_yaml(path, at)
    if not isinstance(template, dict):
        raise InputError(at, file_name, "a template file holds one template mapping")
    # invoice2data names a template after its file.
    return path.name, template


@functools.cache
def _builtin_index() -> dict[str, list[str]]:
    """Bundled template names (file name and path under templates/) -> their paths."""
    index: dict[str, list[str]] = {}
    for path in sorted(BUILTIN_DIR.rglob("*")):
        if path.suffix in TEMPLATE_SUFFIXES:
            relative = path.relative_to(BUILTIN_DIR).as_posix()
            index.setdefault(path.name, []).append(relative)
            index.setdefault(relative, []).append(relative)
    return index


def _builtin_template(name: Any, at: str) -> dict[str, Any]:
    found = _builtin_index().get(name) if isinstance(name, str) else None
    if not found:
        raise InputError(
            at,
            name,
            "not a template bundled with invoice2data; the names are the file names under "
            f"{BUILTIN_DIR} (list them with: ls -R {BUILTIN_DIR}), e.g. com.flipkart.WSRetail.json",
        )
    if len(found) > 1:
        raise InputError(
            at, name, f"several bundled templates have this name; give one of {', '.join(found)}"
        )
    relative = found[0]
    path = BUILTIN_DIR / relative
    template = read_json(path, at) if relative.endswith(".json") else read_yaml(path, at)
    if not isinstance(template, dict):
        raise InputError(at, name, "the bundled file does not hold a template mapping")
    return template


# --- template validation -------------------------------------------------------------------


def check_template(template: dict[str, Any], where: str) -> dict[str, Any]:
    """Validate one invoice2data template mapping; returns it as JSON values.

    Checks what invoice2data 1.0.1 would otherwise trip over at run time, or silently
    ignore: JSON-serialisable content, ``keywords`` (plain text: invoice2data matches them
    as substrings, not regexes), ``fields`` (each a regex, a list of regexes, or a mapping
    with ``parser: regex | lines | static``), ``lines`` and ``tables`` blocks, ``options``;
    every regular expression compiles, and a field regex has at most one capturing group.
    """
    template = _json_template(template, where)
    _check_texts(template.get("keywords"), f"{where}.keywords", required=True)
    _check_texts(template.get("exclude_keywords"), f"{where}.exclude_keywords", required=False)
    for key in ("issuer", "input_module"):
        if key in template and not isinstance(template[key], str):
            raise InputError(f"{where}.{key}", template[key], "must be a string")
    priority = template.get("priority", 5)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InputError(f"{where}.priority", priority, "must be an integer (default 5)")
    if "required_fields" in template:
        required = template["required_fields"]
        if not isinstance(required, list):  # invoice2data would iterate a string's letters
            raise InputError(f"{where}.required_fields", required, "a list of field names")
        _check_texts(required, f"{where}.required_fields", required=False)
    if "camelot" in template:
        raise InputError(
            f"{where}.camelot",
            template["camelot"],
            "the camelot plugin re-reads the PDF, which a node does not do; use lines or tables",
        )
    fields = template.get("fields")
    if not isinstance(fields, dict):
        raise InputError(f"{where}.fields", fields, "a mapping of output name to extraction")
    for name, spec in fields.items():
        _check_field(name, spec, f"{where}.fields.{name}")
    if "lines" in template:
        _check_lines(template["lines"], f"{where}.lines")
    if "tables" in template:
        _check_tables(template["tables"], f"{where}.tables")
    _check_options(template.get("options", {}), f"{where}.options")
    try:
        build_template(template)
    except Exception as error:  # whatever else invoice2data refuses when loading it
        raise InputError(
            where, template["template_name"], f"invoice2data rejects it: {error}"
        ) from None
    return template


def _json_template(value: Any, at: str) -> Any:
    """The template as JSON values (the revision stores and hashes it as JSON). YAML reads
    an unquoted ``2023-03-01`` as a date: it becomes the ISO text the node would output."""
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise InputError(at, key, "mapping keys must be strings")
        return {key: _json_template(item, f"{at}.{key}") for key, item in value.items()}
    if isinstance(value, list):
        return [_json_template(item, f"{at}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, dt.date):
        return to_jsonable(value)
    if value is not None and not isinstance(value, str | int | float):
        raise InputError(at, value, "must be text, a number, true/false, a list or a mapping")
    return value


def _check_texts(value: Any, at: str, *, required: bool) -> None:
    """A non-empty string or a list of them (``keywords``, ``required_fields``...)."""
    if value is None and not required:
        return
    items = value if isinstance(value, list) else [value]
    if required and not items:
        raise InputError(at, value, "give at least one")
    for index, item in enumerate(items):
        if not isinstance(item, str) or not item:
            where = f"{at}[{index}]" if isinstance(value, list) else at
            raise InputError(where, item, "must be a non-empty string")


def _check_regex(pattern: Any, at: str, *, max_groups: int | None = None) -> None:
    if not isinstance(pattern, str) or not pattern:
        raise InputError(at, pattern, "must be a non-empty regular expression")
    try:
        compiled = invoice2data_regex.compile(pattern)
    except Exception as error:
        raise InputError(
            at,
            pattern,
            f"does not compile ({invoice2data_regex.ENGINE} module): {error}",
        ) from None
    if max_groups is not None and compiled.groups > max_groups:
        raise InputError(
            at,
            pattern,
            f"has {compiled.groups} capturing groups; a field regex captures at most one "
            "(make the others non-capturing: (?:...))",
        )


def _check_regexes(value: Any, at: str, *, max_groups: int | None = None) -> None:
    """One regex or a non-empty list of them."""
    if isinstance(value, list):
        if not value:
            raise InputError(at, value, "give at least one regular expression")
        for index, pattern in enumerate(value):
            _check_regex(pattern, f"{at}[{index}]", max_groups=max_groups)
    else:
        _check_regex(value, at, max_groups=max_groups)


def _check_replace(value: Any, at: str) -> None:
    """``[pattern, replacement]`` or a list of such pairs."""
    pairs = value if isinstance(value, list) and value and isinstance(value[0], list) else [value]
    for index, pair in enumerate(pairs):
        _check_pair(pair, f"{at}[{index}]" if pairs is value else at)


def _check_pair(pair: Any, at: str) -> None:
    if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
        raise InputError(at, pair, "a replacement is a [pattern, replacement] pair of strings")
    _check_regex(pair[0], f"{at}[0]")


def _check_choice(value: Any, choices: tuple[str, ...], at: str) -> None:
    if value not in choices:
        raise InputError(at, value, f"must be one of {', '.join(choices)}")


def _check_types(value: Any, at: str) -> None:
    if not isinstance(value, dict):
        raise InputError(at, value, "a mapping of group name to int, float, date or datetime")
    for name, kind in value.items():
        _check_choice(kind, VALUE_TYPES, f"{at}.{name}")


def _check_field(name: str, spec: Any, at: str) -> None:
    if isinstance(spec, dict):
        parser = spec.get("parser")
        _check_choice(parser, PARSERS, f"{at}.parser")
        if parser == "regex":
            _check_regexes(spec.get("regex"), f"{at}.regex", max_groups=1)
            if "replace" in spec:
                _check_replace(spec["replace"], f"{at}.replace")
            if "type" in spec:
                _check_choice(spec["type"], VALUE_TYPES, f"{at}.type")
            if "group" in spec:
                _check_choice(spec["group"], GROUPS, f"{at}.group")
        elif parser == "lines":
            _check_lines(spec, at)
        elif "value" not in spec:
            raise InputError(f"{at}.value", None, "a static field gives its value")
    elif name.startswith("static_"):
        return  # a constant copied to the output under the name without "static_"
    elif isinstance(spec, str | list):
        _check_regexes(spec, at, max_groups=1)
    else:
        raise InputError(
            at, spec, "a regex, a list of regexes, or a mapping with parser: regex/lines/static"
        )


def _check_lines(settings: Any, at: str) -> None:
    """A ``lines`` block: one rule in the block itself, or a list of ``rules``."""
    if not isinstance(settings, dict):
        raise InputError(at, settings, "a lines block is a mapping with start, end and line")
    if "rules" in settings:
        rules = settings["rules"]
        if not isinstance(rules, list) or not rules:
            raise InputError(f"{at}.rules", rules, "a non-empty list of line rules")
        for index, rule in enumerate(rules):
            if not isinstance(rule, dict):
                raise InputError(f"{at}.rules[{index}]", rule, "a rule is a mapping")
            _check_line_rule(rule, f"{at}.rules[{index}]", in_rules=True)
    else:
        _check_line_rule(settings, at, in_rules=False)


def _check_line_rule(rule: dict[str, Any], at: str, *, in_rules: bool) -> None:
    for key in ("start", "end", "line"):
        if key not in rule:
            raise InputError(f"{at}.{key}", None, f"a lines rule needs a {key} regex")
    _check_regex(rule["start"], f"{at}.start")
    _check_regex(rule["end"], f"{at}.end")
    for key in ("line", "first_line", "last_line", "skip_line"):
        if key in rule:
            _check_regexes(rule[key], f"{at}.{key}")
    if "end_match" in rule:
        _check_choice(rule["end_match"], ("first", "last"), f"{at}.end_match")
    if "types" in rule:
        _check_types(rule["types"], f"{at}.types")
    # Outside a rules list invoice2data reads only start, end, end_match, line, first_line,
    # last_line, skip_line and types: a line_separator or replace there is ignored.
    if in_rules and "line_separator" in rule:
        _check_regex(rule["line_separator"], f"{at}.line_separator")
    if in_rules and "replace" in rule:
        _check_line_replace(rule["replace"], f"{at}.replace")


def _check_line_replace(value: Any, at: str) -> None:
    """``{column: pair(s)}`` or a list of single-column mappings."""
    entries = value if isinstance(value, list) else [value]
    for index, entry in enumerate(entries):
        where = f"{at}[{index}]" if isinstance(value, list) else at
        if not isinstance(entry, dict):
            raise InputError(where, entry, "a mapping of column name to replacement pair(s)")
        for column, pairs in entry.items():
            _check_replace(pairs, f"{where}.{column}")


def _check_tables(tables: Any, at: str) -> None:
    if not isinstance(tables, list) or not tables:
        raise InputError(at, tables, "a non-empty list of table mappings (start, end, body)")
    for index, table in enumerate(tables):
        where = f"{at}[{index}]"
        if not isinstance(table, dict):
            raise InputError(where, table, "a table is a mapping with start, end and body")
        for key in ("start", "end", "body"):
            if key not in table:
                raise InputError(f"{where}.{key}", None, f"a table needs a {key} regex")
            _check_regex(table[key], f"{where}.{key}")
        for key in ("line_separator", "field_separator"):
            if key in table:
                _check_regex(table[key], f"{where}.{key}")
        if "types" in table:
            _check_types(table["types"], f"{where}.types")
        fields = table.get("fields") or {}
        if not isinstance(fields, dict):
            raise InputError(f"{where}.fields", fields, "a mapping of group name to type / group")
        for name, spec in fields.items():
            if not isinstance(spec, dict):
                raise InputError(f"{where}.fields.{name}", spec, "a mapping with type / group")
            if "type" in spec:
                _check_choice(spec["type"], VALUE_TYPES, f"{where}.fields.{name}.type")
            if "group" in spec:
                _check_choice(spec["group"], GROUPS, f"{where}.fields.{name}.group")


def _check_options(options: Any, at: str) -> None:
    if not isinstance(options, dict):
        raise InputError(at, options, "must be a mapping")
    if "replace" in options:
        replace = options["replace"]
        if not isinstance(replace, list):
            raise InputError(f"{at}.replace", replace, "a list of [pattern, replacement] pairs")
        for index, pair in enumerate(replace):
            _check_pair(pair, f"{at}.replace[{index}]")
    for key in ("date_formats", "languages"):
        if key in options and not (
            isinstance(options[key], list) and all(isinstance(v, str) for v in options[key])
        ):
            raise InputError(f"{at}.{key}", options[key], "must be a list of strings")
    for index, language in enumerate(options.get("languages", [])):
        if len(language) != 2:
            raise InputError(f"{at}.languages[{index}]", language, "a two-letter language code")
    for key in ("decimal_separator", "currency"):
        if key in options and not isinstance(options[key], str):
            raise InputError(f"{at}.{key}", options[key], "must be a string")
    for key in ("remove_whitespace", "remove_accents", "lowercase"):
        # An empty YAML value (None) is what invoice2data reads as false.
        if options.get(key) is not None and not isinstance(options[key], bool):
            raise InputError(f"{at}.{key}", options[key], "must be true or false")
