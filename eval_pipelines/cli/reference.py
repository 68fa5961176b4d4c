"""The CLI reference page, generated from the parser: ``python -m eval_pipelines.cli.reference``.

Writes ``docs/cli.md`` (or prints it with ``--stdout``): every command's ``--help``, in the
order the parser defines them, so the page cannot drift from the flags. A test regenerates it
and fails when the committed page differs; after changing a command, run this again.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from eval_pipelines.cli.main import build_parser

# Help is wrapped at a fixed width, not the terminal's, so the page is the same everywhere.
WIDTH = 100
PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"

HEADER = """# CLI reference

Every command of `eval-pipelines` with its `--help`, generated from the parser by
`python -m eval_pipelines.cli.reference` (do not edit by hand: a test regenerates this page
and fails when it differs from the committed one). The rules every command shares (names,
input files, progress, exit codes, environment variables) are in [Using the CLI](usage.md).

Which commands wait for their run: a command whose answer is the run's result always waits
for it, `evaluate` (the 003 response), `golden run` (the gate's verdict is its exit code),
`case embed`, `lift ingest` and `lift report`; `evaluate --submit` only sends the run through
the instance's run queue instead of executing it in the command's own process, and still
waits. A holdout evaluation can run for a long time, so `eval holdout`, `eval rerun` and
`memo ab` print its ids and return at once, and wait (printing the report) only with
`--wait`; `eval status --wait` follows one later. The Python API says the same with one
keyword: `wait=False` is "submit and return" ([Python API](api.md#runs-and-waiting)).
"""


def _commands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """The parser, then each subcommand's parser, depth first in definition order."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                yield from _commands(child)


def render() -> str:
    """The whole page as Markdown."""
    sections = [HEADER]
    for command in _commands(build_parser()):
        formatter = command.formatter_class  # raw descriptions stay raw
        command.formatter_class = lambda prog, formatter=formatter: formatter(prog, width=WIDTH)  # type: ignore[misc]
        help_text = command.format_help().rstrip()
        sections.append(f"## `{command.prog}`\n\n```text\n{help_text}\n```\n")
    return "\n".join(sections)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval_pipelines.cli.reference")
    parser.add_argument("--stdout", action="store_true", help="print the page instead")
    args = parser.parse_args(argv)
    page = render()
    if args.stdout:
        sys.stdout.write(page)
    else:
        PAGE.write_text(page, encoding="utf-8")
        print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
