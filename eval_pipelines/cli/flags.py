"""Which flag sets which API parameter, so a refusal from the API (which names Python
parameters) reads in the shell's words: ``--dim=1: ...`` rather than ``dim=1: ...``.

Every command's parser knows its flags: a flag's ``dest`` is the parameter it feeds, and a
positional shows as the usage line shows it. A command whose API parameter has another name
than its flag's ``dest`` says so with ``set_defaults(api_flags={"parameter": "--flag"})``."""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping

FLAGS_DEFAULT = "flags"
API_FLAGS_DEFAULT = "api_flags"


def flags_of(parser: argparse.ArgumentParser, inherited: Mapping[str, str]) -> dict[str, str]:
    """``dest -> flag`` for ``parser``'s own arguments, over the ``inherited`` ones."""
    flags = dict(inherited)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            continue
        if action.option_strings:
            flags[action.dest] = max(action.option_strings, key=len)
        elif action.dest is not argparse.SUPPRESS:
            # A positional as the usage line shows it: its metavar, else its name.
            flags[action.dest] = str(action.metavar or action.dest)
    flags.update(parser.get_default(API_FLAGS_DEFAULT) or {})
    return flags


def _commands(
    parser: argparse.ArgumentParser, inherited: Mapping[str, str]
) -> Iterator[tuple[argparse.ArgumentParser, dict[str, str]]]:
    flags = flags_of(parser, inherited)
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subcommands:
        yield parser, flags
    for action in subcommands:
        for child in dict.fromkeys(action.choices.values()):
            yield from _commands(child, flags)


def record_flags(parser: argparse.ArgumentParser) -> None:
    """Give every command its ``flags`` default: the map a refusal is shown through."""
    for command, flags in _commands(parser, {}):
        command.set_defaults(**{FLAGS_DEFAULT: flags})
