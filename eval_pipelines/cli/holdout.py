"""``eval-pipelines eval ...``: start, re-run, follow, list, compare holdout evaluations."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, TextIO

from eval_pipelines.cli.arguments import finite_float, seconds
from eval_pipelines.cli.flags import FLAGS_DEFAULT
from eval_pipelines.cli.grouping import add_sweep_command
from eval_pipelines.cli.output import (
    comparison_markdown,
    print_json,
    print_status,
    run_output_to_stderr,
)
from eval_pipelines.cli.plan import add_plan_command
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.files import read_json
from eval_pipelines.core.holdout.spec import DEFAULT_SEED, SAMPLE_SIZE_DEFAULT, HoldoutOptions

if TYPE_CHECKING:
    from eval_pipelines.api import HoldoutStatus, LaunchedEval
    from eval_pipelines.core.holdout.token_policy import TokenConfirmationNeeded


def _grouping(args: argparse.Namespace) -> dict[str, Any]:
    grouping: dict[str, Any] = {}
    if args.grouping_mode is not None:
        grouping["mode"] = args.grouping_mode
    if args.grouping_threshold is not None:
        grouping["threshold"] = args.grouping_threshold
    if args.grouping_space is not None or args.grouping_backend is not None:
        grouping["retrieval"] = {
            "space": args.grouping_space or "tfidf",
            "backend": args.grouping_backend or "exact",
        }
    return grouping


def _wait_and_print(
    args: argparse.Namespace, eval_id: str, run_id: str | None = None
) -> HoldoutStatus:
    """Wait for the run, then print exactly one document on stdout (the status and report,
    JSON or markdown), for a failed run too, before its error goes up. Progress on stderr is
    the command's reporter (:mod:`eval_pipelines.cli.progress`: at a terminal, never with
    ``--json``), which follows the run's event log."""
    from eval_pipelines import api

    try:
        status = api.wait_for_eval(
            args.case,
            eval_id,
            timeout=args.timeout,
            warehouse=args.warehouse,
            run_id=run_id,
        )
    except api.EvalFailed as failed:
        if isinstance(failed.status, api.HoldoutStatus):
            print_status(failed.status, as_json=args.json)
        raise
    print_status(status, as_json=args.json)
    return status


def _say_started(
    started: LaunchedEval | HoldoutStatus, how: str, stream: TextIO | None = None
) -> None:
    print(
        f"started {started.eval_id} (run {started.run_id}, {how})",
        file=stream or sys.stderr,
        flush=True,
    )


class _ProgressHere:
    """The ``started`` line of a run waited for, at its first event, straight to the terminal
    (see :func:`run_output_to_stderr`). Not progress: printed with ``--json`` and on a pipe
    too. The run's progress is the command's reporter's (a terminal only)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.started = False

    def __call__(self, status: HoldoutStatus) -> None:
        if not self.started:
            self.started = True
            _say_started(status, _where(status), self.stream)


def _where(status: HoldoutStatus) -> str:
    """``running in this process`` for a run this process executes, else its state."""
    from eval_pipelines import runs
    from eval_pipelines.runs.instance import dagster_instance

    if status.run_id is not None and (
        runs.run_worker_pid(dagster_instance(), status.run_id) == os.getpid()
    ):
        return "running in this process"
    return status.status


def _start(
    args: argparse.Namespace, start: Callable[..., LaunchedEval], **options: Any
) -> tuple[LaunchedEval, bool]:
    """Start the run as every run starts (:func:`eval_pipelines.runs.launch`): with
    ``--wait`` this command waits for it (executing it itself when the queue would start it
    now); without, it is submitted and goes on after this command returns. Returns the
    start's answer and whether the ``started`` line has been printed."""
    if getattr(args, "no_launch", False):
        return start(register_only=True, **options), False
    if not args.wait:
        return start(wait=False, **options), False
    with run_output_to_stderr() as terminal:
        told = _ProgressHere(terminal)
        started = start(wait=True, timeout=args.timeout, progress=told, **options)
    return started, told.started


def _follow(args: argparse.Namespace, started: LaunchedEval, said_started: bool) -> int:
    """Without ``--wait``: print the started ids. With it: the started line on stderr (and
    progress, at a terminal), then the status document."""
    if not args.wait:
        print(json.dumps(started.to_json()), flush=True)
        return 0
    if not said_started:
        _say_started(started, started.status)
    _wait_and_print(args, started.eval_id, started.run_id)
    return 0


def start_and_maybe_wait(args: argparse.Namespace, start: Callable[..., LaunchedEval]) -> int:
    """Start an evaluation with the shared eval flags, then follow it."""
    from eval_pipelines.core.holdout.token_policy import TokenConfirmationNeeded

    config = read_json(args.config_file, "--config-file") if args.config_file else None
    options = HoldoutOptions(
        sample_size=args.sample_size,
        seed=args.seed,
        grouping=_grouping(args),
        group_field=args.group_field,
        config=config,
        aa=args.aa,
        leakage_check=args.leakage_check,
        trials=getattr(args, "trials", None),
        confirm_tokens=args.yes,
    )
    try:
        started, said = _start(args, partial(start, options), warehouse=args.warehouse)
    except TokenConfirmationNeeded as needed:
        # Only a person at a terminal can say yes; a script must pass --yes.
        if not sys.stdin.isatty() or not _confirmed(args, needed):
            raise
        confirmed = replace(options, confirm_tokens=True)
        started, said = _start(args, partial(start, confirmed), warehouse=args.warehouse)
    return _follow(args, started, said)


def _confirmed(args: argparse.Namespace, needed: TokenConfirmationNeeded) -> bool:
    from eval_pipelines.core.progress import paused

    with paused():  # no progress line in the middle of the question
        print(needed.with_flags(getattr(args, FLAGS_DEFAULT, None) or {}), file=sys.stderr)
        answer = input("Start it anyway? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def cmd_holdout(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    variants = read_json(args.variants_file, "--variants-file")
    if args.no_launch and args.wait:
        raise InputError("--wait", True, "cannot wait for an evaluation --no-launch registers")
    start = partial(api.start_holdout_eval, args.case, variants, dask_scheduler=args.dask_scheduler)
    return start_and_maybe_wait(args, start)


def cmd_rerun(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    started, said = _start(
        args,
        partial(
            api.rerun_holdout_eval, args.case, args.eval_id, dask_scheduler=args.dask_scheduler
        ),
        warehouse=args.warehouse,
    )
    return _follow(args, started, said)


def cmd_status(args: argparse.Namespace) -> int:
    from eval_pipelines import api
    from eval_pipelines.api.holdout_status import no_run_message

    if args.wait:
        status = _wait_and_print(args, args.eval_id)
    else:
        status = api.get_holdout_eval(args.case, args.eval_id, warehouse=args.warehouse)
        if status.run is None:
            print(f"note: {no_run_message(status)}", file=sys.stderr, flush=True)
        print_status(status, as_json=args.json)
    return 1 if status.status in ("failed", "canceled") else 0


def cmd_list(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    print_json([listed.to_json() for listed in api.list_evals(args.case, warehouse=args.warehouse)])
    return 0


def cmd_rows(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    for row in api.eval_rows(
        args.case,
        args.eval_id,
        variant=args.variant,
        errors_only=args.errors_only,
        warehouse=args.warehouse,
    ):
        print(json.dumps(row.to_json()))
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    from eval_pipelines import api

    print_json({"deletedPartitions": api.prune_partitions(warehouse=args.warehouse)})
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from eval_pipelines.api.compare import compare_holdout_evals

    result = compare_holdout_evals(
        args.case,
        baseline_eval_id=args.baseline_eval_id,
        candidate_eval_id=args.candidate_eval_id,
        baseline_variant=args.baseline_variant,
        candidate_variant=args.candidate_variant,
        allow_memo_change=args.allow_memo_change,
        allow_config_change=args.allow_config_change,
        warehouse=args.warehouse,
    )
    for change in result.changed_besides_variant:
        # Said first, on stderr, so it is read before any number.
        print(
            f"warning: the {change.what} changed besides the variant "
            f"({change.baseline} -> {change.candidate}): the differences below include it",
            file=sys.stderr,
        )
    if args.json:
        print_json(result.to_json())
    else:
        print(comparison_markdown(result), flush=True)
    return 0


def _add_follow_flags(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--wait", action="store_true", help="block until the run finishes; print the report"
    )
    command.add_argument(
        "--json", action="store_true", help="with --wait, print the status and report as JSON"
    )
    command.add_argument(
        "--timeout", type=seconds, default=3600, help="seconds --wait waits (default %(default)s)"
    )


def _add_engine_flag(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--dask-scheduler",
        default=None,
        metavar="tcp://HOST:PORT",
        help="run the steps as tasks on this existing Dask cluster (checked first: it must "
        "answer and have workers that reach the instance, warehouse and step payloads)",
    )


def add_eval_flags(command: argparse.ArgumentParser) -> None:
    """Flags shared by ``eval holdout`` and ``memo evaluate``."""
    command.add_argument(
        "--sample-size",
        type=int,
        default=SAMPLE_SIZE_DEFAULT,
        help="records sampled and held out (default %(default)s)",
    )
    command.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help="seed of the sample (default %(default)s; the same seed draws the same sample)",
    )
    command.add_argument(
        "--grouping-mode", default=None, help="nearDuplicate (default), field or none"
    )
    command.add_argument(
        "--grouping-threshold",
        type=finite_float,
        default=None,
        help="nearDuplicate: cosine similarity at or above which records are grouped, in (0, 1] "
        "(default 0.98)",
    )
    command.add_argument(
        "--grouping-space",
        default=None,
        help="where near-duplicates are found: tfidf (default) or embedding (the case's "
        "embeddings)",
    )
    command.add_argument(
        "--grouping-backend", default=None, help="exact (default), pynndescent or auto"
    )
    command.add_argument(
        "--group-field",
        default=None,
        help="with --grouping-mode field: the record field whose equal values form a group",
    )
    command.add_argument(
        "--config-file",
        default=None,
        help="JSON file of the classifier config shared by every variant (a variant's own "
        "config replaces it)",
    )
    command.add_argument(
        "--aa",
        action="store_true",
        help="add the A/A arm: the baseline twice; report the flip and false-positive rates",
    )
    command.add_argument(
        "--leakage-check",
        action="store_true",
        help="also score the baseline ungrouped on the same sample (the leakage gap)",
    )
    command.add_argument(
        "--yes",
        action="store_true",
        help="start even when the token estimate is above the 400,000 limit",
    )
    _add_follow_flags(command)
    # The API's parameter is `confirm_tokens`; the shell says --yes.
    command.set_defaults(api_flags={"confirm_tokens": "--yes"})


def add_commands(groups: argparse._SubParsersAction) -> None:
    evals = groups.add_parser("eval", help="holdout evaluations").add_subparsers(
        dest="command", required=True
    )
    holdout = evals.add_parser("holdout", help="start a holdout evaluation")
    holdout.add_argument("case", help="case name")
    holdout.add_argument(
        "--variants-file",
        required=True,
        help="JSON list of {name, memo_include?, config?}; the first is the baseline",
    )
    add_eval_flags(holdout)
    holdout.add_argument(
        "--trials",
        type=int,
        default=None,
        help="ask each record N times (1..20) of every chat variant (sets their config "
        "`trials`); refused on an evaluation without a chat variant",
    )
    _add_engine_flag(holdout)
    holdout.add_argument(
        "--no-launch",
        action="store_true",
        help="register only; materialise from the UI or dagster CLI",
    )
    holdout.set_defaults(func=cmd_holdout)
    rerun = evals.add_parser(
        "rerun", help="run an evaluation again from its stored spec (same sample and versions)"
    )
    rerun.add_argument("case", help="case name")
    rerun.add_argument("eval_id", help="evaluation id (eval-pipelines eval list CASE)")
    _add_follow_flags(rerun)
    _add_engine_flag(rerun)
    rerun.set_defaults(func=cmd_rerun)
    status = evals.add_parser(
        "status", help="status, the newest run and, once complete, the report"
    )
    status.add_argument("case", help="case name")
    status.add_argument("eval_id", help="evaluation id (eval-pipelines eval list CASE)")
    status.add_argument("--wait", action="store_true", help="block until the newest run finishes")
    status.add_argument("--json", action="store_true", help="JSON instead of markdown")
    status.add_argument(
        "--timeout", type=seconds, default=3600, help="seconds --wait waits (default %(default)s)"
    )
    status.set_defaults(func=cmd_status)
    listing = evals.add_parser("list", help="the case's evaluations, oldest first")
    listing.add_argument("case", help="case name")
    listing.set_defaults(func=cmd_list)
    add_plan_command(evals)
    add_sweep_command(evals)
    compare = evals.add_parser("compare", help="compare two completed evaluations (paired)")
    compare.add_argument("case", help="case name")
    compare.add_argument("baseline_eval_id", help="evaluation id of the baseline")
    compare.add_argument("candidate_eval_id", help="evaluation id of the candidate")
    compare.add_argument(
        "--baseline-variant", required=True, help="variant name in the baseline evaluation"
    )
    compare.add_argument(
        "--candidate-variant", required=True, help="variant name in the candidate evaluation"
    )
    compare.add_argument(
        "--allow-memo-change",
        action="store_true",
        help="compare even though the two evaluations ran with different active memos",
    )
    compare.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    compare.add_argument(
        "--allow-config-change",
        action="store_true",
        help="compare even though the two variants ran with different configs or plug-in "
        "identities",
    )
    compare.set_defaults(func=cmd_compare)
    prune = evals.add_parser(
        "prune-partitions",
        help="delete partition keys that name no registered evaluation (added in the UI)",
    )
    prune.set_defaults(func=cmd_prune)
    rows = evals.add_parser("rows", help="one JSON line per sampled record and variant")
    rows.add_argument("case", help="case name")
    rows.add_argument("eval_id", help="evaluation id (eval-pipelines eval list CASE)")
    rows.add_argument("--variant", default=None, help="only this variant's rows")
    rows.add_argument(
        "--errors-only",
        action="store_true",
        help="only rows not right at every target depth (wrong, declined or failed)",
    )
    rows.set_defaults(func=cmd_rows)
