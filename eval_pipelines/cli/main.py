"""``eval-pipelines``: every kind of evaluation from the shell: holdout evaluations of a case
(with its memo entries), workflows and their golden-set gate, evaluate queries over data
tables, and live lift.

Thin: parses flags, calls :mod:`eval_pipelines.api`, prints. Every refusal is one line on
stderr. Exit codes: 0 ok, 1 evaluation failed, 2 bad input or refusal (nothing written),
3 timed out, 4 warehouse busy, 130 interrupted (a run this process was executing is
canceled; one submitted to the queue keeps running).
"""

from __future__ import annotations

import argparse
import atexit
import gc
import logging
import os
import sys
from typing import NoReturn

from eval_pipelines.cli import (
    cases,
    golden,
    holdout,
    lift,
    memo,
    queries,
    tables,
    warehouse,
    workflows,
)
from eval_pipelines.cli.flags import FLAGS_DEFAULT, record_flags
from eval_pipelines.core.errors import (
    ConflictError,
    EvalPipelinesError,
    InputError,
    NotFoundError,
)

EXIT_OK, EXIT_FAILED, EXIT_REFUSED, EXIT_TIMEOUT, EXIT_BUSY = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (the usage itself is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_REFUSED, f"error: {self.prog}: {message} (see --help)\n")


DESCRIPTION = """\
Tells you honestly, with intervals and n, whether a change to a classification or extraction
setup makes it better or worse (Dagster and DuckDB). Four kinds of evidence:

  holdout evaluation  eval (spec 000): variants of a case's classifier scored on a seeded
                      sample of labelled records, each held out with its group, every
                      candidate paired against the baseline
  golden-set gate     workflow, golden, document (spec 001): a workflow revision scored field
                      by field on labelled documents; a gating set blocks activation
  evaluate queries    evaluate, evaluations (spec 003): a predict or estimate query, held out
                      or resubstituted, over a loaded table or a case's records
  live lift           lift (spec 004): arm assignment, log ingest, the lift report and ledger

What they read: case (labelled records and their code tree), memo (rules for a case's
classifier), table (data tables for evaluate queries).

Exit codes: 0 ok; 1 evaluation failed or canceled (golden run: a gating set failed); 2 bad
input or refusal (nothing written), a team instance in PostgreSQL that cannot be used included
(checked before any command); 3 --wait timed out; 4 warehouse busy; 130 interrupted.
Every command: eval-pipelines GROUP COMMAND --help, or docs/cli.md.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="eval-pipelines",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--warehouse",
        type=str,  # a path or a URL: Path("postgresql://...") would fold its "//"
        default=None,
        help=(
            "DuckDB file or postgresql://user@host:port/db URL (default "
            "$EVAL_PIPELINES_WAREHOUSE or data/warehouse.duckdb)"
        ),
    )
    groups = parser.add_subparsers(dest="group", required=True, parser_class=OneLineParser)
    cases.add_commands(groups)
    memo.add_commands(groups)
    holdout.add_commands(groups)
    workflows.add_commands(groups)
    golden.add_commands(groups)
    tables.add_commands(groups)
    lift.add_commands(groups)
    queries.add_commands(groups)
    warehouse.add_commands(groups)
    record_flags(parser)
    return parser


def _fail(message: str, code: int) -> int:
    print(f"error: {message}", file=sys.stderr, flush=True)
    return code


def _refusal(error: BaseException, args: argparse.Namespace) -> str:
    """The error's message with the parameters it names shown as this command's flags."""
    if isinstance(error, EvalPipelinesError):
        return error.with_flags(getattr(args, FLAGS_DEFAULT, None) or {})
    return str(error)


def _quiet_broken_pipe() -> int:
    """The reader went away (``eval rows ... | head``): stop quietly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        # Run as the program: at exit, Python's last garbage collections would walk every
        # object this process made (docs/benchmarks.md gives the cost after an evaluation);
        # the process is ending, so nothing needs collecting.
        atexit.register(gc.freeze)
    args = build_parser().parse_args(argv)
    # Notices such as "waiting 40 s for the warehouse lock" go to stderr as one line each.
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    from eval_pipelines.api._shared import EvalFailed, EvalInterrupted
    from eval_pipelines.cli.progress import command_progress
    from eval_pipelines.runs.instance import check_shared_instance, configured_home
    from eval_pipelines.settings import SettingError
    from eval_pipelines.storage.warehouse import WarehouseBusy, WarehouseUnavailable

    try:
        with command_progress(args, sys.argv[1:] if argv is None else argv):
            # A team's instance in PostgreSQL that cannot work, or a machine naming another
            # warehouse than the deployment's, is refused before the command writes anything
            # (the warehouse included), not half-way when it starts a run.
            check_shared_instance(configured_home())
            return int(args.func(args))
    except (
        InputError,
        ConflictError,
        NotFoundError,
        SettingError,
        WarehouseUnavailable,
    ) as error:
        return _fail(_refusal(error, args), EXIT_REFUSED)
    except EvalFailed as error:
        return _fail(_refusal(error, args), EXIT_FAILED)
    except TimeoutError as error:
        return _fail(_refusal(error, args), EXIT_TIMEOUT)
    except WarehouseBusy as error:
        return _fail(f"{_refusal(error, args)}; try again shortly", EXIT_BUSY)
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except PermissionError as error:
        return _fail(f"{error.filename or ''}: permission denied ({error.strerror})", EXIT_REFUSED)
    except EvalInterrupted as error:
        print(f"interrupted: {error}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print(
            "interrupted: an evaluation already started keeps running; follow it with "
            "'eval-pipelines eval status CASE EVAL_ID --wait'",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
