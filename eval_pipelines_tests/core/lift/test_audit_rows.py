"""An audit file's rows checked against the stored requests and audits, without a warehouse:
what is stored, what is skipped, and the refusal naming the row for each rule."""

import json
from pathlib import Path

import polars as pl
import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.audit import AuditFile, read_audit_file
from eval_pipelines.core.lift.audit_rows import check_audit

REQUESTS = pl.DataFrame(
    {
        "request_id": ["r1", "r2", "r3", "r4", "r5", "r5"],
        "workspace_id": ["w1", "w1", "w1", "w1", "w1", "w2"],
        "exposure_epoch": ["e1"] * 6,
        "exposure_arm": ["treated", "lever_holdout", "holdout", "treated", "treated", "treated"],
        "outcome": [True, False, True, None, True, True],
    }
)
NO_AUDITS = pl.DataFrame(
    schema={
        "workspace_id": pl.String,
        "request_id": pl.String,
        "audited_outcome": pl.Boolean,
        "note": pl.String,
        "path": pl.String,
        "line": pl.Int64,
    }
)


def _file(tmp_path: Path, *rows: dict[str, object]) -> AuditFile:
    path = tmp_path / "audit.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return read_audit_file(path)


def test_new_audits_are_kept_with_their_requests_workspace_and_epoch(tmp_path: Path) -> None:
    read = _file(
        tmp_path,
        {"request_id": "r1", "audited_outcome": False},
        {"request_id": "r2", "audited_outcome": False, "note": "checked"},
    )
    keep, skipped = check_audit(read, REQUESTS, NO_AUDITS)
    assert skipped == 0
    assert keep.select("request_id", "workspace_id", "exposure_epoch").rows() == [
        ("r1", "w1", "e1"),
        ("r2", "w1", "e1"),
    ]


def test_an_audit_stored_before_with_the_same_outcome_is_skipped(tmp_path: Path) -> None:
    read = _file(tmp_path, {"request_id": "r1", "audited_outcome": False})
    stored = pl.DataFrame(
        [{"workspace_id": "w1", "request_id": "r1", "audited_outcome": False, "note": None}],
        schema=NO_AUDITS.schema,
    )
    keep, skipped = check_audit(read, REQUESTS, stored)
    assert (keep.height, skipped) == (0, 1)


@pytest.mark.parametrize(
    ("row", "field", "rule"),
    [
        ({"request_id": "nope"}, "request_id", "no stored request has this id"),
        ({"request_id": "r5"}, "request_id", "stored in workspaces w1, w2: give the row's"),
        (
            {"request_id": "r1", "workspace_id": "w9"},
            "workspace_id",
            "request 'r1' is stored with workspace_id=w1",
        ),
        (
            {"request_id": "r2", "exposure_epoch": "e2"},
            "exposure_epoch",
            "request 'r2' is stored with exposure_epoch=e1",
        ),
        ({"request_id": "r3"}, "request_id", "its arm is holdout: the audit compares"),
        ({"request_id": "r4"}, "request_id", "its logged outcome is unresolved (null)"),
    ],
)
def test_a_row_that_cannot_be_audited_refuses_the_file_naming_it(
    tmp_path: Path, row: dict[str, object], field: str, rule: str
) -> None:
    read = _file(
        tmp_path,
        {"request_id": "r1", "audited_outcome": True},
        {**row, "audited_outcome": True},
    )
    with pytest.raises(InputError) as refused:
        check_audit(read, REQUESTS, NO_AUDITS)
    assert refused.value.field == f"line 2: {field}"
    assert rule in str(refused.value) and "(nothing was stored)" in str(refused.value)


def test_a_request_stored_twice_with_different_content_cannot_be_audited(
    tmp_path: Path,
) -> None:
    twice = pl.concat(
        [
            REQUESTS,
            REQUESTS.filter(pl.col("request_id") == "r1").with_columns(outcome=pl.lit(False)),
        ]
    )
    read = _file(tmp_path, {"request_id": "r1", "audited_outcome": True})
    with pytest.raises(InputError, match="stored more than once with different content"):
        check_audit(read, twice, NO_AUDITS)


def test_an_audited_outcome_never_changes(tmp_path: Path) -> None:
    read = _file(tmp_path, {"request_id": "r1", "audited_outcome": True})
    stored = pl.DataFrame(
        [
            {
                "workspace_id": "w1",
                "request_id": "r1",
                "audited_outcome": False,
                "note": None,
                "path": "/before.jsonl",
                "line": 3,
            }
        ],
        schema=NO_AUDITS.schema,
    )
    with pytest.raises(InputError) as refused:
        check_audit(read, REQUESTS, stored)
    assert refused.value.field == "line 1: audited_outcome"
    assert (
        "was audited before with audited_outcome=false, note=None (/before.jsonl, line 3): an "
        "audited outcome never changes" in str(refused.value)
    )
