"""Malformed input through the real CLI (issue 28): each is refused with exit 2 in one line
naming the field or line, the value and the rule, no traceback, and nothing is written (the
warehouse's bytes unchanged, or no warehouse at all)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines_tests.helpers.cli_calls import cli, refused
from eval_pipelines_tests.helpers.lift_traffic import write_log

DEEP = 5_000


def digest(path: Path) -> str | None:
    """The file's MD5, None when there is no file."""
    return hashlib.md5(path.read_bytes()).hexdigest() if path.exists() else None  # noqa: S324


def _day(workdir: Path, name: str = "day.jsonl", workspace: str = "ws", **options: Any) -> Path:
    config = LiftConfig(workspace, "e1", lever="l")
    return write_log(
        workdir / name, config, true_lift=0.0, days=1, conversations_per_day=20, **options
    )


def _ingested(workdir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str | None]:
    """A warehouse holding one ingested day, and its digest."""
    code, _, err = cli(capsys, "lift", "ingest", _day(workdir))
    assert code == 0, err
    warehouse = workdir / "warehouse.duckdb"
    return warehouse, digest(warehouse)


def file_refusal(path: Path, rule: str) -> str:
    """The line the CLI prints refusing the file ``path`` (a long path is shortened as every
    value in a message is, so a test under a deep temporary folder must not spell it out)."""
    return InputError("--file", str(path), rule).with_flags({})


def test_deeply_nested_and_binary_lines_are_refused_by_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 28 item 9: a line nested 5,000 levels deep ended `lift ingest` and `lift audit`
    in a RecursionError traceback (exit 1), a binary audit file in a UnicodeDecodeError."""
    warehouse, before = _ingested(workdir, capsys)
    good = _day(workdir).read_text().splitlines()
    deep = workdir / "deep.jsonl"
    deep.write_text(good[0] + "\n" + '{"a": ' * DEEP + "1" + "}" * DEEP + "\n")
    binary = workdir / "binary.jsonl"
    binary.write_bytes(bytes(range(256)) * 8)
    for command in ("ingest", "audit"):
        message = refused(capsys, "lift", command, deep)
        assert message == file_refusal(deep, "line 2: nests deeper than 64 levels"), message
    message = refused(capsys, "lift", "ingest", binary)
    assert message == file_refusal(binary, "line 1: not valid JSON (Expecting value)"), message
    message = refused(capsys, "lift", "audit", binary)
    assert message == file_refusal(binary, "is not UTF-8 text (byte 128 cannot be decoded)")
    binary_csv = workdir / "binary.csv"
    binary_csv.write_bytes(bytes(range(256)) * 8)
    assert "is not UTF-8 text" in refused(capsys, "lift", "audit", binary_csv)
    long_cell = workdir / "long.csv"
    long_cell.write_text("request_id,audited_outcome\nr1," + "x" * 200_000 + "\n")
    assert "is not valid CSV (field larger than" in refused(capsys, "lift", "audit", long_cell)
    assert digest(warehouse) == before


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_non_finite_literal_in_a_log_is_refused_naming_its_line_and_field(
    workdir: Path, capsys: pytest.CaptureFixture[str], literal: str
) -> None:
    """Issue 28 item 12: a NaN literal was refused as "InternalError(TapeError) at character
    223", no line or field."""
    lines = _day(workdir).read_text().splitlines()
    lines[2] = lines[2].replace('"situation_class": "', f'"score": {literal}, "situation_class": "')
    log = workdir / "nan.jsonl"
    log.write_text("\n".join(lines) + "\n")
    message = refused(capsys, "lift", "ingest", log)
    shown = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf", "1e999": "inf"}[literal]
    assert message == (
        file_refusal(log, f"line 3: holds {shown} at score: numbers must be finite (NaN, infinity)")
    ), message
    for command in ("ingest", "audit"):
        assert "line 3" in refused(capsys, "lift", command, log)
    assert not (workdir / "warehouse.duckdb").exists()


def test_a_request_stored_with_other_content_is_refused_in_one_clean_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 28 item 12: this refusal began with a garbled `error: log=None: log='…'`."""
    warehouse, before = _ingested(workdir, capsys)
    rows = [json.loads(line) for line in _day(workdir).read_text().splitlines()]
    rows[2]["claim_type"] = "other"
    changed = workdir / "changed.jsonl"
    changed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    message = refused(capsys, "lift", "ingest", changed)
    assert message.startswith(
        f"log='1 request already stored with other content': request_id='{rows[2]['request_id']}"
    ), message
    assert f"line 3 of {changed} has claim_type=other" in message
    assert digest(warehouse) == before


def test_table_load_refuses_an_infinite_number_and_keeps_nan_as_missing(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 28 item 11: `table load` stored `inf` from a CSV without a word."""
    import polars as pl

    from eval_pipelines_tests.helpers.cli_calls import stored

    warehouse = workdir / "warehouse.duckdb"
    healthy = workdir / "healthy.csv"
    healthy.write_text("id,price\n1,2.5\n2,NaN\n3,1e308\n4,\n")
    code, _, err = cli(capsys, "table", "load", "prices", "--file", healthy, "--key", "id")
    assert code == 0, err
    before = stored(warehouse), digest(warehouse)
    for literal in ("inf", "-inf"):
        csv = workdir / "prices.csv"
        csv.write_text(f"id,price\n1,2.5\n2,{literal}\n")
        message = refused(capsys, "table", "load", "prices", "--file", csv)
        assert message == (
            f"table.price={literal}: row 1 (positions from 0): numbers must be finite (infinity "
            "is refused; NaN is read as missing)"
        ), message
    parquet = workdir / "prices.parquet"
    pl.DataFrame({"id": [1, 2], "price": [1.0, float("inf")]}).write_parquet(parquet)
    assert refused(capsys, "table", "load", "prices", "--file", parquet).startswith(
        "table.price=inf: row 1"
    )
    lines = workdir / "prices.jsonl"
    lines.write_text('{"id": 1, "price": 1.5}\n{"id": 2, "price": 1e999}\n')
    message = refused(capsys, "table", "load", "prices", "--file", lines)
    assert message == (
        file_refusal(lines, "line 2: holds inf at price: numbers must be finite (NaN, infinity)")
    ), message
    assert (stored(warehouse), digest(warehouse)) == before


def test_case_records_with_a_non_finite_literal_are_refused_by_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found fuzzing beside item 12: case records in JSON Lines holding a NaN literal, or a
    line nested 5,000 deep, were refused as "could not be read as jsonl:
    InternalError(TapeError) at character 28", no line or field."""
    records = workdir / "records.jsonl"
    good = '{"record_key": "a", "text": "steel bolts", "label": "1"}\n'
    for line, shown in (
        ('{"record_key": "b", "text": "nuts", "label": "1", "weight": NaN}', "holds nan at weight"),
        ('{"a": ' * DEEP + "1" + "}" * DEEP, "nests deeper than 64 levels"),
    ):
        records.write_text(good + line + "\n")
        message = refused(capsys, "case", "create", "c", "--records", records, "--levels", "1")
        shown_path = InputError("--records", str(records), "").with_flags({})
        assert message.startswith(f"{shown_path}line 2: {shown}"), message
    assert not (workdir / "warehouse.duckdb").exists()


BAD_NAMES = ["a\nb", "ws'; DROP TABLE lift_settings; --", "w" * 5000, "../x", " ws", "abc\n"]


def test_lift_workspace_ids_levers_and_who_fields_follow_the_name_rule(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 28 item 10: lift workspace ids and levers had no name pattern (a newline, SQL
    punctuation, 5,000 characters, ../x, a leading space were stored); `memo approve --by
    $'abc\\n'` was stored. They follow the one name rule of case and variant names."""
    from eval_pipelines.core.inputs import NAME_RULE

    warehouse = workdir / "warehouse.duckdb"
    code, _, err = cli(capsys, "lift", "settings", "--workspace", "ws-1.a_b", "--lever", "memo-v2")
    assert code == 0, err
    before = digest(warehouse)
    for bad in BAD_NAMES:
        shown = repr(bad) if len(repr(bad)) <= 80 else repr(bad)[:77] + "..."
        message = refused(capsys, "lift", "settings", "--workspace", bad, "--fraction", "0.2")
        assert message == f"workspace_id={shown}: a workspace id is {NAME_RULE}", message
        message = refused(capsys, "lift", "settings", "--workspace", "ws", "--lever", bad)
        assert message == f"--lever={shown}: a lever is {NAME_RULE}", message
        message = refused(capsys, "memo", "approve", "nocase", "m1", "--by", bad)
        assert message == f"--by={shown}: who approves the entry: a name is {NAME_RULE}"
        for command in (
            ("workflow", "approve", "run-1", "--values", "v.json", "--by", bad),
            ("workflow", "activate", "wf", "r1", "--by", bad),
            ("workflow", "save", "wf", "--file", "wf.yaml", "--by", bad),
        ):
            assert refused(capsys, *command).startswith(f"--by={shown}: "), command
    assert digest(warehouse) == before


@pytest.fixture
def lift_in(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., tuple[int, str, str]]:
    """`lift ...` against a given warehouse (a run's warehouse is the environment's)."""

    def run(warehouse: Path, *argv: str | Path) -> tuple[int, str, str]:
        monkeypatch.setenv("EVAL_PIPELINES_WAREHOUSE", str(warehouse))
        return cli(capsys, "lift", *argv)

    return run


def _ok(result: tuple[int, str, str]) -> str:
    code, out, err = result
    assert code == 0, err
    return out


def _claims(lift_in: Callable[..., tuple[int, str, str]], warehouse: Path) -> dict[str, Any]:
    _ok(lift_in(warehouse, "report", "--json"))
    ledger = json.loads(_ok(lift_in(warehouse, "ledger", "--json")))
    shown = ("status", "verdict", "difference", "interval", "nTreated", "nControl", "aa")
    return {c["workspaceId"]: {k: c[k] for k in ("clustersTreated", *shown)} for c in ledger}


def _shared_ids_log(
    workdir: Path, workspace: str, lift: float, seed: int, prefix: str = ""
) -> Path:
    """A day of a workspace's traffic whose request ids are those of every other workspace's
    simulated day (``req-DAY-I-TURN``), unless ``prefix`` sets them apart."""
    config = LiftConfig(workspace, "e2", lever="memo-v2")
    path = workdir / f"{workspace}{prefix}.jsonl"
    return write_log(
        path,
        config,
        true_lift=lift,
        days=1,
        conversations_per_day=200,
        seed=seed,
        request_prefix=prefix,
    )


def _events_by_workspace(warehouse: Path) -> dict[str, int]:
    import duckdb

    with duckdb.connect(str(warehouse), read_only=True) as conn:
        rows = conn.execute("SELECT workspace_id, count(*) FROM lift_events GROUP BY 1").fetchall()
    return dict(rows)


def test_two_workspaces_may_number_their_requests_alike(
    workdir: Path, lift_in: Callable[..., tuple[int, str, str]]
) -> None:
    """Issue 28 item 13: ingest de-duplication was keyed on the request id across all
    workspaces: another workspace's request `req-2026-11-23-0-0` made a file be refused. A
    request is its workspace's (ingest, and the outcome audit of the same id in each)."""
    logs = {
        "wa": _shared_ids_log(workdir, "wa", 0.1, 4),
        "wb": _shared_ids_log(workdir, "wb", 0.0, 5),
    }
    rows = {w: [json.loads(line) for line in p.open()] for w, p in logs.items()}
    assert rows["wa"][0]["request_id"] == rows["wb"][0]["request_id"]
    shared = workdir / "shared.duckdb"
    for workspace, log in logs.items():
        out = _ok(lift_in(shared, "ingest", log))
        assert f"{len(rows[workspace])} stored, 0 already stored" in out, out
    assert _events_by_workspace(shared) == {w: len(r) for w, r in rows.items()}
    both = next(
        i
        for i, (a, b) in enumerate(zip(rows["wa"], rows["wb"], strict=False))
        if a["request_id"] == b["request_id"]
        and {a["exposure_arm"], b["exposure_arm"]} <= {"treated", "lever_holdout"}
        and a["outcome"] is not None
        and b["outcome"] is not None
    )
    request_id = rows["wa"][both]["request_id"]
    audit = workdir / "audit.jsonl"
    audit.write_text(
        "".join(
            json.dumps({"request_id": request_id, "workspace_id": w, "audited_outcome": outcome})
            + "\n"
            for w, outcome in (("wa", True), ("wb", False))
        )
    )
    assert "2 stored" in _ok(lift_in(shared, "audit", audit))
    unscoped = workdir / "unscoped.jsonl"
    unscoped.write_text(json.dumps({"request_id": request_id, "audited_outcome": True}) + "\n")
    before = digest(shared)
    code, _, err = lift_in(shared, "audit", unscoped)
    assert code == 2 and err == (
        f"error: line 1: request_id={request_id!r}: requests of this id are stored in "
        "workspaces wa, wb: give the row's workspace_id (the audit sample's rows have it) "
        "(nothing was stored)\n"
    ), err
    assert digest(shared) == before


@pytest.mark.slow
def test_two_workspaces_sharing_request_ids_each_get_their_own_report(
    workdir: Path, lift_in: Callable[..., tuple[int, str, str]]
) -> None:
    """Issue 28 item 13: the claims of two workspaces numbering their requests alike are those
    of the same traffic with the ids kept apart (the report's conflicting-copies rule and its
    audit join are per workspace). Four ingests and two reports:
    test_two_workspaces_may_number_their_requests_alike is its fast companion."""
    logs = {
        "wa": _shared_ids_log(workdir, "wa", 0.1, 4),
        "wb": _shared_ids_log(workdir, "wb", 0.0, 5),
    }
    apart = {"wa": logs["wa"], "wb": _shared_ids_log(workdir, "wb", 0.0, 5, prefix="b-")}
    shared, reference = workdir / "shared.duckdb", workdir / "reference.duckdb"
    for workspace in logs:
        for warehouse, files in ((shared, logs), (reference, apart)):
            _ok(lift_in(warehouse, "settings", "--workspace", workspace, "--lever", "memo-v2"))
            _ok(lift_in(warehouse, "ingest", files[workspace]))
    together = _claims(lift_in, shared)
    assert set(together) == {"wa", "wb"}
    assert together == _claims(lift_in, reference)
