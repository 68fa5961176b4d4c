"""Memo entries: proposed, approved by a named person, listed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from eval_pipelines.api._shared import resolve_warehouse
from eval_pipelines.core.files import read_yaml
from eval_pipelines.core.holdout.memo import memo_version, parse_memo_entry
from eval_pipelines.core.inputs import check_name
from eval_pipelines.core.results import JsonResult
from eval_pipelines.stages.golden_classify import repin_classify_workflows
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import memo as memo_store
from eval_pipelines.storage.warehouse import CLI_WAIT_SECONDS, connect, transaction

__all__ = [
    "MemoEntryAdded",
    "MemoEntryApproved",
    "MemoEntryListed",
    "add_memo_entry",
    "approve_memo_entry",
    "list_memo_entries",
]


@dataclass(frozen=True)
class MemoEntryAdded(JsonResult):
    """A memo entry added as proposed; ``added`` is False when the identical entry was there
    (``status`` is then its status)."""

    case_id: str
    entry_id: str
    status: str
    added: bool


@dataclass(frozen=True)
class MemoEntryApproved(JsonResult):
    """An approved (now active) entry, the case's new memo version, and the new revision of
    each classify workflow on the case (workflow name -> revision)."""

    case_id: str
    entry_id: str
    status: str
    approved_by: str
    memo_version: str
    new_workflow_revisions: Mapping[str, str]


@dataclass(frozen=True)
class MemoEntryListed(JsonResult):
    """One entry of a case's memo: its status, instruction and rule (``when``, ``then``)."""

    entry_id: str
    status: str
    instruction: str
    rule: Mapping[str, object]
    approved_by: str | None


def add_memo_entry(
    case_id: str, entry_path: Path | str, *, warehouse: Path | str | None = None
) -> MemoEntryAdded:
    """Add a memo entry (YAML or JSON file) as ``proposed``."""
    raw = read_yaml(entry_path, "entry_path")
    with connect(resolve_warehouse(warehouse)) as conn:
        info = cases_store.load_case(conn, case_id)
        tree = cases_store.load_tree(conn, case_id, info.tree_version)
        entry = parse_memo_entry(raw, tree)
        with transaction(conn):
            added = memo_store.add_entry(conn, case_id, entry)
        status = memo_store.entry_status(conn, case_id, entry.entry_id)
    return MemoEntryAdded(
        case_id=case_id, entry_id=entry.entry_id, status=status or "proposed", added=added
    )


def approve_memo_entry(
    case_id: str, entry_id: str, *, by: str, warehouse: Path | str | None = None
) -> MemoEntryApproved:
    """Approve a proposed entry: it becomes active, and every classify workflow on the case
    gets a new revision (which its gate must pass before it can go live)."""
    check_name(by, "by", "who approves the entry: a name")
    with connect(resolve_warehouse(warehouse)) as conn:
        info = cases_store.load_case(conn, case_id)
        with transaction(conn):
            memo_store.approve_entry(conn, case_id, entry_id, by)
            # The memo is part of every classify workflow on this case: each gets a new
            # revision, which its gate must pass before it can go live.
            revisions = repin_classify_workflows(conn, case_id, source=f"memo-approval:{entry_id}")
        active = [
            e
            for e in memo_store.load_entries(
                conn, case_id, cases_store.load_tree(conn, case_id, info.tree_version)
            )
            if e.status == "active"
        ]
    return MemoEntryApproved(
        case_id=case_id,
        entry_id=entry_id,
        status="active",
        approved_by=by,
        memo_version=memo_version(active),
        new_workflow_revisions=revisions,
    )


def list_memo_entries(
    case_id: str, *, warehouse: Path | str | None = None
) -> tuple[MemoEntryListed, ...]:
    """The case's memo entries, proposed and active."""
    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        cases_store.load_case(conn, case_id)
        frame = memo_store.list_entries(conn, case_id)
    return tuple(
        MemoEntryListed(
            entry_id=row["entry_id"],
            status=row["status"],
            instruction=row["instruction"],
            rule={k: v for k, v in json.loads(row["entry_json"]).items() if k in ("when", "then")},
            approved_by=row["approved_by"],
        )
        for row in frame.iter_rows(named=True)
    )
