"""``eval-pipelines lift assign | settings | ingest | report | ledger | ci | audit-sample |
audit`` (spec 004)."""

from __future__ import annotations

import argparse
from typing import Any

from eval_pipelines.cli.arguments import finite_float
from eval_pipelines.cli.lift_cost import COST_FLAGS, add_cost_options, cost_settings_words
from eval_pipelines.cli.output import print_json
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.files import read_json


def _messages(path: str | None) -> list[dict[str, Any]]:
    if path is None:
        return []
    value = read_json(path, "--messages")
    if isinstance(value, dict):
        value = value.get("messages")
    if not isinstance(value, list):
        raise InputError("--messages", path, "must hold a list of {role, content} messages")
    return value


def cmd_assign(args: argparse.Namespace) -> int:
    from eval_pipelines.api import lift

    config = lift.config_for(
        args.workspace,
        epoch=args.epoch,
        holdout_fraction=args.fraction,
        lever=args.lever,
        lever_holdout_share=args.lever_share,
        warehouse=args.warehouse,
    )
    request: lift.LiftRequest = {
        "workspace_id": args.workspace,
        "artifact_key": args.artifact,
        "trace_id": args.trace,
        "messages": _messages(args.messages),
        "request_id": args.request_id,
    }
    assigned = lift.assign_request(request, config)
    if args.json:
        print_json(assigned.to_json())
    else:
        print(
            f"{assigned.arm} (epoch {assigned.epoch}, bucket {assigned.bucket} of "
            f"10000, holdout {assigned.holdout_fraction:.0%}, keyed on {assigned.key_source}: "
            f"{assigned.cluster})",
            flush=True,
        )
    return 0


def cmd_settings(args: argparse.Namespace) -> int:
    from eval_pipelines.api import lift

    settings = lift.set_settings(
        args.workspace,
        holdout_fraction=args.fraction,
        lever=args.lever,
        clear_lever=args.no_lever,
        lever_holdout_share=args.lever_share,
        case=args.case,
        intent=args.intent,
        budget=args.budget,
        budget_currency=args.budget_currency,
        clear_intent=args.no_intent,
        lever_changes=args.lever_changes,
        prices=args.prices,
        clear_prices=args.no_prices,
        warehouse=args.warehouse,
    )
    if args.json:
        print_json(settings.to_json())
    else:
        epoch = (
            f"{settings.epoch} (new: the split changed)" if settings.new_epoch else settings.epoch
        )
        print(
            f"workspace {settings.workspace_id}: holdout {settings.holdout_fraction:.0%}, "
            f"lever {settings.lever or 'none'} (lever_holdout share "
            f"{settings.lever_holdout_share:.0%}), epoch {epoch}, case "
            f"{settings.case_id or 'none (no offline screening is set beside its claims)'}; "
            + cost_settings_words(settings.intent, settings.lever_changes, settings.prices),
            flush=True,
        )
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from eval_pipelines.api import lift

    ingested = lift.ingest(args.path, warehouse=args.warehouse)
    if args.json:
        print_json(ingested.to_json())
    else:
        state = "ingested" if ingested.new else "already ingested (same content): unchanged"
        days = ingested.days
        span = f"{days[0]} .. {days[-1]}" if days else "no day"
        unresolved = ingested.unresolved_after_resolved_rows
        late = (
            f" ({unresolved} of them unresolved, their outcome already stored)"
            if unresolved
            else ""
        )
        superseded = ingested.superseded_rows
        in_file = (
            f"; {superseded} unresolved lines left out (the file also gives their outcome)"
            if superseded
            else ""
        )
        print(
            f"{ingested.path}: {state}; {ingested.rows} rows over {len(days)} days "
            f"({span}): {ingested.stored_rows} stored, {ingested.skipped_rows} already "
            f"stored (same content): skipped{late}; {ingested.resolved_rows} resolved "
            f"(replacing their stored unresolved rows){in_file}; mixed artifacts "
            f"{ingested.mixed_artifacts} (left out of every lift)",
            flush=True,
        )
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from eval_pipelines.api import lift

    report = lift.report(warehouse=args.warehouse)
    if args.json:
        print_json({**report.report, "runId": report.run_id})
    else:
        print(report.markdown, flush=True)
    return 0


def cmd_ledger(args: argparse.Namespace) -> int:
    from eval_pipelines.api import lift
    from eval_pipelines.core.lift.application_ci_ledger import (
        application_ci_entry_lines,
        claim_application_ci_lines,
    )
    from eval_pipelines.core.lift.cost_report import cost_line
    from eval_pipelines.core.lift.report import claim_line

    rows = lift.ledger(warehouse=args.warehouse)
    if args.json:
        print_json([row.to_json() for row in rows])
        return 0
    if not rows:
        print("the lift ledger is empty: ingest logs, then `eval-pipelines lift report`")
    for row in rows:
        document = row.to_json()
        if isinstance(row, lift.LedgerApplicationCI):
            print("\n".join(application_ci_entry_lines(document)), flush=True)
            continue
        cost = cost_line(document.get("cost"))
        lines = [claim_line(document), *([f"  {cost}"] if cost else [])]
        print("\n".join([*lines, *claim_application_ci_lines(document)]), flush=True)
    return 0


def cmd_ci(args: argparse.Namespace) -> int:
    from eval_pipelines.api import lift
    from eval_pipelines.core.lift.application_ci_ledger import (
        NOT_A_CONFIRMATION,
        application_ci_line,
    )

    recorded = lift.record_ci(
        args.workspace,
        candidate=args.candidate,
        commit=args.commit,
        suite=args.suite,
        passed=args.passed,
        failed=args.failed,
        skipped=args.skipped,
        binds=args.binds,
        workflow=args.workflow,
        revision=args.revision,
        warehouse=args.warehouse,
    )
    if args.json:
        print_json(recorded.to_json())
        return 0
    result = recorded.result
    state = "recorded" if recorded.new else "already recorded (same result): unchanged"
    print(
        f"{result.workspace_id}/{result.candidate}: {state}: "
        f"{application_ci_line(result.to_json())} ({NOT_A_CONFIRMATION})",
        flush=True,
    )
    return 0


def cmd_audit_sample(args: argparse.Namespace) -> int:
    from pathlib import Path

    from eval_pipelines.api import lift
    from eval_pipelines.core.lift.audit import sample_text

    out = Path(args.out) if args.out else None
    if out is not None and out.suffix.lower() not in (".jsonl", ".csv"):
        raise InputError("--out", str(out), "must end in .jsonl or .csv (the audit file's kind)")
    sample = lift.audit_sample(
        args.workspace_id,
        size=args.size,
        epoch=args.epoch,
        claim_type=args.claim_type,
        warehouse=args.warehouse,
    )
    if out is None:
        print(sample_text(sample.rows, kind="jsonl"), end="", flush=True)
        return 0
    out.write_text(sample_text(sample.rows, kind=out.suffix.lower()[1:]), encoding="utf-8")
    print(
        f"{out}: {len(sample.rows)} requests to audit of workspace {sample.workspace_id}, "
        f"epoch {sample.epoch} (up to {sample.per_arm} per arm in each claim type, one per "
        "cluster; arms and logged outcomes not shown): fill in audited_outcome (true or false), "
        "then `eval-pipelines lift audit FILE`",
        flush=True,
    )
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from eval_pipelines.api import lift

    ingested = lift.audit(args.path, warehouse=args.warehouse)
    if args.json:
        print_json(ingested.to_json())
    else:
        print(
            f"{ingested.path}: {ingested.rows} audited rows: "
            f"{ingested.stored} stored, {ingested.skipped} already stored (same "
            f"outcome): skipped; {ingested.unfilled} not filled in yet; the next "
            "`lift report` reads them",
            flush=True,
        )
    return 0


def add_commands(groups: argparse._SubParsersAction) -> None:
    lift = groups.add_parser(
        "lift", help="live lift: assignment, log ingest, lift report and ledger (spec 004)"
    ).add_subparsers(dest="command", required=True)

    assign = lift.add_parser(
        "assign",
        help="the exposure arm of one request (deterministic: FNV-1a bucket of workspace and "
        "cluster key)",
    )
    assign.add_argument("--workspace", required=True, help="workspace id")
    assign.add_argument("--artifact", default=None, help="artifact key (first precedence)")
    assign.add_argument("--trace", default=None, help="trace id")
    assign.add_argument(
        "--messages", default=None, metavar="FILE", help="JSON list of {role, content}"
    )
    assign.add_argument("--request-id", default=None, help="used only without a user message")
    assign.add_argument(
        "--epoch", default=None, help="exposure epoch (default: the workspace's current one)"
    )
    assign.add_argument("--fraction", type=finite_float, default=None, help="holdout, 0.05-0.30")
    assign.add_argument("--lever", default=None, help="lever name (default: the workspace's)")
    assign.add_argument(
        "--lever-share",
        type=finite_float,
        default=None,
        help="share of the non-holdout traffic served the baseline while the lever is on, "
        "in (0, 1) (default: the workspace's, else 0.5)",
    )
    assign.add_argument("--json", action="store_true", help="print JSON instead of text")
    assign.set_defaults(
        func=cmd_assign,
        api_flags={"holdout_fraction": "--fraction", "lever_holdout_share": "--lever-share"},
    )

    settings = lift.add_parser(
        "settings", help="a workspace's standing holdout and lever (a change starts an epoch)"
    )
    settings.add_argument("--workspace", required=True, help="workspace id")
    settings.add_argument("--fraction", type=finite_float, default=None, help="0.05-0.30")
    settings.add_argument(
        "--lever", default=None, help="the lever now served (a new lever starts an epoch)"
    )
    settings.add_argument(
        "--no-lever", action="store_true", help="no lever any more (starts an epoch)"
    )
    settings.add_argument(
        "--lever-share",
        type=finite_float,
        default=None,
        help="share of the non-holdout traffic served the baseline while the lever is on, "
        "in (0, 1) (default 0.5)",
    )
    settings.add_argument(
        "--case",
        default=None,
        help="the case this workspace's traffic is an instance of: its holdout evaluations of "
        "the lever are set beside the live claims",
    )
    add_cost_options(settings)
    settings.add_argument("--json", action="store_true", help="print JSON instead of text")
    settings.set_defaults(
        func=cmd_settings,
        api_flags={
            "holdout_fraction": "--fraction",
            "lever_holdout_share": "--lever-share",
            **COST_FLAGS,
        },
    )

    ingest = lift.add_parser("ingest", help="validate and store one log file (whole or nothing)")
    ingest.add_argument("path", metavar="file", help="the log file (JSON Lines)")
    ingest.add_argument("--json", action="store_true", help="print JSON instead of text")
    # A refusal of the file has always named it --file.
    ingest.set_defaults(func=cmd_ingest, api_flags={"path": "--file"})

    report = lift.add_parser("report", help="every scope's lift, after its A/A check")
    report.add_argument("--json", action="store_true", help="print JSON instead of text")
    report.set_defaults(func=cmd_report)

    ledger = lift.add_parser(
        "ledger",
        help="each claim with its scope, interval and n; application-CI results as their own kind",
    )
    ledger.add_argument("--json", action="store_true", help="print JSON instead of text")
    ledger.set_defaults(func=cmd_ledger)

    ci = lift.add_parser(
        "ci",
        help="record an application-CI result of a candidate: the team's harness (--commit, "
        "--suite, --passed, --failed) or the golden gate's runs (--workflow, --revision); its "
        "own kind of evidence, never a live confirmation",
    )
    ci.add_argument("--workspace", required=True, help="workspace id")
    ci.add_argument("--candidate", required=True, help="the candidate (its lever)")
    ci.add_argument("--commit", default=None, help="the application revision the check ran on")
    ci.add_argument("--suite", default=None, help="the suite that ran")
    ci.add_argument("--passed", type=int, default=None, help="tests passed")
    ci.add_argument("--failed", type=int, default=None, help="tests failed")
    ci.add_argument("--skipped", type=int, default=0, help="tests skipped (default 0)")
    ci.add_argument(
        "--binds",
        default="application",
        help="what the check exercised: application (a raw model-call comparison, "
        "model_calls, cannot claim application coverage and is refused)",
    )
    ci.add_argument(
        "--workflow", default=None, help="record the golden gate's runs of this workflow"
    )
    ci.add_argument(
        "--revision", default=None, help="the workflow revision the lever changes (gate source)"
    )
    ci.add_argument("--json", action="store_true", help="print JSON instead of text")
    ci.set_defaults(func=cmd_ci, api_flags={"workspace_id": "--workspace"})

    sample = lift.add_parser(
        "audit-sample",
        help="the requests to audit (outcome established outside the logging path), "
        "deterministic, balanced per arm, blinded",
    )
    # dest: the API's parameter, so a refusal naming `workspace_id` shows --workspace (as it
    # always did here; assign and settings have always shown workspace_id).
    sample.add_argument(
        "--workspace", dest="workspace_id", metavar="WORKSPACE", required=True, help="workspace id"
    )
    sample.add_argument(
        "--size", type=int, required=True, help="requests per arm (in each claim type)"
    )
    sample.add_argument("--epoch", default=None, help="default: the workspace's current epoch")
    sample.add_argument("--claim-type", default=None, help="only this claim type (default: each)")
    sample.add_argument(
        "--out", default=None, metavar="FILE", help="write FILE (.jsonl or .csv), not stdout"
    )
    sample.set_defaults(func=cmd_audit_sample)

    audit = lift.add_parser(
        "audit", help="ingest audited outcomes (whole or nothing; idempotent per request)"
    )
    audit.add_argument(
        "path",
        metavar="file",
        help="the audit file (.jsonl or .csv, as audit-sample wrote it, audited_outcome filled)",
    )
    audit.add_argument("--json", action="store_true", help="print JSON instead of text")
    audit.set_defaults(func=cmd_audit, api_flags={"path": "--file"})
