"""``eval-pipelines workflow ...`` and ``document ...``: revisions, test runs, review,
activation, stored documents."""

from __future__ import annotations

import argparse
from pathlib import Path

from eval_pipelines.cli.output import print_json


def cmd_save(args: argparse.Namespace) -> int:
    from eval_pipelines.api import workflows

    saved = workflows.save_workflow(
        args.name, args.file, saved_by=args.by, warehouse=args.warehouse
    )
    print_json(saved.to_json())
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from eval_pipelines.api import workflows

    print_json([w.to_json() for w in workflows.list_workflows(warehouse=args.warehouse)])
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from eval_pipelines.api import workflows

    shown = workflows.show_workflow(args.name, revision=args.revision, warehouse=args.warehouse)
    print_json(shown.to_json())
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from eval_pipelines.api import workflows

    status = workflows.workflow_status(args.name, warehouse=args.warehouse)
    if args.json:
        print_json(status.to_json())
        return 0
    active = status.active_revision
    gate = status.gate
    print(f"workflow {status.workflow}")
    print(
        f"  active revision: {active.revision} (by {active.activated_by}, {active.activated_at})"
        if active
        else "  active revision: none"
    )
    print(f"  newest revision: {status.newest_revision.revision}")
    print(f"  gate for {gate.revision}: {gate.state}: {gate.reason}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from eval_pipelines.api import workflows

    ran = workflows.run_workflow(
        args.name, args.document, revision=args.revision, warehouse=args.warehouse
    )
    print_json(ran.to_json())
    return 0


def cmd_approve(args: argparse.Namespace) -> int:
    from eval_pipelines.api import workflows

    approved = workflows.approve_run(
        args.run_id, args.values, by=args.by, node=args.node, warehouse=args.warehouse
    )
    print_json(approved.to_json())
    return 0


def cmd_activate(args: argparse.Namespace) -> int:
    from eval_pipelines.api import workflows

    activated = workflows.activate_workflow(
        args.name, args.revision, by=args.by, warehouse=args.warehouse
    )
    print_json(activated.to_json())
    return 0


def cmd_ledger(args: argparse.Namespace) -> int:
    from eval_pipelines.api import workflows

    print_json(
        [a.to_json() for a in workflows.activation_ledger(args.name, warehouse=args.warehouse)]
    )
    return 0


def cmd_documents(args: argparse.Namespace) -> int:
    from eval_pipelines.api import workflows

    print_json([d.to_json() for d in workflows.list_documents(warehouse=args.warehouse)])
    return 0


def cmd_delete_document(args: argparse.Namespace) -> int:
    from eval_pipelines.api import workflows

    print_json(workflows.delete_document(args.document_id, warehouse=args.warehouse).to_json())
    return 0


def add_commands(groups: argparse._SubParsersAction) -> None:
    workflow = groups.add_parser(
        "workflow", help="workflows: revisions, test runs, review, activation"
    ).add_subparsers(dest="command", required=True)
    save = workflow.add_parser("save", help="save a workflow file as a revision (never blocked)")
    save.add_argument("name", help="workflow name")
    save.add_argument("--file", required=True, type=Path, help="the workflow file (YAML or JSON)")
    save.add_argument("--by", default=None, help="who saved it (recorded)")
    save.set_defaults(func=cmd_save, api_flags={"saved_by": "--by"})
    workflow.add_parser("list", help="workflows, newest and active revisions").set_defaults(
        func=cmd_list
    )
    show = workflow.add_parser("show", help="a revision's content and the revision history")
    show.add_argument("name", help="workflow name")
    show.add_argument("--revision", default=None, help="revision id (default: the newest)")
    show.set_defaults(func=cmd_show)
    status = workflow.add_parser("status", help="active and newest revision, gate state")
    status.add_argument("name", help="workflow name")
    status.add_argument("--json", action="store_true", help="print JSON instead of text")
    status.set_defaults(func=cmd_status)
    run = workflow.add_parser("run", help="a test run over one document (delivered nowhere)")
    run.add_argument("name", help="workflow name")
    run.add_argument(
        "--document", required=True, type=Path, help="the document to run the workflow over"
    )
    run.add_argument("--revision", default=None, help="revision id (default: the newest)")
    run.set_defaults(func=cmd_run)
    approve = workflow.add_parser("approve", help="record a reviewed (corrected) result")
    approve.add_argument("run_id", help="test run id (printed by workflow run)")
    approve.add_argument(
        "--values",
        required=True,
        type=Path,
        help="JSON object of the corrected values keyed by field id; a table is a list of "
        "rows keyed by column id",
    )
    approve.add_argument("--by", required=True, help="who reviewed it (recorded)")
    approve.add_argument("--node", default=None, help="node the values belong to")
    approve.set_defaults(func=cmd_approve)
    activate = workflow.add_parser(
        "activate", help="make a revision live (only if its gating sets passed on it)"
    )
    activate.add_argument("name", help="workflow name")
    activate.add_argument("revision", help="revision id to make live")
    activate.add_argument("--by", required=True, help="who activates it (recorded in the ledger)")
    activate.set_defaults(func=cmd_activate)
    ledger = workflow.add_parser("ledger", help="the activation ledger")
    ledger.add_argument(
        "name", nargs="?", default=None, help="only this workflow (default: every workflow)"
    )
    ledger.set_defaults(func=cmd_ledger)

    document = groups.add_parser("document", help="stored documents").add_subparsers(
        dest="command", required=True
    )
    document.add_parser("list", help="documents and how many cases use them").set_defaults(
        func=cmd_documents
    )
    delete = document.add_parser("delete", help="delete a document no case references")
    delete.add_argument("document_id", help="document id (eval-pipelines document list)")
    delete.set_defaults(func=cmd_delete_document)
